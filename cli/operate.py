"""``diagevo memory ingest/export/verify``: move a run's log in and out as JSONL, and verify it.

What :class:`diagevo.log.LogOperator` serves: the commands that need the interchange format and
the verification of every view, apart from the read commands (:mod:`diagevo.cli.memory`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from diagevo.cli.common import CLIError, DbOpt, JsonOpt, RunOpt, console, emit_json
from diagevo.cli.fixes import call_args, spell_call
from diagevo.cli.safe import plain, text
from diagevo.cli.store import open_store
from diagevo.files.written import replaced
from diagevo.interchange import as_run, export_lines, ingest_events, parse_lines
from diagevo.text.parsing import file_lines, input_file
from diagevo.text.untrusted import json_visible
from diagevo.text.words import plural
from diagevo.views.memory import resolve_run
from diagevo.views.verify import verdict


def ingest(
    file: Annotated[Path, typer.Argument(help="JSONL file of events ('-' for stdin).")],
    db: DbOpt = None,
    run: Annotated[
        str | None, typer.Option("--run", help="Store the file's (single) run under this name, its ids rebased.")
    ] = None,
    json: JsonOpt = False,
) -> None:
    input_file(file)
    events = parse_lines(file_lines(file))  # a bad file is refused before the database is opened
    if not events:
        raise CLIError(f"{'stdin' if str(file) == '-' else file} is empty: no events to ingest")
    if run is not None:
        events = as_run(events, run)
    with open_store(db, create=True, keep_if_refused=False) as store:
        result = ingest_events(store, events)
    if json:
        emit_json(result.__dict__)
    else:
        console.print(
            text(
                f"ingested {plural(result.appended, 'event')} ({result.skipped} already stored) into ",
                _runs(result.runs),
            ),
            soft_wrap=True,
        )


SHOWN_RUNS = 5


def _runs(runs: tuple[str, ...] | list[str]) -> str:
    """``run r1``, ``2 runs: r1, r2``, or the first few of many and how many more (``--json`` lists all)."""
    if len(runs) == 1:
        return f"run {plain(runs[0], limit=200)}"
    shown = ", ".join(plain(r, limit=80) for r in runs[:SHOWN_RUNS])
    more = len(runs) - SHOWN_RUNS
    return f"{len(runs):,} runs: {shown}" + (f", … ({more:,} more; --json lists them all)" if more > 0 else "")


def export(
    db: DbOpt = None,
    run: RunOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write here instead of stdout ('-': stdout).")] = None,
) -> None:
    with open_store(db, readonly=True) as store:
        run_id = resolve_run(store, run)
        lines = (json_visible(line) for line in export_lines(store, run_id))  # the same JSON, safe to print
        if out is None or str(out) == "-":
            sys.stdout.writelines(lines)
            return
        n = 0
        with replaced(out) as fh:
            for line in lines:
                fh.write(line)
                n += 1
    console.print(text(f"wrote {out} ({plural(n, 'event')} of run ", run_id, ")"), soft_wrap=True)


def verify(
    db: DbOpt = None,
    run: RunOpt = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Every run of the database.")] = False,
    json: JsonOpt = False,
) -> None:
    if all_runs and run is not None:
        raise CLIError("give --run or --all, not both")
    with open_store(db, readonly=True, name_passed=False) as store:  # a verdict names every row passed over
        verdicts = [verdict(store, run_id) for run_id in (store.runs() if all_runs else [resolve_run(store, run)])]
        runless = [f"seq {seq}: {why} (a row of no run)" for seq, why in store.runless.items()]
    if json:
        shown = [_verdict_json(v) for v in verdicts]
        emit_json({"runs": shown, **({"runless": runless} if runless else {})} if all_runs else shown[0])
    else:
        for v in verdicts:
            _print_verdict(v, all_runs)
        for line in runless:
            console.print(text(("✗", "red"), " ", line))
    if not all(v.ok for v in verdicts) or runless:
        raise typer.Exit(1)


def _verdict_json(v: Any) -> dict[str, Any]:
    """A verdict as ``--json`` prints it: the way back as the command's words, where there is one."""
    return {**v.to_json(), **({"way_back": call_args(v.way_back)} if v.way_back is not None else {})}


def _print_verdict(v: Any, named: bool) -> None:
    """A line per problem of a run, or the one line that says it holds."""
    for p in v.problems:
        console.print(text(("✗", "red"), " ", f"run {v.run}: " if named else "", p))
    if v.way_back is not None:
        console.print(text("  the way back (the rounds before the first bad event): ", spell_call(v.way_back)))
    if v.ok:
        where = f" (last event: seq {v.last['seq']}, hash {v.last['hash']})" if v.last else ""
        console.print(
            text(
                ("✓", "green"),
                f" run {v.run}: hash chain intact, texts match their keys, invariants hold, "
                f"saved views equal the log{where}",
            )
        )
