"""The log: an append-only, hash-chained record of events, one recorder per backend.

:func:`open_log` opens the recorder a URL names (``sqlite:///FILE``,
``postgresql+psycopg://...``, ``memory://NAME``); :class:`Recorder` is what every backend
implements (:mod:`diagevo.log.recorder`), the union of three roles a caller is typed against:
:class:`EventWriter`, :class:`EventReader` and :class:`LogOperator`. What the events mean, and everything derived from
them, is :mod:`diagevo.views`; the schema and its migrations are :mod:`diagevo.log.schema`.
"""

from __future__ import annotations

from diagevo.catalog import Stamp, StoredEvent
from diagevo.log.backends import open_log, sqlite_path
from diagevo.log.chain import GENESIS_HASH
from diagevo.log.errors import (
    ConflictError,
    MissingDatabase,
    RunBusy,
    SchemaOutdated,
    StoreError,
    UnreadableRowError,
)
from diagevo.log.recorder import (
    AppendResult,
    EventReader,
    EventWriter,
    LogOperator,
    Recorder,
    ViewState,
    payload,
)
from diagevo.log.stored import RawRow

__all__ = [
    "GENESIS_HASH",
    "AppendResult",
    "ConflictError",
    "EventReader",
    "EventWriter",
    "LogOperator",
    "MissingDatabase",
    "RawRow",
    "Recorder",
    "RunBusy",
    "SchemaOutdated",
    "Stamp",
    "StoreError",
    "StoredEvent",
    "UnreadableRowError",
    "ViewState",
    "open_log",
    "payload",
    "sqlite_path",
]
