"""The entry points of the public API that are not a module's own: opening a store by URL, the
installed version."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed

from diagevo.log import Recorder, open_log
from diagevo.text.calls import validated
from diagevo.text.urls import resolve_db_url


@validated
def open_store(url: str | None = None, *, create: bool = True, readonly: bool = False) -> Recorder:
    """The event store at ``url`` (default: ``$DIAGEVO_DB``, else ``sqlite:///diagevo.db``),
    migrated to the current schema: the one way to open a log, for a trainer and for the CLI.
    With ``create=False`` a missing SQLite file is :class:`~diagevo.errors.NotFound` instead of
    a new database; ``readonly`` opens SQLite read-only (a read-only mount works) for a caller
    that only reads. Use it as a context manager (or call ``close()``)."""
    return open_log(resolve_db_url(url), create=create, readonly=readonly)


def version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare checkout)."""
    try:
        return installed("diagevo")
    except PackageNotFoundError:
        return "unknown"
