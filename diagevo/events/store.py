"""The event store: an append-only, hash-chained log, one recorder per backend.

``EventStore(url)`` (the :class:`diagevo.events.recorder.Recorder` interface) opens the recorder
of the backend the URL names: :mod:`diagevo.events.sqlite` (``sqlite:///FILE``),
:mod:`diagevo.events.postgres` (``postgresql+psycopg://...``) or :mod:`diagevo.events.inmemory`
(``memory://NAME``). Each backend module holds everything specific to it; the schema and
ownership checks are :mod:`diagevo.events.ownership`, the projections' caches (snapshots,
checkpoints) :mod:`diagevo.events.projections`. This module keeps the names callers import.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagevo.events.backends import backend_of, normalise_url
from diagevo.events.recorder import (
    ARTIFACT_KEY,
    GENESIS_HASH,
    AppendResult,
    CheckedReader,
    ConflictError,
    MissingDatabase,
    Recorder,
    SchemaOutdated,
    StoredEvent,
    StoreError,
    canonical_event_json,
    chain_hash,
)
from diagevo.events.recorder import prepare as _prepare
from diagevo.events.sql import APPEND_LOCK_KEY as PG_APPEND_LOCK_KEY

if TYPE_CHECKING:
    from diagevo.events.ownership import (
        HEAD_REVISION,
        RevisionStatus,
        _alembic_config,
        current,
        head_revision,
        revision_status,
        upgrade,
    )

# the schema names come from ownership, which needs SQLAlchemy: loaded when first asked for
_OWNERSHIP = frozenset({"HEAD_REVISION", "RevisionStatus", "_alembic_config", "current", "head_revision", "revision_status", "upgrade"})


def __getattr__(name: str) -> Any:
    if name in _OWNERSHIP:
        from diagevo.events import ownership

        return getattr(ownership, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

EventStore = Recorder

__all__ = [
    "ARTIFACT_KEY",
    "GENESIS_HASH",
    "HEAD_REVISION",
    "PG_APPEND_LOCK_KEY",
    "AppendResult",
    "CheckedReader",
    "ConflictError",
    "EventStore",
    "MissingDatabase",
    "Recorder",
    "RevisionStatus",
    "SchemaOutdated",
    "StoreError",
    "StoredEvent",
    "_alembic_config",
    "_prepare",
    "canonical_event_json",
    "chain_hash",
    "current",
    "head_revision",
    "revision_status",
    "sqlite_path",
    "upgrade",
]


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for other databases and in-memory SQLite)."""
    from diagevo.events.sqlite import plain_file

    plain = plain_file(url)
    if plain is not None:
        return plain
    path_of = getattr(backend_of(url), "sqlite_path", None)
    return path_of(normalise_url(url)) if path_of is not None else None
