"""Shared CLI plumbing: options, opening the store, one-line errors, JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)

DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="Database URL (default: $DIAGEVO_DB, else sqlite:///diagevo.db)."),
]
RunOpt = Annotated[str | None, typer.Option("--run", help="Run id (default: the latest run).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 1."""


class Interrupted(CLIError):
    """Ctrl-C, with a one-line account of where and how to go on: exit code 130."""


@contextmanager
def open_store(db: str | None, *, create: bool = False) -> Iterator[Any]:
    """The event store at ``db``. Read commands leave ``create`` off, so a missing SQLite file is
    ``no database at PATH`` instead of a new empty one; writers (train, ingest, diagnose) set it."""
    from diagevo.urls import resolve_db_url
    from diagevo.events.store import EventStore

    store = EventStore(resolve_db_url(db), create=create)
    try:
        yield store
    finally:
        store.close()


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")


def fail(message: str) -> None:
    raise CLIError(message)
