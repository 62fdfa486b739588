"""The event log: event schemas, SQL tables and the append-only :class:`EventStore`."""

from diagevo.events.schemas import EVENT_TYPES, SCHEMA_VERSION, TEXT_FIELDS, EventIn, InvalidEvent, validate_event
from diagevo.events.store import (
    AppendResult,
    ConflictError,
    EventStore,
    RevisionStatus,
    SchemaOutdated,
    StoredEvent,
    StoreError,
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
    "RevisionStatus",
    "SchemaOutdated",
    "StoreError",
    "StoredEvent",
    "validate_event",
]
