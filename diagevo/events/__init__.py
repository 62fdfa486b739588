"""The event log: event schemas, SQL tables and the append-only :class:`EventStore` (the
:class:`Recorder` interface; one recorder per backend: SQLite, PostgreSQL, in-memory).

Every name is loaded lazily: importing the schemas (as the pure ``memory`` package does) does
not pull in SQLAlchemy and Alembic, and a read command that opens the store does not build the
schemas' pydantic models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagevo.events.schemas import EVENT_TYPES, SCHEMA_VERSION, TEXT_FIELDS, EventIn, InvalidEvent, validate_event
    from diagevo.events.store import (
        AppendResult,
        ConflictError,
        EventStore,
        Recorder,
        RevisionStatus,
        SchemaOutdated,
        StoredEvent,
        StoreError,
    )

_STORE_NAMES = frozenset(
    {"AppendResult", "ConflictError", "EventStore", "Recorder", "RevisionStatus", "SchemaOutdated", "StoreError", "StoredEvent"}
)

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "TEXT_FIELDS",
    "AppendResult",
    "ConflictError",
    "EventIn",
    "EventStore",
    "InvalidEvent",
    "Recorder",
    "RevisionStatus",
    "SchemaOutdated",
    "StoreError",
    "StoredEvent",
    "validate_event",
]


_SCHEMA_NAMES = frozenset({"EVENT_TYPES", "SCHEMA_VERSION", "TEXT_FIELDS", "EventIn", "InvalidEvent", "validate_event"})


def __getattr__(name: str) -> Any:
    if name in _STORE_NAMES:
        from diagevo.events import store

        return getattr(store, name)
    if name in _SCHEMA_NAMES:
        from diagevo.events import schemas

        return getattr(schemas, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
