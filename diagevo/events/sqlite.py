"""The SQLite backend, whole: its engine (busy timeout, ``synchronous``, WAL once the file is
known to be diagevo's, read-only opening), how writers exclude each other (``BEGIN IMMEDIATE``),
how rows go in (``executemany``), and what "empty" means for a file.

Writers are serialised so that the order of ``seq`` is the order of commit: the write lock is
taken up front with ``BEGIN IMMEDIATE`` (WAL, busy timeout). Commits are ``synchronous = FULL``
(durable across a power loss) unless the URL asks for ``?synchronous=normal``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine

from diagevo.events.recorder import MAX_PARAMS, MissingDatabase, StoreError
from diagevo.events.sql import EVENT_COLUMNS, N_COLUMNS, SQLRecorder

BUSY_TIMEOUT_S = 30.0
SYNCHRONOUS = ("full", "normal")  # durability levels a URL may ask for
RETAINED = "type = 'question.scored' AND json_extract(data, '$.retained') = 1"


class SQLiteRecorder(SQLRecorder):
    """The event log in a SQLite file."""

    P = "?"
    NO_INDEX = "+"  # SQLite: a unary plus takes the column out of index selection
    RETAINED = RETAINED

    def _exclusive(self, conn: Connection) -> None:
        conn.execution_options(sqlite_begin="IMMEDIATE")

    def _order(self, after_seq: int, types: Collection[str] | None, round: int | None) -> str:
        """Without a seq range but with a round or types, SQLite's planner would rather walk the
        whole run in (run_id, seq) order than sort the few rows the round or type index finds;
        ``+seq`` tells it to sort them."""
        if after_seq <= 0 and (round is not None or types is not None):
            return "ORDER BY +seq"
        return "ORDER BY seq"

    def _by_seq(self) -> str:
        """The covering (run_id, round, type) index would be scanned whole otherwise."""
        return " INDEXED BY ix_events_run_seq"

    def _insert_rows(self, cur: Any, rows: list[tuple[Any, ...]]) -> None:
        cur.executemany(f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join('?' * N_COLUMNS)})", rows)

    def _existing_in_run(self, cur: Any, run: str, ids: list[str]) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(ids), MAX_PARAMS):
            chunk = ids[i : i + MAX_PARAMS]
            cur.execute(f"SELECT event_id FROM events WHERE run_id = ? AND event_id IN ({','.join('?' * len(chunk))})",
                        [run, *chunk])
            found.update(r[0] for r in cur.fetchall())
        return found

    def _is_dbapi_error(self, exc: BaseException) -> bool:
        from sqlalchemy import exc as sa_exc

        return isinstance(exc, (sa_exc.DBAPIError, sqlite3.Error))

    def _is_integrity_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)


RECORDER = SQLiteRecorder


# --- engine -----------------------------------------------------------------------------------


def _on_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


def synchronous(u: URL) -> str:
    """``?synchronous=`` of a SQLite URL: ``full`` (the default) or ``normal``."""
    value = u.query.get("synchronous", "full")
    if not isinstance(value, str) or value.lower() not in SYNCHRONOUS:
        raise StoreError(f"synchronous={value!r} in the database URL: use one of {', '.join(SYNCHRONOUS)}")
    return value.lower()


def read_only(u: URL) -> URL:
    """``u`` opened read-only: ``mode=ro``, so nothing can be written through it; and
    ``immutable=1`` where SQLite could not create the ``-shm``/``-wal`` files a WAL database
    needs (a directory that is not writable: a read-only mount, a shared results folder)."""
    db = u.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return u
    path = Path(db).resolve()
    sidecars = all(path.with_name(path.name + s).exists() for s in ("-wal", "-shm"))
    params = {"mode": "ro", "uri": "true"}
    if not os.access(path.parent, os.W_OK) and not sidecars:
        params["immutable"] = "1"
    return u.set(database=f"file:{quote(str(path))}").update_query_dict(params)


def make_engine(u: URL, wal: Callable[[], bool], readonly: bool) -> Engine:
    """Every connection gets the busy timeout and the ``synchronous`` level; WAL (a persistent
    change to the file) only once ``wal()`` says the file is diagevo's."""
    sync = synchronous(u).upper()
    u = u.difference_update_query(["synchronous"])
    if readonly:
        u = read_only(u)
    engine = create_engine(u, connect_args={"timeout": BUSY_TIMEOUT_S})

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # the driver must not BEGIN on its own; see _on_begin
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if wal() and not readonly:
            cur.execute("PRAGMA journal_mode = WAL")
        # FULL: a commit survives a power loss (the log is the source of truth);
        # NORMAL in WAL mode survives a crash of the process only, and is faster
        cur.execute(f"PRAGMA synchronous = {sync}")
        cur.close()

    event.listen(engine, "connect", on_connect)
    event.listen(engine, "begin", _on_begin)
    return engine


# --- ownership --------------------------------------------------------------------------------


def sqlite_path(u: URL) -> Path | None:
    """The file of a SQLite URL (None for in-memory SQLite and ``file:`` URIs)."""
    db = u.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


def missing_database(u: URL) -> MissingDatabase | None:
    path = sqlite_path(u)
    if path is None or path.exists():
        return None
    return MissingDatabase(f"no database at {path}")


def schema_objects(conn: Connection) -> list[str]:
    """Every table, view, index or trigger in the file. None at all is what "empty" means."""
    return sorted({r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")})


def snapshot_reads(conn: Connection) -> Connection:
    """A deferred BEGIN reads one snapshot of the file and writes nothing."""
    return conn


def exclusive(conn: Connection) -> None:
    """Before BEGIN: take the write lock at once (excludes every other writer)."""
    conn.execution_options(sqlite_begin="IMMEDIATE")


def lock(conn: Connection, key: int) -> None:
    """Inside the transaction: ``BEGIN IMMEDIATE`` holds the lock already."""
