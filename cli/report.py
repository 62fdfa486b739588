"""``diagevo report``: the run as one self-contained HTML file, drawn from its log alone."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from diagevo.cli.common import CLIError, DbOpt, JsonOpt, console, emit_json, program
from diagevo.cli.safe import plain, text
from diagevo.cli.store import open_store
from diagevo.report import Comparison, RunReport, comparison_html, report_html
from diagevo.text.untrusted import shell_join
from diagevo.text.urls import redact_url, resolve_db_url, without_password
from diagevo.text.words import plural
from diagevo.views.memory import resolve_run


def report_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write ('-': standard output).")] = Path(
        "report.html"
    ),
    db: DbOpt = None,
    run: Annotated[
        list[str] | None,
        typer.Option(
            "--run", help="Run id (default: the latest run); give it again to compare runs: --run A --run B ..."
        ),
    ] = None,
    json: JsonOpt = False,
) -> None:

    to_stdout = str(out) == "-"
    if to_stdout and json:
        raise CLIError("-o - writes the page to standard output: give --json or -o -, not both")
    if not to_stdout and out.suffix.lower() not in (".html", ".htm"):
        raise CLIError(f"{out}: the report is an .html file")
    if not to_stdout and not out.parent.is_dir():
        raise CLIError(f"no directory {out.parent} to write {out.name} into")
    url = redact_url(resolve_db_url(db))
    plain_url = without_password(resolve_db_url(db))  # in commands: libpq finds the password itself
    asked: list[str | None] = list(run or []) or [None]  # None: the latest run
    twice = next((r for i, r in enumerate(asked) if r in asked[:i]), None)
    if twice is not None:
        raise CLIError(f"--run {plain(twice, limit=80)} is given twice")

    def command(run_id: str, *args: str) -> str:  # runnable as printed: the executable invoked, the database
        return shell_join([program(), *args, "--db", plain_url, "--run", run_id])

    with open_store(db, readonly=True) as store:
        runs = [resolve_run(store, r) for r in asked]  # each must exist
        if len(runs) == 1:
            report: RunReport | Comparison = report_html(store, runs[0], url, partial(command, runs[0]))
        else:  # each run's own report is the single-run report command
            report = comparison_html(store, runs, url, lambda r: command(r, "report"))
    if to_stdout:
        sys.stdout.write(report.html)
        return
    report = report.write(out)
    if json:
        emit_json(report.to_dict())
        return
    if isinstance(report, Comparison):
        what = f"{len(report.runs)} runs compared ({', '.join(report.runs)})"
    else:
        what = f"run {report.run}, {plural(len(report.rounds), 'committed round')}, {plural(report.causes, 'cause')}"
    line = text(f"wrote {out} ({(report.size or 0) / 1024:.0f} KiB): {what}; it opens offline in any browser")
    console.print(line, soft_wrap=len(runs) > 1)  # a comparison's list of runs is not wrapped
