"""``--follow`` of ``memory events`` and ``memory stats``: the run to follow (waited for while no
process has started it), then a line, or a JSON line, for each thing another process appends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import suppress
from functools import partial
from typing import Annotated, Any

import typer
from rich.text import Text

from diagevo.cli.common import console, emit_json, err_console, json_stdout
from diagevo.cli.safe import text
from diagevo.cli.store import open_store
from diagevo.log import Recorder
from diagevo.results import JsonRow
from diagevo.views.follow import wait_for_run
from diagevo.views.memory import resolve_run

FollowOpt = Annotated[
    bool,
    typer.Option(
        "--follow", "-f", help="Keep reading: print what another process appends to the run (Ctrl-C to stop)."
    ),
]
UntilOpt = Annotated[
    int | None, typer.Option("--until-round", help="With --follow: stop once this round is committed.")
]


def followed_run(store: Recorder, run: str | None, what: str, as_json: bool) -> str:
    """The run to follow: ``run`` (waited for when no process has started it yet), else the
    latest; unless ``as_json``, a dim line that says it is followed and ``what`` comes of it."""
    if run is not None and not store.has_run(run):
        err_console.print(text((f"waiting for run {run} to start (Ctrl-C to stop)", "dim")), soft_wrap=True)
        wait_for_run(store, run)
    run_id = resolve_run(store, run)
    if not as_json:
        console.print(text((f"following run {run_id}{what} (Ctrl-C to stop)", "dim")), soft_wrap=True)
    return run_id


def say(as_json: bool, obj: Any, line: Callable[[], Text]) -> None:
    """One thing followed: ``obj`` as a JSON line, else its line; into a pipe too as it comes."""
    if as_json:
        emit_json(obj)
    else:
        console.print(line(), soft_wrap=True)
    json_stdout().flush()


def follow_rows(
    db: str | None,
    run: str | None,
    what: str,
    as_json: bool,
    rows: Callable[[Recorder, str], Iterator[JsonRow]],
    line: Callable[[JsonRow], Text],
) -> None:
    """``memory stats --follow`` (by round, or by GRPO step): each row ``rows`` gives of the
    followed run, as a JSON line with the run's id, else as ``line`` has it (Ctrl-C ends it:
    nothing more printed, exit 0)."""
    with open_store(db, readonly=True) as store, suppress(KeyboardInterrupt):
        run_id = followed_run(store, run, what, as_json)
        for row in rows(store, run_id):
            say(as_json, {"run": run_id, **row}, partial(line, row))
