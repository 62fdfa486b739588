"""The PostgreSQL backend, whole: its engine, how appenders exclude each other (a
transaction-scoped advisory lock, which needs no UPDATE/DELETE privilege, so the store works
under a role that may only INSERT into ``events``), how rows go in (COPY, texts included),
server-side cursors for long reads, and what "empty" means for a schema.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Connection, Engine

from diagevo.events.recorder import FETCH
from diagevo.events.sql import APPEND_LOCK_KEY, EVENT_COLUMNS, SQLRecorder

# psycopg logs "error ignored ..." when cleaning up after a failed statement; the store turns the
# failure itself into one StoreError line, so without a handler of the application's these stay quiet
logging.getLogger("psycopg").addHandler(logging.NullHandler())

RETAINED = "type = 'question.scored' AND (data::json ->> 'retained') = 'true'"


class PostgresRecorder(SQLRecorder):
    """The event log in a PostgreSQL schema (the connection's current schema)."""

    P = "%s"
    RETAINED = RETAINED

    def _lock_appends(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({APPEND_LOCK_KEY})")

    def _open_cursor(self, raw: Any, stream: bool) -> Any:
        if not stream:
            return raw.cursor()
        cur = raw.driver_connection.cursor(name=f"diagevo_{uuid.uuid4().hex}")
        cur.itersize = FETCH
        return cur

    def _insert_rows(self, cur: Any, rows: list[tuple[Any, ...]]) -> None:
        with cur.copy(f"COPY events ({EVENT_COLUMNS}) FROM STDIN") as copy:  # under the append lock
            for row in rows:
                copy.write_row(row)

    def _existing_in_run(self, cur: Any, run: str, ids: list[str]) -> set[str]:
        # %b: binary arrays, no quoting
        cur.execute("SELECT event_id FROM events WHERE run_id = %s AND event_id = ANY(%b)", (run, ids))
        return {r[0] for r in cur.fetchall()}

    def _is_dbapi_error(self, exc: BaseException) -> bool:
        import psycopg
        from sqlalchemy import exc as sa_exc

        return isinstance(exc, (sa_exc.DBAPIError, psycopg.Error))

    def _is_integrity_error(self, exc: BaseException) -> bool:
        import psycopg

        return isinstance(exc, psycopg.IntegrityError)


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


def lock(conn: Connection, key: int) -> None:
    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({key})")
