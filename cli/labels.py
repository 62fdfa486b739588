"""``diagevo runs tag`` / ``runs note``: label a run, as an event of its log."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from diagevo.cli.common import DbOpt, console
from diagevo.cli.store import open_store
from diagevo.rounds import note_run, tag_run
from diagevo.views.memory import resolve_run


def tag(
    run: Annotated[str, typer.Argument(help="The run.")],
    tags: Annotated[list[str], typer.Argument(help="Tags to add.")],
    remove: Annotated[bool, typer.Option("--remove", help="Take these tags off instead.")] = False,
    db: DbOpt = None,
) -> None:
    with open_store(db) as store:
        resolve_run(store, run)  # an unknown run is likely a typo: say which runs are close
        tag_run(store, run, tags, removed=remove)
    console.print(Text(f"{'untagged' if remove else 'tagged'} run {run}: {', '.join(tags)}"))


def note(
    run: Annotated[str, typer.Argument(help="The run.")],
    text: Annotated[str, typer.Argument(help="The note.")],
    db: DbOpt = None,
) -> None:
    with open_store(db) as store:
        resolve_run(store, run)  # an unknown run is likely a typo: say which runs are close
        note_run(store, run, text)
    console.print(Text(f"noted on run {run}"))
