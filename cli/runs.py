"""``diagevo runs``: the runs of a database (status, rounds, origin, config, tags, notes), and
``runs tag`` / ``runs note`` to label them."""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from cli.common import DbOpt, JsonOpt, console, emit_json, open_store, spell
from diagevo.errors import Hint

runs_app = typer.Typer(
    help="The runs of a database: status, rounds, origin, config; tag and note them.",
    invoke_without_command=True,
)

STATUS_STYLE = {"complete": "green", "in progress": "cyan", "interrupted": "yellow"}


@runs_app.callback()
def runs(ctx: typer.Context, db: DbOpt = None, json: JsonOpt = False) -> None:
    """List the runs: id, status (complete, in progress, interrupted), rounds committed of those
    asked for, created, forked from, the config fields that differ from the defaults, tags."""
    if ctx.invoked_subcommand is not None:
        return
    from diagevo.views.runs import runs as summaries

    with open_store(db, readonly=True) as store:
        found = summaries(store)
    if json:
        emit_json({"runs": [r.to_json() for r in found]})
        return
    if not found:
        console.print(
            Text(f"no runs in this database yet: start one with `{spell(Hint(('train',), store.url))}`"), soft_wrap=True
        )
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    table.add_column("run", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("rounds", justify="right", no_wrap=True)
    table.add_column("created", no_wrap=True)
    for head in ("forked from", "config (not the defaults)", "tags"):
        table.add_column(head, overflow="fold")
    for r in found:
        rounds = f"{r.committed}/{r.target}" if r.target is not None else str(r.committed)
        status = Text(r.status, style=STATUS_STYLE.get(r.status, ""))
        if r.status == "in progress" and r.writer:
            status.append(f"\n{r.writer}", style="dim")
        elif r.open_round is not None:
            status.append(f" (round {r.open_round} open)")
        origin = f"{r.forked_from['run']} @ round {r.forked_from['round']}" if r.forked_from else ""
        changed = " ".join(f"{k}={v}" for k, v in r.changed.items())
        table.add_row(
            Text(r.run),
            status,
            rounds,
            r.created[:16].replace("T", " "),
            Text(origin),
            Text(changed),
            Text(", ".join(r.tags)),
        )
    console.print(table)


@runs_app.command("tag")
def tag(
    run: Annotated[str, typer.Argument(help="The run.")],
    tags: Annotated[list[str], typer.Argument(help="Tags to add.")],
    remove: Annotated[bool, typer.Option("--remove", help="Take these tags off instead.")] = False,
    db: DbOpt = None,
) -> None:
    """Tag a run (stored as a ``run.tagged`` event)."""
    from diagevo.rounds import tag_run

    with open_store(db) as store:
        tag_run(store, run, tags, removed=remove)
    console.print(Text(f"{'untagged' if remove else 'tagged'} run {run}: {', '.join(tags)}"))


@runs_app.command("note")
def note(
    run: Annotated[str, typer.Argument(help="The run.")],
    text: Annotated[str, typer.Argument(help="The note.")],
    db: DbOpt = None,
) -> None:
    """Add a free-text note to a run (stored as a ``run.noted`` event)."""
    from diagevo.rounds import note_run

    with open_store(db) as store:
        note_run(store, run, text)
    console.print(Text(f"noted on run {run}"))
