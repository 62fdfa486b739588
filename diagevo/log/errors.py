"""What a backend of the log refuses, each a :class:`~diagevo.errors.DiagevoError` by what a
caller can do about it."""

from __future__ import annotations

from diagevo.errors import Conflict, DiagevoError, NotADiagevoDatabase, NotFound


class StoreError(DiagevoError):
    """Base of the log's errors; the message is one line meant for the user."""


class UnreadableRowError(StoreError):
    """A stored row the log cannot go on past: the last row of the run an append chains onto
    (its hash not text), the texts a read asked for altered. The one error an odd row raises;
    every other odd row is passed over and named (:mod:`diagevo.views.admission`). Its message
    names the run and the seq, in one line."""


class LockTimeout(StoreError, Conflict):
    """A lock was not free within its bound (an append's ``lock_wait_s``, a migration's): the
    message names who holds it (a :class:`~diagevo.errors.Conflict`: retry once that session is done)."""


class ConflictError(StoreError, Conflict):
    """``expected_last_seq`` did not match: the run moved on. Nothing was stored."""


class RunBusy(StoreError, Conflict):
    """Another process holds the run's writer lease."""


class MissingDatabase(StoreError, NotFound):
    """The SQLite file a read names does not exist (nothing is created)."""


class SchemaOutdated(StoreError, NotADiagevoDatabase):
    """The database is at an older revision (or empty and auto-migration is off)."""
