"""``diagevo report``: the run as one self-contained HTML file, drawn from its log alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.common import CLIError, DbOpt, JsonOpt, RunOpt, console, emit_json, open_store, program
from cli.safe import text
from diagevo.untrusted import shell_join


def report_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path("report.html"),
    db: DbOpt = None,
    run: RunOpt = None,
    json: JsonOpt = False,
) -> None:
    """Write an offline HTML report of a run: accuracy, memory lifecycle, schedule, questions, every cause's story, trees, timing, config."""
    from diagevo.config import redact_url, resolve_db_url
    from diagevo.urls import without_password
    from diagevo.words import plural
    from diagevo.views.memory import resolve_run
    from diagevo.report import write_report

    if out.suffix.lower() not in (".html", ".htm"):
        raise CLIError(f"{out}: the report is an .html file")
    if not out.parent.is_dir():
        raise CLIError(f"no directory {out.parent} to write {out.name} into")
    url = redact_url(resolve_db_url(db))
    plain_url = without_password(resolve_db_url(db))  # in commands: libpq finds the password itself
    with open_store(db, readonly=True) as store:
        run_id = resolve_run(store, run)

        def command(*args: str) -> str:  # runnable as printed: the executable invoked, the database
            return shell_join([program(), *args, "--db", plain_url, "--run", run_id])

        data = write_report(store, run_id, out, url, command)
    size = out.stat().st_size
    if json:
        emit_json({"run": run_id, "path": str(out), "bytes": size, "rounds": data.committed, "causes": len(data.stories)})
        return
    console.print(text(
        f"wrote {out} ({size / 1024:.0f} KiB): run {run_id}, {plural(len(data.committed), 'committed round')}, "
        f"{plural(len(data.stories), 'cause')}; it opens offline in any browser"
    ))


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
