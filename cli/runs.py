"""``diagevo runs``: the runs of a database (status, rounds, origin, config, tags, notes).

``runs tag`` / ``runs note``, which label them through the round protocol, are
:mod:`diagevo.cli.labels`'s: the list loads none of the protocol.
"""

from __future__ import annotations

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from diagevo.cli.app import RunsGroup
from diagevo.cli.common import DbOpt, JsonOpt, console, emit_json, spell
from diagevo.cli.safe import plain
from diagevo.cli.store import open_store
from diagevo.text.untrusted import shorten
from diagevo.views.runs import RunSummary
from diagevo.views.runs import runs as summaries

runs_app = typer.Typer(cls=RunsGroup, invoke_without_command=True)

STATUS_STYLE = {
    "complete": "green",
    "in progress": "cyan",
    "interrupted": "yellow",
    "forked": "magenta",
    "what-if": "magenta",
}


@runs_app.callback()
def runs(ctx: typer.Context, db: DbOpt = None, json: JsonOpt = False) -> None:
    """List the runs: id, trainer, status (complete, in progress, interrupted: diagevo train's,
    resumable; open round t: another trainer's, waiting for it; forked: not continued; what-if:
    a run's memory re-decided under other settings, memory whatif; and each row its readers
    pass over, unreadable or refused by the rules: passed over at seq N, and why), rounds
    committed of those asked for, created, forked from, tags, notes, the config fields that differ
    from the defaults."""
    if ctx.invoked_subcommand is not None:
        return

    with open_store(db, readonly=True) as store:
        found = summaries(store)
    if json:
        emit_json({"runs": [r.to_json() for r in found]})
        return
    if not found:
        console.print(
            Text(
                f"no runs in this database yet: start one with `{spell('train', db=store.url)}`, or run your "
                "own trainer through the round protocol "
                f"(`{spell('round', 'start', '--run', 'RUN', db=store.url)}`)"
            ),
            soft_wrap=True,
        )
        return
    # what tells a run apart goes under its id, a line each (origin, tags, each config field that
    # differs from the defaults): columns of their own are squeezed to a few characters a line
    # on an 80-column terminal
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    # as wide as the widest id, origin, tag list or config change, and no wider than leaves the
    # other columns their room on this terminal (at 80 columns too: they are never cut); a note
    # is cut to that width
    widest = max(len(line) for r in found for line in _card(r, 0).plain.splitlines() if not line.startswith("  note"))
    statuses = max(len("status"), *(len(r.status) for r in found))
    others = statuses + len("rounds") + len("2026-01-01 00:00") + 15  # with the padding and edges
    first = max(min(widest, 44, console.width - others), 20)
    cards = [_card(r, max(first - len("  note: "), 12)) for r in found]
    table.add_column("run (origin, tags, notes, config changes)", overflow="fold", min_width=first)
    table.add_column("status")
    table.add_column("rounds", justify="right", no_wrap=True)
    table.add_column("created", no_wrap=True)
    for r, card in zip(found, cards, strict=True):
        rounds = f"{r.committed}/{r.target}" if r.target is not None else str(r.committed)
        status = Text(r.status, style=STATUS_STYLE.get(r.status, "blue" if r.status.startswith("open") else ""))
        if r.status == "in progress" and r.writer:
            status.append(f"\n{r.writer}", style="dim")
        elif r.open_round is not None and not r.status.startswith("open"):
            status.append(f"\nround {r.open_round} open", style="dim")
        for passed in r.passed_over:  # a row its readers pass over, and why: memory verify names every one
            status.append(
                f"\npassed over at seq {passed['seq']}: {plain(shorten(str(passed['why']), 64), limit=None)}",
                style="yellow",
            )
        table.add_row(card, status, rounds, r.created[:16].replace("T", " "))
    console.print(table)


def _card(r: RunSummary, note_width: int) -> Text:
    """A run's id and, dimmed below it, where it was forked from, its tags, notes, config changes
    and trainer."""
    card = Text(r.run)
    fork = r.forked_from
    changed = None if fork is None else fork.changed()
    if fork is not None and changed is not None:
        card.append(f"\n  {plain(f'what-if of {fork.run} through round {fork.round}: {changed}')}", style="dim")
    elif fork is not None:
        card.append(f"\n  forked from {fork.run} @ round {fork.round}", style="dim")
    if r.tags:
        card.append(f"\n  tags: {', '.join(r.tags)}", style="dim")
    for note in r.notes:  # a person's words: one line each, cut to the column (--json has them whole)
        shown = plain(note, limit=None)
        card.append(f"\n  note: {shorten(shown, note_width)}", style="dim")
    for k, v in r.changed.items():
        card.append(f"\n  {k}={v}", style="dim")
    card.append(f"\n  trainer: {plain(r.trainer, limit=None)}", style="dim")  # who drives it
    return card
