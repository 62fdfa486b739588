"""The SQLite backend, whole: its engine (busy timeout, ``synchronous``, WAL once the file is
known to be diagevo's, read-only opening), how writers exclude each other (``BEGIN IMMEDIATE``),
how rows go in (``executemany``), and what "empty" means for a file.

Writers are serialised so that the order of ``seq`` is the order of commit: the write lock is
taken up front with ``BEGIN IMMEDIATE`` (WAL, busy timeout). Commits are ``synchronous = FULL``
(durable across a power loss) unless the URL asks for ``?synchronous=normal``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from diagevo.errors import BadInput, Call
from diagevo.files.written import database_part
from diagevo.log import backends, revision
from diagevo.log.errors import MissingDatabase, StoreError
from diagevo.log.recorder import busy
from diagevo.log.sql import SQLRecorder
from diagevo.text.urls import redact_url

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection, Engine

BUSY_TIMEOUT_S = 30.0
SYNCHRONOUS = ("full", "normal")  # durability levels a URL may ask for


class SQLiteRecorder(SQLRecorder):
    """The event log in a SQLite file."""

    def __init__(self, url: str, *, create: bool = True, migrate_empty: bool = True, readonly: bool = False) -> None:
        """A read of a plain ``sqlite:///FILE`` at the head revision opens the file directly,
        read-only, without SQLAlchemy; anything else (or anything unexpected) takes the full
        path, which also words every refusal."""
        self._gone: set[str] = set()  # the indexes named INDEXED BY that the file no longer holds
        direct = _open_direct(url) if readonly else None
        if direct is None:
            super().__init__(url, create=create, migrate_empty=migrate_empty, readonly=readonly)
            return
        self.url = url
        self.read_runs = {}
        self.runless = {}
        self._ours = True
        self._engine = direct  # type: ignore[assignment]  # the part of an Engine the reads use

    def _index(self, types: Collection[str] | None, in_round: int | None) -> str:
        """SQLite's planner would rather scan the covering (run_id, round, type) index of the whole
        run than walk the index that serves the read, when a read needs no ``data``."""
        if in_round is not None:
            return " INDEXED BY ix_events_run_round_type"
        if types is not None:
            return " INDEXED BY ix_events_run_type_seq"
        return " INDEXED BY ix_events_run_seq"

    def _key_index(self, field: str) -> str:
        """SQLite's planner would rather walk the whole run in seq order, or a type or round index
        of it, than the id's index and sort the few rows it finds."""
        return " INDEXED BY uq_events_run_event_id" if field == "event_id" else f" INDEXED BY ix_events_{field}"

    def _order(self, after_seq: int, types: Collection[str] | None, in_round: int | None) -> str:
        """Without a seq range but with a round or types, SQLite's planner would rather walk the
        whole run in (run_id, seq) order than sort the few rows the round or type index finds;
        ``+seq`` tells it to sort them."""
        if after_seq <= 0 and (in_round is not None or types is not None):
            return "ORDER BY +seq"
        return "ORDER BY seq"

    def _execute(self, cur: Any, sql: str, params: Any = ()) -> None:
        """An index named ``INDEXED BY`` that is gone (dropped by hand: SQLite would refuse the
        statement) is left out of this read and every later one: the read is slower, never refused."""
        for name in self._gone:
            sql = sql.replace(f" INDEXED BY {name}", "")
        try:
            cur.execute(sql, params)
        except sqlite3.OperationalError as exc:
            gone = str(exc).removeprefix("no such index: ")
            if gone == str(exc) or f" INDEXED BY {gone}" not in sql:
                raise
            self._gone.add(gone)
            self._execute(cur, sql, params)

    def _decoding_anyway(self, cur: Any, exc: Exception) -> AbstractContextManager[sqlite3.Cursor] | None:
        """sqlite3 decodes a text strictly (a row it cannot decode ends the read): a cursor that
        reads it as :class:`NotUTF8`, the connection decoding as before once it is closed (it
        goes back to the pool). Only after a read failed: the reads of a log diagevo wrote pay nothing."""
        if not (isinstance(exc, sqlite3.OperationalError) and str(exc).startswith("Could not decode to UTF-8")):
            return None
        return _lenient(cur.connection)

    # --- the writer lease: a lock file per run beside the database (the OS drops it with its process)

    def _lease_file(self, run: str) -> Path:
        path = backends.sqlite_path(self.url)
        if path is None:
            raise StoreError("a writer lease needs a SQLite file")
        try:
            folder = database_part(path, "leases")  # x.diagevo/leases; a symbolic link there is refused
        except BadInput as exc:
            raise StoreError(str(exc)) from None
        return folder / (hashlib.sha256(run.encode()).hexdigest()[:24] + ".lock")

    @contextmanager
    def lease(self, run: str, holder: str) -> Iterator[None]:
        path = self._lease_file(run)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = _open_lease(path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise StoreError(f"cannot take the writer lease of run {run!r} in {path.parent}: {exc.strerror}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise busy(run, _read_holder(fd)) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.encode(), 0)
            yield
        finally:
            os.close(fd)  # releases the lock

    def lease_holder(self, run: str) -> str | None:
        path = self._lease_file(run)
        try:
            fd = _open_lease(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd) or "another process"
        finally:
            os.close(fd)
        return None


RECORDER = SQLiteRecorder


class NotUTF8(str):
    """A stored text that is not UTF-8 (SQLite keeps any bytes in a text column), as a read that
    met one decodes it (:meth:`SQLiteRecorder._lenient`): its bytes kept (``surrogateescape``), its
    type telling it from a text, as every check of a text column asks (``type(value) is str``), so
    that its row is passed over and named, never shown."""

    __slots__ = ()


def _decoded(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return NotUTF8(raw.decode("utf-8", "surrogateescape"))


@contextmanager
def _lenient(conn: sqlite3.Connection) -> Iterator[sqlite3.Cursor]:
    conn.text_factory = _decoded
    cur = conn.cursor()
    try:
        yield cur
    finally:
        cur.close()
        conn.text_factory = str


def _open_lease(path: Path, flags: int) -> int:
    """The lease file, opened without following a link or waiting on a FIFO; anything but a
    regular file there is a :class:`StoreError` naming it."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise StoreError(f"{path} is not a regular file (a writer lease is one): remove it")
    return fd


def _read_holder(fd: int) -> str | None:
    """What the lease's holder wrote of itself (a line of text, at most a few hundred bytes)."""
    text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    return text or None


# --- the direct read-only path -----------------------------------------------------------------


class _Direct:
    """One read-only sqlite3 connection in the place of SQLAlchemy's engine, for the reads
    (which use ``raw_connection()`` and roll back after each): lending it out, ``close`` and
    ``invalidate`` are no-ops; ``dispose`` closes it. Writes are refused."""

    dialect = SimpleNamespace(loaded_dbapi=sqlite3)  # whose errors are the database's

    def __init__(self, conn: sqlite3.Connection, url: str) -> None:
        self._conn, self._url = conn, url

    def raw_connection(self) -> _Direct:
        return self

    def cursor(self) -> sqlite3.Cursor:
        return self._conn.cursor()

    def rollback(self) -> None:
        self._conn.rollback()

    def close(self) -> None:
        """The connection is lent, not given."""

    def invalidate(self) -> None:
        """Nothing pooled to throw away."""

    def connect(self) -> Any:
        # SQLite's own words for a write through a read-only connection
        raise StoreError(f"write to {redact_url(self._url)} failed: attempt to write a readonly database")

    def dispose(self) -> None:
        self._conn.close()


def _open_direct(url: str) -> _Direct | None:
    path = backends.plain_file(url)
    if path is None or not path.is_file():
        return None
    _check_files(path)
    uri = read_only_uri(path)
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except sqlite3.Error:
        return None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        versions = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        # events with texts: an earlier diagevo's 0001 has none (diagevo.log.old_chain)
        ours = conn.execute("SELECT 1 FROM pragma_table_info('events') WHERE name = 'texts'").fetchall()
    except sqlite3.Error:
        versions = ours = []
    if versions != [(revision.HEAD_REVISION,)] or not ours:
        conn.close()
        return None
    return _Direct(conn, url)


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
    path = sqlite_path(u)
    if path is None:
        return u
    database, _, query = read_only_uri(path).partition("?")
    return u.set(database=database).update_query_string(f"{query}&uri=true")


def _immutable(path: Path) -> bool:
    """Whether SQLite must be told the file cannot change: it could not create the ``-wal`` and
    ``-shm`` files a WAL database needs to be read."""
    sidecars = all(path.with_name(path.name + s).exists() for s in ("-wal", "-shm"))
    return not os.access(path.parent, os.W_OK) and not sidecars


def read_only_uri(path: Path) -> str:
    """The ``file:`` URI that opens ``path`` read-only (see :func:`read_only`)."""
    path = path.resolve()
    return f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if _immutable(path) else "")


def _switch_to_wal(cur: sqlite3.Cursor) -> None:
    """``PRAGMA journal_mode = WAL`` needs the file to itself for a moment. Asked while another
    process commits (on a brand-new file: the migration), SQLite refuses at once rather than
    through the busy handler, since waiting while holding the read lock could deadlock. The
    connection holds nothing between attempts, so it asks again until the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def make_engine(u: URL, wal: Callable[[], bool], readonly: bool) -> Engine:
    """Every connection gets the busy timeout and the ``synchronous`` level; WAL (a persistent
    change to the file) only once ``wal()`` says the file is diagevo's."""
    from sqlalchemy import create_engine, event

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
            _switch_to_wal(cur)
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


def check_url(u: URL, url: str) -> None:
    """Three mistakes that SQLite would report as ``Invalid SQLite URL``, ``disk I/O error`` or
    ``unable to open database file``: a host-style URL (``sqlite://diagevo.db``: two slashes make
    ``diagevo.db`` a host), a path that is a directory, and a path whose directory is missing
    (or is a file); diagevo creates a database file, never its directory."""
    if u.host:
        where = "/".join(p for p in (u.host, u.database) if p)
        raise StoreError(
            f"{redact_url(url)} names a host, not a file: a SQLite file is sqlite:///{where} "
            "(three slashes; four before an absolute path)"
        )
    path = sqlite_path(u)
    if path is not None and path.is_dir():
        raise StoreError(
            f"{redact_url(url)}: {path} is a directory, not a SQLite database file "
            f"(sqlite:///{path / 'diagevo.db'} is a file in it)"
        )
    if path is not None and not path.exists():
        _check_directory(path)
    if path is not None:
        _check_files(path)


def _check_files(path: Path) -> None:
    """The database file and the files SQLite keeps beside it are regular files where they exist:
    SQLite would wait for ever on a FIFO and fail on a device with ``disk I/O error``."""
    for f in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        try:
            mode = os.stat(f).st_mode
        except OSError:  # missing, or not to be looked at: SQLite's own words say what is wrong
            continue
        if not stat.S_ISREG(mode):
            raise StoreError(f"{f} is not a regular file: a SQLite database (and its -wal, -shm, -journal) is one")


def _check_directory(path: Path) -> None:
    """The directory a new database file would go into is there (``path`` does not exist)."""
    parent = path.parent
    try:
        if parent.is_dir():
            return
        is_file = parent.exists()
    except OSError:  # a directory on the way that may not be read: SQLite's own words say so
        return
    if is_file:
        raise MissingDatabase(f"{parent} is a file, not a directory: it cannot hold the database {path.name}")
    raise MissingDatabase(f"no directory {parent} to hold the database {path.name}")


def missing_database(u: URL) -> MissingDatabase | None:
    check_url(u, u.render_as_string(hide_password=True))  # a host-style URL names no missing file
    path = sqlite_path(u)
    if path is None or path.exists():
        return None
    return MissingDatabase(  # `train` creates one, and so does a trainer's first round of the protocol
        f"no database at {path}: start one with",
        Call("open_store", "diagevo.open_store(url, create=True)"),
        then=", or run your own trainer through the round protocol",
        about=path,
    )


def schema_objects(conn: Connection) -> list[str]:
    """Every table, view, index or trigger in the file. None at all is what "empty" means."""
    return sorted({r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")})


def snapshot_reads(conn: Connection) -> Connection:
    """A deferred BEGIN reads one snapshot of the file and writes nothing."""
    return conn


def exclusive(conn: Connection) -> None:
    """Before BEGIN: take the write lock at once (excludes every other writer)."""
    conn.execution_options(sqlite_begin="IMMEDIATE")


def lock(conn: Connection, key: int, wait_s: float) -> None:
    """Inside the transaction: ``BEGIN IMMEDIATE`` holds the lock already (its wait is the
    connection's busy timeout)."""


def lock_timed_out(exc: BaseException) -> bool:
    """Never: a busy file is SQLite's own error."""
    return False


def lock_holder(conn: Connection, key: int) -> str | None:
    return None
