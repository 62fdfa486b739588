"""`diagevo db upgrade|current`: the database schema, through Alembic."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console


db_app = typer.Typer(
    help="Database schema: upgrade to the latest revision, show the current one.", no_args_is_help=True
)

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="Database URL (default: env DIAGEVO_DB, else sqlite:///diagevo.db).", show_default=False),
]

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)


def _fail(message: str) -> typer.Exit:
    from cli.common import runnable

    _err.print(f"error: {runnable(message)}", markup=False)
    return typer.Exit(1)


@db_app.command("upgrade")
def upgrade_cmd(db: DbOption = None) -> None:
    """Migrate the database to the latest schema revision (creates it when empty)."""
    from diagevo.urls import redact_url, resolve_db_url
    from diagevo.events.store import StoreError, upgrade  # alembic: not for `diagevo --help`

    url = resolve_db_url(db)
    try:
        before, after = upgrade(url)
    except StoreError as exc:
        raise _fail(str(exc)) from None
    where = redact_url(url)
    if before == after:
        _out.print(f"{where}: already at revision [bold]{after}[/bold] (head)")
    else:
        _out.print(f"{where}: upgraded from revision {before or '(empty)'} to [bold]{after}[/bold] (head)")


@db_app.command("current")
def current_cmd(
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show the database's schema revision and whether it is up to date (creates nothing)."""
    from diagevo.urls import resolve_db_url
    from diagevo.events.store import StoreError, revision_status

    url = resolve_db_url(db)
    try:
        status = revision_status(url)
    except StoreError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        payload = {
            "db": status.url,
            "current": status.current,
            "head": status.head,
            "state": status.state,
            "up_to_date": status.up_to_date,
        }
        typer.echo(json.dumps(payload))
        return
    from rich.markup import escape

    from cli.common import runnable
    from diagevo.paths import diagevo_command

    upgrade = ("db", "upgrade")
    advice = {
        "up_to_date": "[green]up to date[/green]",
        "outdated": f"[yellow]outdated[/yellow]: {escape(runnable(f'run `{diagevo_command(url, *upgrade)}`'))}",
        "empty": "empty: a writer (`diagevo train`, `memory ingest`, `diagnose`, `db upgrade`) creates the schema",
        "unknown": "[red]unknown revision[/red]: this diagevo is older than the database",
        "foreign": "[red]not a diagevo database[/red]: diagevo will not write into it",
    }[status.state]
    _out.print(f"{status.url}: revision [bold]{status.current or '(none)'}[/bold], head {status.head} - {advice}")
