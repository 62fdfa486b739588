"""The pieces every report page is made of, as typed view data: a chart (a figure's SVG and its
caption), a table (headers and cells already formatted), and the one place markup is trusted.

The templates (``diagevo/report/templates``) only lay these out; the template engine escapes
every text they hold (:mod:`diagevo.report.html`). A figure's SVG is the one markup a page
carries, marked safe in :func:`chart` alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup


@dataclass(frozen=True, slots=True)
class Chart:
    """A figure in a page: ``name`` (its ``data-chart``), its SVG and its caption."""

    name: str
    svg: Markup
    caption: str
    wide: bool = False  # across the whole row of charts


def chart(name: str, svg: str, caption: str, wide: bool = False) -> Chart:
    """A figure (:mod:`diagevo.report.figures`) as a chart of the page."""
    # The one place a page trusts markup. The SVG is what diagevo/report/svg.py wrote: its
    # elements and attributes are that module's own, and every text from the log in it (legend
    # entries, tick labels, titles) went through svg._text, written as XML character data with
    # <, > and & as entities, so no text of a run can close the <svg> or open an element.
    return Chart(name, Markup(svg), caption, wide)


@dataclass(frozen=True, slots=True)
class Column:
    name: str  # the column, the header's title (tooltip)
    title: str  # what the header shows
    left: bool  # aligned left (text), else right (numbers)


@dataclass(frozen=True, slots=True)
class Table:
    columns: list[Column]
    rows: list[list[str]]  # one cell per column, formatted


def cell(value: Any, digits: int = 3) -> str:
    """A value as a table cell shows it: floats to ``digits`` decimals, a missing value as ``–``."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def text(value: object) -> str:
    """A value from the log as a page's text (a missing one: empty)."""
    return "" if value is None else str(value)


def table(
    columns: Sequence[str],
    rows: Iterable[Mapping[str, Any]],
    headers: Mapping[str, str] | None = None,
    left: Iterable[str] = (),
    digits: int = 3,
) -> Table:
    """Rows as a table of ``columns``; ``headers`` renames columns (the full name stays in the
    header's title), ``left`` aligns them left. A header shows its name with spaces for
    underscores, so it wraps and a wide table fits the page."""
    headers = headers or {}
    left = set(left)
    shown = [Column(c, headers.get(c, c.replace("_", " ")), c in left) for c in columns]
    return Table(shown, [[cell(r.get(c), digits) for c in columns] for r in rows])
