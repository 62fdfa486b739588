"""`diagevo db upgrade|current`: the database schema, through Alembic."""

from __future__ import annotations

from typing import Annotated

import typer

from diagevo.cli.common import acting_on, emit_json, spell
from diagevo.cli.fixes import message
from diagevo.cli.safe import error_line, make_console, text
from diagevo.log import StoreError
from diagevo.log.schema import revision_status, upgrade
from diagevo.text.redaction import redact_text
from diagevo.text.urls import redact_url, resolve_db_url

db_app = typer.Typer(no_args_is_help=True)

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="Database URL (default: env DIAGEVO_DB, else sqlite:///diagevo.db).", show_default=False),
]

_out = make_console(highlight=False, soft_wrap=True)
_err = make_console(stderr=True, highlight=False, soft_wrap=True)


def _fail(exc: Exception) -> typer.Exit:
    _err.print(error_line(redact_text(message(exc))))
    return typer.Exit(1)


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
    url = resolve_db_url(db)
    acting_on(url)
    try:
        before, after = upgrade(url, lock_wait_s=lock_wait)
    except StoreError as exc:
        raise _fail(exc) from None
    where = redact_url(url)
    if before == after:
        _out.print(text(f"{where}: already at revision ", (str(after), "bold"), " (head)"))
    else:
        _out.print(text(f"{where}: upgraded from revision {before or '(empty)'} to ", (str(after), "bold"), " (head)"))


@db_app.command("current")
def current_cmd(
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show the database's schema revision and whether it is up to date (creates nothing)."""
    url = resolve_db_url(db)
    acting_on(url)
    try:
        status = revision_status(url)
    except StoreError as exc:
        raise _fail(exc) from None
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
        "empty": text(
            "empty: a writer (`diagevo train`, `memory ingest`, `diagnose`, `db upgrade`) creates the schema"
        ),
        "unknown": text(("unknown revision", "red"), ": this diagevo is older than the database"),
        "foreign": text(("not a diagevo database", "red"), ": diagevo will not write into it"),
    }[status.state]
    _out.print(
        text(f"{status.url}: revision ", (status.current or "(none)", "bold"), f", head {status.head} - ", advice)
    )
