"""The PostgreSQL backend, whole: its engine, how appenders exclude each other (a table lock
taken by the INSERT trigger as the schema's owner, the baseline revision: a role that may only
INSERT into ``events`` takes it, a role that may only read cannot; waited for ``lock_wait_s`` at
most, then refused naming the holder), how rows go in (COPY, streamed as they are hashed; the
database assigns seq and checks every row's chain), server-side cursors for long reads, whose
saved view states a connection trusts, and what "empty" means for a schema.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Engine

from diagevo.log.errors import LockTimeout, StoreError
from diagevo.log.recorder import FETCH, busy
from diagevo.log.sql import EVENT_COLUMNS, SQLRecorder
from diagevo.text.urls import redact_url

# psycopg logs "error ignored ..." when cleaning up after a failed statement; the store turns the
# failure itself into one StoreError line, so without a handler of the application's these stay quiet
logging.getLogger("psycopg").addHandler(logging.NullHandler())

_COLUMNS_BUT_SEQ = EVENT_COLUMNS.removeprefix("seq, ")
_LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout passed


class PostgresRecorder(SQLRecorder):
    """The event log in a PostgreSQL schema (the connection's current schema)."""

    P = "%s"

    def _lock_appends(self, conn: Connection) -> None:
        # an INSERT of no rows fires the statement trigger that takes the append lock (the
        # baseline's): only a role that may INSERT into events can take it, and it waits lock_wait_s
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, int(self.lock_wait_s * 1000))}")
        try:
            conn.exec_driver_sql("INSERT INTO events (event_id) SELECT '' WHERE false")
        except sa_exc.DBAPIError as exc:
            if not lock_timed_out(exc):
                raise
            raise LockTimeout(
                f"the append lock of {redact_url(self.url)} was not free within {self.lock_wait_s:g} s: "
                f"held by {self.append_lock_holder() or 'a transaction that has ended since'}"
            ) from None

    def append_lock_holder(self) -> str | None:
        """Who holds the append lock, as far as this role may see: pid, application name, role,
        and since when its transaction is open."""
        with self._cursor() as cur:
            cur.execute(
                "SELECT l.pid, a.application_name, a.usename, a.xact_start FROM pg_locks l "
                "LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'relation' AND l.granted "
                "AND l.relation = to_regclass('events_append_lock') ORDER BY a.xact_start NULLS LAST LIMIT 1"
            )
            row = cur.fetchone()
        return None if row is None else _session(*row)

    def _open_cursor(self, raw: Any, stream: bool) -> Any:
        if not stream:
            return raw.cursor()
        cur = raw.driver_connection.cursor(name=f"diagevo_{uuid.uuid4().hex}")
        cur.itersize = FETCH
        return cur

    def _insert_rows(self, cur: Any, rows: Iterable[tuple[Any, ...]]) -> None:
        # the database assigns seq (the baseline's insert trigger): the same numbers as the rows',
        # since both continue after the highest seq under the append lock. The rows are made as
        # COPY takes them: the database stores one part of the batch while the next is hashed
        with cur.copy(f"COPY events ({_COLUMNS_BUT_SEQ}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row[1:])

    def _trusted_writers(self) -> str:
        # a state saved by this role or by the owner of the tables (a role that may write the
        # log but not be trusted with the owner's caches saves its own, which the owner never reads)
        return (
            "v.writer IN (current_user, (SELECT pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.oid = "
            "'views'::regclass))"
        )

    # --- the writer lease: a session advisory lock (the server drops it with the connection) --------

    @contextmanager
    def lease(self, run: str, holder: str) -> Iterator[None]:
        raw = self._engine.raw_connection()  # the lease's own session, closed at the end
        try:
            cur = raw.cursor()
            cur.execute(f"SELECT pg_try_advisory_lock({_LEASE_KEY})", (run,))
            got = cur.fetchone()[0]  # type: ignore[index]
            if got:
                cur.execute("SELECT set_config('application_name', %s, false)", (f"diagevo {holder}"[:63],))
            raw.commit()
        except Exception as exc:
            raw.invalidate()
            if self._is_dbapi_error(exc):
                raise StoreError(f"cannot take the writer lease of run {run!r}: {exc}") from None
            raise
        if not got:
            raw.invalidate()
            raise busy(run, self.lease_holder(run))
        try:
            yield
        finally:
            raw.invalidate()  # closes the session: the lock goes with it

    def lease_holder(self, run: str) -> str | None:
        with self._cursor() as cur:
            cur.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                f"AND ((l.classid::bigint << 32) | l.objid::bigint) = {_LEASE_KEY}",
                (run,),
            )
            row = cur.fetchone()
        if row is None:
            return None
        return str(row[0]).removeprefix("diagevo ") or "another process"


# a run's lease key: per schema and run (advisory locks are per database)
_LEASE_KEY = "hashtextextended(current_schema() || '/' || %s, 7)"

RECORDER = PostgresRecorder


def make_engine(u: URL, wal: Callable[[], bool], readonly: bool) -> Engine:
    return create_engine(u, pool_pre_ping=True)


def schema_objects(conn: Connection) -> list[str]:
    """Every table, view, index or sequence in the schema new tables go to."""
    sql = (
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema()"
    )
    return sorted({r[0] for r in conn.exec_driver_sql(sql)})


def snapshot_reads(conn: Connection) -> Connection:
    """REPEATABLE READ: every statement of the transaction sees the same snapshot."""
    return conn.execution_options(isolation_level="REPEATABLE READ")


def exclusive(conn: Connection) -> None:
    """Before BEGIN: nothing (the lock is taken inside the transaction)."""


def lock(conn: Connection, key: int, wait_s: float) -> None:
    """The migrators' lock; it and every lock the migration then waits for (a reader's open
    transaction on a table a migration alters), waited for ``wait_s`` at most."""
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, int(wait_s * 1000))}")
    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({key})")


def lock_timed_out(exc: BaseException) -> bool:
    """Whether a statement failed because ``lock_timeout`` passed."""
    return getattr(getattr(exc, "orig", exc), "sqlstate", None) == _LOCK_NOT_AVAILABLE


def lock_holder(conn: Connection, key: int) -> str | None:
    """The session that most likely held what a migration waited for, as far as this role may
    see: the holder of the migrators' lock ``key``, else the oldest transaction holding a lock on
    a table of this schema (a mode that blocks more first); None when none is held any more."""
    row = conn.exec_driver_sql(
        "SELECT l.pid, a.application_name, a.usename, a.xact_start FROM pg_locks l "
        "LEFT JOIN pg_stat_activity a ON a.pid = l.pid LEFT JOIN pg_class c ON c.oid = l.relation "
        "WHERE l.granted AND l.pid <> pg_backend_pid() "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND ((l.locktype = 'advisory' AND l.objsubid = 1 "
        f"AND ((l.classid::bigint << 32) | l.objid::bigint) = {key}) "
        "OR (l.locktype = 'relation' AND c.relnamespace = to_regnamespace(current_schema()))) "
        "ORDER BY l.locktype = 'advisory' DESC, l.mode = 'AccessShareLock', a.xact_start NULLS LAST LIMIT 1"
    ).fetchone()
    return None if row is None else _session(*row)


def _session(pid: int, app: str | None, role: str | None, since: Any) -> str:
    """A session in words: pid, application name, role, and since when its transaction is open
    (hidden from a role that may not see it)."""
    said = [f"pid {pid}"]
    if app:
        said.append(f"application {str(app)[:63]!r}")
    if role:
        said.append(f"role {role}")
    said.append(
        f"in a transaction since {since.isoformat(timespec='seconds')}" if since else "since: not shown to this role"
    )
    return ", ".join(said)
