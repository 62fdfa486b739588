"""`diagevo db upgrade|current`: the database schema, through Alembic."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from diagevo.cli.common import acting_on, console, emit_json, err_console, spell
from diagevo.cli.fixes import message
from diagevo.cli.safe import error_line, text
from diagevo.log import StoreError
from diagevo.log.schema import migrate, revision_status
from diagevo.text.redaction import redact_text
from diagevo.text.urls import redact_url, resolve_db_url

db_app = typer.Typer(no_args_is_help=True)

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="Database URL (default: env DIAGEVO_DB, else sqlite:///diagevo.db).", show_default=False),
]


@contextmanager
def _database(db: str | None) -> Iterator[str]:
    """The database's URL; a :class:`StoreError` is one line on stderr and exit code 1 (here: a
    program may run ``db_app`` without ``diagevo``'s entry)."""
    url = resolve_db_url(db)
    acting_on(url)
    try:
        yield url
    except StoreError as exc:
        err_console.print(error_line(redact_text(message(exc))), soft_wrap=True)
        raise typer.Exit(1) from None


@db_app.command("upgrade")
def upgrade_cmd(
    db: DbOption = None,
    lock_wait: Annotated[
        float,
        typer.Option(
            "--lock-wait",
            metavar="SECONDS",
            min=0.001,
            max=3600,
            help="PostgreSQL: the longest the migration waits for a lock another session holds; then it fails "
            "naming that session.",
        ),
    ] = 60.0,
) -> None:
    """Migrate the database to the latest schema revision (creates it when empty)."""
    with _database(db) as url:
        before, after = migrate(url, lock_wait_s=lock_wait)
    where = redact_url(url)
    if before.state == "up_to_date":
        console.print(text(f"{where}: already at revision ", (str(after.current), "bold"), " (head)"), soft_wrap=True)
    else:
        was = before.current or "(empty)"
        if before.state == "old_chain":
            was += " of an earlier diagevo's migrations"
        said = text(f"{where}: upgraded from revision {was} to ", (str(after.current), "bold"), " (head)")
        console.print(said, soft_wrap=True)
    for line in after.passed_over:
        console.print(text(f"passed over: {line}"), soft_wrap=True)


@db_app.command("current")
def current_cmd(
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show the database's schema revision and whether it is up to date (creates nothing)."""
    with _database(db) as url:
        status = revision_status(url)
    if as_json:
        payload = {
            "db": status.url,
            "current": status.current,
            "head": status.head,
            "state": status.state,
            "up_to_date": status.up_to_date,
        }
        emit_json(payload)
        return

    advice = {
        "up_to_date": text(("up to date", "green")),
        "outdated": text(("outdated", "yellow"), f": run `{spell('db', 'upgrade', db=url)}`"),
        "old_chain": text(
            ("an earlier diagevo's migrations", "yellow"),
            f": run `{spell('db', 'upgrade', db=url)}` (carries the log over)",
        ),
        "empty": text(
            "empty: a writer (`diagevo train`, `memory ingest`, `diagnose`, `db upgrade`) creates the schema"
        ),
        "unknown": text(("unknown revision", "red"), ": this diagevo is older than the database"),
        "foreign": text(("not a diagevo database", "red"), ": diagevo will not write into it"),
    }[status.state]
    console.print(
        text(f"{status.url}: revision ", (status.current or "(none)", "bold"), f", head {status.head} - ", advice),
        soft_wrap=True,
    )
