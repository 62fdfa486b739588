"""Tables that fit the terminal: columns are kept in order of importance while they fit, the
ones left out are named under the table (``--wide`` or ``--json`` show them all). Headers and
cells are untrusted text (benchmark and metric names, values from the log): shown as
:func:`cli.safe.plain` has them, measured in terminal cells."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from diagevo.cli.safe import make_console, plain, text

# what a column costs beyond its text in a SIMPLE_HEAD table (padding on both sides), and the edge
_GAP = 2
_EDGE = 1


def column_widths(heads: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([cell_len(h), *(cell_len(r[i]) for r in rows)]) + _GAP for i, h in enumerate(heads)]


def fit_columns(
    heads: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    priority: Sequence[int] | None = None,
) -> list[int]:
    """Indices of the columns to show, in their order: the first of ``priority`` (the column
    indices, most important first; default left to right) always, then the others in that
    order while the table stays within ``width``."""
    widths = column_widths(heads, rows)
    order = list(priority) if priority is not None else list(range(len(heads)))
    chosen = order[:1]
    used = _EDGE + sum(widths[i] for i in chosen)
    for i in order[1:]:
        if used + widths[i] <= width:
            chosen.append(i)
            used += widths[i]
    return sorted(chosen)


def print_fitted(
    console: Console,
    heads: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | Text,
    wide: bool = False,
    legend: Mapping[str, str] | None = None,
    priority: Sequence[int] | None = None,
    see_all: str = "--wide or --json for all",
) -> None:
    """Print the table with the columns that fit ``console`` (all of them when ``wide``; the most
    important first, as ``priority`` orders them); under it, what the shown headers that ``legend``
    knows mean (a line of its own, wrapped at the terminal however wide the table), and which
    columns were left out and how to see them (``see_all``)."""
    heads = [plain(h) for h in heads]
    rows = [[plain(c) for c in r] for r in rows]
    shown = list(range(len(heads))) if wide else fit_columns(heads, rows, console.width, priority=priority)
    table = Table(
        title=text(title) if isinstance(title, str) else title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for i in shown:
        table.add_column(text(heads[i]), justify="right", no_wrap=True, min_width=cell_len(heads[i]))
    for r in rows:
        table.add_row(*(Text(r[i]) for i in shown))
    if wide:  # as wide as the table needs, uncropped (the terminal wraps what it cannot show)
        needed = _EDGE + sum(column_widths(heads, rows)) + 1
        # print(width=) would be clamped to the console's, and setting the console's width would
        # pin it: a console of its own, writing where this one writes, in its colours
        wider = make_console(
            file=console.file,
            width=max(console.width, needed),
            force_terminal=console.is_terminal,
            color_system=console.color_system,
        )
        wider.print(table, crop=False)
    else:
        console.print(table)
    dropped = [heads[i] for i in range(len(heads)) if i not in shown]
    meanings = "  ".join(f"{h}: {meaning}" for h, meaning in (legend or {}).items() if h in heads and h not in dropped)
    if meanings:
        console.print(text(meanings))
    if dropped:
        console.print(text((f"left out to fit {console.width} columns: {', '.join(dropped)} ({see_all})", "dim")))
