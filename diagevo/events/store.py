"""The event store: an append-only, hash-chained SQL log (SQLite or PostgreSQL).

Writers are serialised so that the order of ``seq`` is the order of commit: SQLite takes the
write lock up front with ``BEGIN IMMEDIATE`` (WAL, busy timeout), PostgreSQL takes a
transaction-scoped advisory lock. The store assigns ``seq`` itself under that lock, which is
what lets it compute each run's hash chain before inserting and insert with one executemany.
The advisory lock (not ``LOCK TABLE``) is used because it needs no UPDATE/DELETE privilege, so
the store works under a role that may only INSERT into ``events`` and ``artifacts``.

Hot paths (append, iter_rows, read) use the DBAPI cursor directly; everything else SQLAlchemy
Core. The schema is owned by Alembic: a brand-new empty database is migrated to head on first
use, anything else without diagevo's revision (a foreign database, an older or newer revision)
is refused without a single byte written. SQLite is switched to WAL only once the file is known
to be diagevo's, and commits with ``synchronous = FULL`` (durable across a power loss) unless the
URL asks for ``?synchronous=normal``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic_core import from_json as _from_json
from sqlalchemy import create_engine, event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Engine, make_url

from diagevo.errors import Conflict, DiagevoError, NotADiagevoDatabase
from diagevo.events.canonical import canonical_bytes
from diagevo.events.keys import KEY_FIELDS, RETAINED_CONDITION, key_values
from diagevo.events.schemas import SCHEMA_VERSION, TEXT_FIELDS, EventIn
from diagevo.urls import redact_url
from diagevo.errors import NotFound

if TYPE_CHECKING:  # alembic is imported only when a database is not at HEAD_REVISION
    from alembic.config import Config
    from alembic.script import ScriptDirectory

__all__ = [
    "ARTIFACT_KEY",
    "GENESIS_HASH",
    "AppendResult",
    "ConflictError",
    "EventStore",
    "RevisionStatus",
    "SchemaOutdated",
    "StoreError",
    "StoredEvent",
    "canonical_event_json",
    "chain_hash",
    "current",
    "revision_status",
    "sqlite_path",
    "upgrade",
]

GENESIS_HASH = "0" * 64
ARTIFACT_KEY = "$artifact"
BUSY_TIMEOUT_S = 30.0
PG_APPEND_LOCK_KEY = int.from_bytes(b"diagevo1", "big")  # pg_advisory_xact_lock key of appenders
_PG_MIGRATE_LOCK_KEY = int.from_bytes(b"diagevo2", "big")
_OUR_TABLES = frozenset({"events", "artifacts", "snapshots", "checkpoints", "alembic_version"})
SYNCHRONOUS = ("full", "normal")  # SQLite durability levels a URL may ask for
_FETCH = 4096  # rows per DBAPI fetch on the read paths
_SQLITE_MAX_PARAMS = 500



def _loads(text_: str) -> Any:
    """Parse stored JSON: pydantic-core's parser is about 3x faster than ``json.loads`` here."""
    try:
        return _from_json(text_)
    except ValueError:  # anything it is stricter about than the stdlib
        return json.loads(text_)


_json_str: Callable[[str], str] = json.encoder.encode_basestring  # a JSON string literal, non-ASCII kept
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


# --- public types -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    event_id: str
    run: str
    round: int
    type: str
    schema_version: int
    data: dict[str, Any]
    recorded_at: str
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class AppendResult:
    appended: int
    skipped: int
    last_seq: int  # last seq of the batch's run after the append (0 for an empty batch)


# what ``append_checked`` hands its decide function: read(types, *, round=None, after_seq=0)
CheckedReader = Callable[..., list[tuple[int, int, str, dict[str, Any]]]]


class StoreError(DiagevoError):
    """Base of the store's errors; the message is one line meant for the user."""


class ConflictError(StoreError, Conflict):
    """``expected_last_seq`` did not match: the run moved on. Nothing was stored."""


class MissingDatabase(StoreError, NotFound):
    """The SQLite file a read names does not exist (nothing is created)."""


class SchemaOutdated(StoreError, NotADiagevoDatabase):
    """The database is at an older revision (or empty and auto-migration is off)."""


@dataclass(frozen=True)
class RevisionStatus:
    url: str  # redacted
    current: str | None
    head: str
    state: Literal["up_to_date", "outdated", "empty", "unknown", "foreign"]
    objects: tuple[str, ...] = ()  # what a foreign database holds (tables, views, ...)

    @property
    def up_to_date(self) -> bool:
        return self.state == "up_to_date"


# --- hashing ----------------------------------------------------------------------------------


def _canonical_prefix(event_id: str, run: str, round: int, type: str, schema_version: int) -> str:
    return f"[{_json_str(event_id)},{_json_str(run)},{round},{_json_str(type)},{schema_version},"


def canonical_event_json(
    event_id: str, run: str, round: int, type: str, schema_version: int, data_json: str
) -> str:
    """Canonical JSON of ``[event_id, run, round, type, schema_version, data]``.

    ``data_json`` is the data exactly as stored (compact, sorted keys), so this equals
    ``json.dumps([...], sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` without
    serialising the data twice.
    """
    return _canonical_prefix(event_id, run, round, type, schema_version) + data_json + "]"


def chain_hash(prev_hash: str, canonical: str) -> str:
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


# --- errors -----------------------------------------------------------------------------------


def _one_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    return lines[0] if lines else type(orig).__name__


# --- engine -----------------------------------------------------------------------------------


def _sqlite_on_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


def _normalise_url(url: str) -> URL:
    try:
        u = make_url(url)
    except sa_exc.ArgumentError:
        hint = f" (a SQLite file is sqlite:///{url})" if "://" not in url else ""
        raise StoreError(f"invalid database URL {redact_url(url)!r}{hint}") from None
    if u.drivername == "postgresql":
        u = u.set(drivername="postgresql+psycopg")  # psycopg 3 is the driver we ship
    return u


def _synchronous(u: URL) -> str:
    """``?synchronous=`` of a SQLite URL: ``full`` (the default) or ``normal``."""
    value = u.query.get("synchronous", "full")
    if not isinstance(value, str) or value.lower() not in SYNCHRONOUS:
        raise StoreError(f"synchronous={value!r} in the database URL: use one of {', '.join(SYNCHRONOUS)}")
    return value.lower()


def _make_engine(url: str, wal: Callable[[], bool] = lambda: False) -> Engine:
    """An engine for ``url``. On SQLite every connection gets the busy timeout and the
    ``synchronous`` level; WAL (a persistent change to the file) only once ``wal()`` says the
    file is diagevo's."""
    u = _normalise_url(url)
    backend = u.get_backend_name()
    try:
        if backend == "sqlite":
            sync = _synchronous(u).upper()
            u = u.difference_update_query(["synchronous"])
            engine = create_engine(u, connect_args={"timeout": BUSY_TIMEOUT_S})

            def on_connect(dbapi_conn: Any, _record: Any) -> None:
                dbapi_conn.isolation_level = None  # the driver must not BEGIN on its own; see _sqlite_on_begin
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
                if wal():
                    cur.execute("PRAGMA journal_mode = WAL")
                # FULL: a commit survives a power loss (the log is the source of truth);
                # NORMAL in WAL mode survives a crash of the process only, and is faster
                cur.execute(f"PRAGMA synchronous = {sync}")
                cur.close()

            event.listen(engine, "connect", on_connect)
            event.listen(engine, "begin", _sqlite_on_begin)
            return engine
        if backend == "postgresql":
            return create_engine(u, pool_pre_ping=True)
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as exc:
        raise StoreError(f"cannot use database URL {redact_url(url)!r}: {_one_line(exc)}") from None
    raise StoreError(f"unsupported database {backend!r}: use sqlite:///FILE or postgresql+psycopg://...")


@contextmanager
def _connect(engine: Engine, url: str) -> Iterator[Connection]:
    try:
        conn = engine.connect()
    except sa_exc.DBAPIError as exc:
        raise StoreError(f"cannot open database {redact_url(url)}: {_one_line(exc)}") from None
    with conn:
        yield conn


# --- migrations -------------------------------------------------------------------------------


def _migrations_dir() -> Path:
    """``migrations/`` sits next to the ``diagevo`` package (source tree, editable or wheel)."""
    import diagevo

    here = Path(diagevo.__file__).resolve().parent.parent / "migrations"
    if (here / "env.py").is_file():
        return here
    import importlib.util

    spec = importlib.util.find_spec("migrations")
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            if (Path(loc) / "env.py").is_file():
                return Path(loc)
    raise StoreError("cannot find the diagevo migrations directory")


def _alembic_config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_migrations_dir()))
    return cfg


@cache
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config())


# The newest migration; a test checks it against Alembic's head. A database already there is
# opened without importing Alembic at all (about a fifth of a second of every command).
HEAD_REVISION = "0004"


def _revision_if_plain(engine: Engine, url: str) -> str | None:
    """The database's single ``alembic_version`` row when it also has diagevo's events table;
    None when that is not simply so (then Alembic looks closer)."""
    with _connect(engine, url) as conn:
        try:
            rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
            conn.exec_driver_sql("SELECT seq, event_id, run_id, data, hash FROM events WHERE 1 = 0").fetchall()
        except sa_exc.DBAPIError:
            return None
    return str(rows[0][0]) if len(rows) == 1 else None


def head_revision() -> str:
    head = _script().get_current_head()
    if head is None:
        raise StoreError("the diagevo migrations have no head revision")
    return head


def _schema_objects(conn: Connection) -> list[str]:
    """Every table, view, index, trigger or sequence in the database (on PostgreSQL: in the
    schema new tables go to). None at all is what "empty" means."""
    if conn.dialect.name == "sqlite":
        sql = "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
    else:
        sql = (
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema()"
        )
    return sorted({r[0] for r in conn.exec_driver_sql(sql)})


def _status_of(conn: Connection, url: str) -> RevisionStatus:
    head = head_revision()
    from alembic.runtime.migration import MigrationContext

    cur = MigrationContext.configure(conn).get_current_revision()
    state: Literal["up_to_date", "outdated", "empty", "unknown", "foreign"]
    objects: list[str] = []
    if cur == head:
        state = "up_to_date"
    elif cur is not None and cur in {s.revision for s in _script().walk_revisions()}:
        state = "outdated"
    else:
        objects = _schema_objects(conn)
        if cur is None:
            state = "foreign" if objects else "empty"
        else:  # a revision we do not know: a newer diagevo, or another Alembic project
            state = "unknown" if "events" in objects else "foreign"
    return RevisionStatus(redact_url(url), cur, head, state, tuple(objects))


def _consistent_status(engine: Engine, url: str) -> RevisionStatus:
    """``_status_of`` read from one snapshot. Its two reads (the revision, then the schema's
    objects) must not straddle another process's migration commit, or a database half-seen
    as migrated would look foreign. The read transaction writes nothing (SQLite: a deferred
    BEGIN; PostgreSQL: REPEATABLE READ, so every statement sees the same snapshot)."""
    with _connect(engine, url) as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            return _status_of(conn, url)


def _refusal(status: RevisionStatus, url: str = "") -> str:
    """Why a database that is not up to date is not used (one line), with the command that fixes
    it for ``url`` (the database's own URL: the command leaves its password out)."""
    from diagevo.paths import diagevo_command

    upgrade = diagevo_command(url, "db", "upgrade")
    if status.state == "foreign":
        tables = [o for o in status.objects if o != "alembic_version"]
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        return (
            f"{status.url} is not a diagevo database: it holds {shown or 'objects'} and no diagevo "
            "Alembic revision; it is left untouched (use an empty database)"
        )
    if status.state == "unknown":
        return (
            f"database is at revision {status.current}, unknown to this diagevo (expected {status.head}): "
            "upgrade diagevo"
        )
    if status.state == "empty":
        return (
            f"database {status.url} is empty (no diagevo log yet): a writer such as `diagevo train` "
            f"creates it, or run `{upgrade}`"
        )
    return f"database is at revision {status.current}, expected {status.head}: run `{upgrade}`"


@contextmanager
def _migration_tx(engine: Engine, url: str) -> Iterator[Connection]:
    """A transaction that excludes concurrent migrators (and, on SQLite, all writers)."""
    with _connect(engine, url) as conn:
        if conn.dialect.name == "sqlite":
            conn.execution_options(sqlite_begin="IMMEDIATE")
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATE_LOCK_KEY})")
            yield conn


def _upgrade_in(conn: Connection, target: str = "head") -> None:
    cfg = _alembic_config()
    cfg.attributes["connection"] = conn
    from alembic import command

    command.upgrade(cfg, target)


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for other databases and in-memory SQLite)."""
    u = _normalise_url(url)
    db = u.database
    if u.get_backend_name() != "sqlite" or not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


def _missing_database(url: str) -> MissingDatabase | None:
    """``no database at PATH`` when ``url`` names a SQLite file that does not exist."""
    path = sqlite_path(url)
    if path is None or path.exists():
        return None
    return MissingDatabase(f"no database at {path}")


def revision_status(url: str) -> RevisionStatus:
    """Where the database stands relative to the migrations' head (touches nothing; a missing
    SQLite file is an error, not created)."""
    missing = _missing_database(url)
    if missing is not None:
        raise missing
    engine = _make_engine(url)
    try:
        return _consistent_status(engine, url)
    except sa_exc.DBAPIError as exc:
        raise StoreError(f"cannot read the revision of {redact_url(url)}: {_one_line(exc)}") from None
    finally:
        engine.dispose()


def current(url: str) -> str | None:
    """The database's Alembic revision (None when it has none)."""
    return revision_status(url).current


def upgrade(url: str, target: str = "head") -> tuple[str | None, str | None]:
    """Migrate the database to ``target`` (creating a missing SQLite file); returns (revision
    before, revision after). A foreign database or a newer revision is refused untouched."""
    engine = _make_engine(url)
    try:
        with _migration_tx(engine, url) as conn:
            before = _status_of(conn, url)
            if before.state in ("unknown", "foreign"):
                raise StoreError(_refusal(before, url))
            _upgrade_in(conn, target)
            from alembic.runtime.migration import MigrationContext

            after = MigrationContext.configure(conn).get_current_revision()
        return before.current, after
    except sa_exc.DBAPIError as exc:
        raise StoreError(f"upgrade of {redact_url(url)} failed: {_one_line(exc)}") from None
    finally:
        engine.dispose()


# --- the store --------------------------------------------------------------------------------

# (event_id, run, round, type, data_json, canonical utf-8 bytes, [(sha, text), ...], key columns)
_Prepared = tuple[str, str, int, str, str, bytes, list[tuple[str, str]], tuple[str | None, ...]]


_KEY_COLUMNS = ", ".join(KEY_FIELDS)
_NO_ARTIFACTS: list[tuple[str, str]] = []  # shared, never mutated


def _externalise_texts(
    fields: tuple[str, ...], data: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Replace non-empty texts by ``{"$artifact": sha256}``; returns (data, [(sha, text)])."""
    out: dict[str, Any] | None = None
    arts = _NO_ARTIFACTS
    for f in fields:
        value = data.get(f)
        if value and isinstance(value, str):
            sha = hashlib.sha256(value.encode()).hexdigest()
            if out is None:
                out, arts = dict(data), []
            arts.append((sha, value))
            out[f] = {ARTIFACT_KEY: sha}
    return (data if out is None else out), arts


def _prepare(events: Sequence[EventIn]) -> tuple[list[_Prepared], int]:
    """Serialise outside the lock; drops in-batch duplicates (first wins). Returns (rows, dups).

    The canonical JSON of each event (``canonical_event_json``) is built as bytes around its
    data's canonical JSON; the middle part (run, round, type, schema version) repeats within a
    batch and is cached."""
    seen: set[str] = set()
    add = seen.add
    rows: list[_Prepared] = []
    append = rows.append
    middles: dict[tuple[str, int, str], bytes] = {}  # (run, round, type) -> b',"run",round,"type",v,'
    text_fields, json_str, to_json, keys_of = TEXT_FIELDS, _json_str, canonical_bytes, key_values
    eid = ""
    try:
        for ev in events:
            eid = ev.event_id
            if eid in seen:
                continue
            add(eid)
            run, typ, rnd, data = ev.run, ev.type, ev.round, ev.data
            fields = text_fields.get(typ)
            if fields:
                data, arts = _externalise_texts(fields, data)
            else:
                arts = _NO_ARTIFACTS
            data_b = to_json(data)
            middle = middles.get((run, rnd, typ))
            if middle is None:
                middle = middles[run, rnd, typ] = f",{json_str(run)},{rnd},{json_str(typ)},{SCHEMA_VERSION},".encode()
            canon = b"[%b%b%b]" % (json_str(eid).encode(), middle, data_b)
            append((eid, run, rnd, typ, data_b.decode(), canon, arts, keys_of(data)))
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(f"event {eid}: data is not JSON-serialisable: {exc}") from None
    return rows, len(events) - len(rows)


class EventStore:
    """Append-only event log with per-run hash chains, artifacts, snapshots and checkpoints."""

    def __init__(self, url: str, *, create: bool = True, migrate_empty: bool = True) -> None:
        """Open the log at ``url``. ``create=False`` (read-only use) never creates anything: a
        missing SQLite file is ``no database at PATH`` and an empty database is refused, as it
        is with ``migrate_empty=False``. Only a truly empty database is ever migrated."""
        self.url = url
        missing = None if create else _missing_database(url)
        if missing is not None:
            raise missing
        self._ours = False  # set once the schema is known to be diagevo's: then WAL may be set
        self._engine = _make_engine(url, wal=lambda: self._ours)
        self._dialect = self._engine.dialect.name
        self._p = "?" if self._dialect == "sqlite" else "%s"
        try:
            self._ensure_schema(migrate_empty and create)
        except sa_exc.DBAPIError as exc:
            self._engine.dispose()
            raise StoreError(f"cannot open database {redact_url(url)}: {_one_line(exc)}") from None
        except StoreError:
            self._engine.dispose()
            raise

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EventStore({redact_url(self.url)!r})"

    def close(self) -> None:
        self._engine.dispose()

    # --- schema -------------------------------------------------------------------------------

    def _ensure_schema(self, migrate_empty: bool) -> None:
        if _revision_if_plain(self._engine, self.url) == HEAD_REVISION:
            status = None
        else:
            status = _consistent_status(self._engine, self.url)
        if status is not None and not status.up_to_date:
            if status.state != "empty" or not migrate_empty:
                raise SchemaOutdated(_refusal(status, self.url))
            with _migration_tx(self._engine, self.url) as conn:
                status = _status_of(conn, self.url)  # another process may have migrated meanwhile
                if status.state == "empty":
                    _upgrade_in(conn)
                elif not status.up_to_date:
                    raise SchemaOutdated(_refusal(status, self.url))
        self._ours = True
        self._engine.dispose()  # connections opened from here on switch the file to WAL

    # --- transactions -------------------------------------------------------------------------

    @contextmanager
    def _write_tx(self, *, append_lock: bool = False) -> Iterator[Connection]:
        with _connect(self._engine, self.url) as conn:
            if self._dialect == "sqlite":
                conn.execution_options(sqlite_begin="IMMEDIATE")
            try:
                with conn.begin():
                    if append_lock and self._dialect == "postgresql":
                        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_APPEND_LOCK_KEY})")
                    yield conn
            except Exception as exc:
                if isinstance(exc, StoreError) or not _is_dbapi_error(exc):
                    raise
                raise StoreError(f"write to {redact_url(self.url)} failed: {_one_line(exc)}") from None

    @contextmanager
    def _cursor(self, *, stream: bool = False) -> Iterator[Any]:
        """A raw DBAPI cursor; ``stream`` uses a server-side cursor on PostgreSQL."""
        try:
            raw = self._engine.raw_connection()
        except sa_exc.DBAPIError as exc:
            raise StoreError(f"cannot open database {redact_url(self.url)}: {_one_line(exc)}") from None
        try:
            if stream and self._dialect == "postgresql":
                cur = raw.driver_connection.cursor(name=f"diagevo_{uuid.uuid4().hex}")  # type: ignore[union-attr]
                cur.itersize = _FETCH
            else:
                cur = raw.cursor()
            try:
                yield cur
            finally:
                cur.close()
                raw.rollback()
        except Exception as exc:
            if isinstance(exc, StoreError) or not _is_dbapi_error(exc):
                raise
            raise StoreError(f"read from {redact_url(self.url)} failed: {_one_line(exc)}") from None
        finally:
            raw.close()

    # --- append -------------------------------------------------------------------------------

    def append(self, events: Sequence[EventIn], *, expected_last_seq: int | None = None) -> AppendResult:
        """Append a batch in one transaction. Already stored event ids are skipped silently."""
        if not events:
            return AppendResult(0, 0, 0)
        prepared, dups = _prepare(events)
        runs = {p[1] for p in prepared}
        if expected_last_seq is not None and len(runs) > 1:
            raise StoreError("expected_last_seq needs a batch of a single run")
        result_run = prepared[-1][1]
        with self._write_tx(append_lock=True) as conn:
            cur = conn.connection.cursor()
            try:
                heads = {run: self._run_head(cur, run) for run in runs}
                if expected_last_seq is not None and heads[result_run][0] != expected_last_seq:
                    raise ConflictError(
                        f"run {result_run!r} is at seq {heads[result_run][0]}, expected {expected_last_seq}"
                    )
                fresh = self._insert_fresh(cur, prepared, heads)
            finally:
                cur.close()
        return AppendResult(len(fresh), dups + len(prepared) - len(fresh), heads[result_run][0])

    def append_checked(self, run: str, decide: Callable[[CheckedReader], Sequence[EventIn]]) -> AppendResult:
        """Append the events ``decide`` returns, having let it read ``run``'s events, under the
        append lock in one transaction: no writer appends between its reads and the write.
        ``decide`` gets ``read(types, *, round=None, after_seq=0)`` -> [(seq, round, type, data)]
        (texts as artifact refs); ``decide`` raising stores nothing."""
        with self._write_tx(append_lock=True) as conn:
            cur = conn.connection.cursor()
            try:

                def read(
                    types: Collection[str] | None, *, round: int | None = None, after_seq: int = 0
                ) -> list[tuple[int, int, str, dict[str, Any]]]:
                    where, params = self._where(run, after_seq, None, types, round)
                    order = self._order(after_seq, types, round)
                    cur.execute(f"SELECT seq, round, type, data FROM events {where} {order}", params)
                    return [(int(s), int(r), t, _loads(d)) for s, r, t, d in cur.fetchall()]

                events = list(decide(read))
                if not events:
                    return AppendResult(0, 0, self._run_head(cur, run)[0])
                prepared, dups = _prepare(events)
                runs = {p[1] for p in prepared}
                heads = {r: self._run_head(cur, r) for r in runs}
                fresh = self._insert_fresh(cur, prepared, heads)
            finally:
                cur.close()
        return AppendResult(len(fresh), dups + len(prepared) - len(fresh), heads[prepared[-1][1]][0])

    def _insert_fresh(self, cur: Any, prepared: list[_Prepared], heads: dict[str, tuple[int, str]]) -> list[_Prepared]:
        """Insert the events whose ids are not stored yet and return them (``heads`` moves on).

        Optimistic: the unique index on event_id checks every row as it goes in anyway, so the
        batch is inserted under a savepoint without looking its ids up first; only when one is
        already stored (a retried batch) is that undone, the stored ids looked up and the rest
        inserted. Either way the rows and the chain are those of the fresh events alone."""
        start = dict(heads)
        cur.execute("SAVEPOINT diagevo_append")
        try:
            self._insert(cur, prepared, heads)
        except Exception as exc:
            if not _is_integrity_error(exc):
                raise
            cur.execute("ROLLBACK TO SAVEPOINT diagevo_append")
            heads.update(start)
            existing = self._existing_ids(cur, [p[0] for p in prepared])
            fresh = [p for p in prepared if p[0] not in existing]
            if fresh:
                self._insert(cur, fresh, heads)  # another constraint than event_id fails here again
            return fresh
        cur.execute("RELEASE SAVEPOINT diagevo_append")
        return prepared

    def _insert(self, cur: Any, fresh: list[_Prepared], heads: dict[str, tuple[int, str]]) -> None:
        cur.execute("SELECT COALESCE(MAX(seq), 0) FROM events")
        seq = int(cur.fetchone()[0])
        recorded_at = datetime.now(UTC).isoformat(timespec="microseconds")
        prev = {run: h for run, (_, h) in heads.items()}
        last: dict[str, int] = {}
        sha256 = hashlib.sha256
        rows = []
        artifacts: dict[str, str] = {}
        for eid, run, rnd, typ, data_json, canon, arts, keys in fresh:
            seq += 1
            p = prev[run]
            h = sha256(p.encode() + canon).hexdigest()  # = chain_hash(p, canonical_event_json(...))
            rows.append((seq, eid, run, rnd, typ, SCHEMA_VERSION, data_json, recorded_at, p, h, *keys))
            prev[run] = h
            last[run] = seq
            if arts:
                artifacts.update(arts)
        for run, run_last in last.items():
            heads[run] = (run_last, prev[run])
        if artifacts and self._dialect == "postgresql":  # one statement, two arrays
            cur.execute(
                "INSERT INTO artifacts (sha256, text) SELECT * FROM unnest(%b::text[], %b::text[]) "
                "ON CONFLICT (sha256) DO NOTHING",
                (list(artifacts), list(artifacts.values())),
            )
        elif artifacts:
            cur.executemany("INSERT OR IGNORE INTO artifacts (sha256, text) VALUES (?, ?)", list(artifacts.items()))
        columns = "seq, event_id, run_id, round, type, schema_version, data, recorded_at, prev_hash, hash, " + _KEY_COLUMNS
        if self._dialect == "postgresql":  # COPY: every row is new (checked under the lock)
            with cur.copy(f"COPY events ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            cur.executemany(f"INSERT INTO events ({columns}) VALUES ({', '.join('?' * (10 + len(KEY_FIELDS)))})", rows)

    def _existing_ids(self, cur: Any, ids: list[str]) -> set[str]:
        found: set[str] = set()
        if self._dialect == "postgresql":
            cur.execute("SELECT event_id FROM events WHERE event_id = ANY(%b)", (ids,))  # %b: binary arrays, no quoting
            found.update(r[0] for r in cur.fetchall())
            return found
        for i in range(0, len(ids), _SQLITE_MAX_PARAMS):
            chunk = ids[i : i + _SQLITE_MAX_PARAMS]
            cur.execute(f"SELECT event_id FROM events WHERE event_id IN ({','.join('?' * len(chunk))})", chunk)
            found.update(r[0] for r in cur.fetchall())
        return found

    def _run_head(self, cur: Any, run: str) -> tuple[int, str]:
        """(last seq, last hash) of a run; (0, GENESIS_HASH) when it has no events."""
        cur.execute(f"SELECT seq, hash FROM events WHERE run_id = {self._p} ORDER BY seq DESC LIMIT 1", (run,))
        row = cur.fetchone()
        return (int(row[0]), row[1]) if row else (0, GENESIS_HASH)

    # --- reads --------------------------------------------------------------------------------

    def _where(
        self,
        run: str,
        after_seq: int,
        upto_seq: int | None,
        types: Collection[str] | None,
        round: int | None = None,
    ) -> tuple[str, list[Any]]:
        """WHERE clause selecting a run's events (served by the (run_id, seq), (run_id, type, seq)
        or (run_id, round, type) index)."""
        q = self._p
        sql = f"WHERE run_id = {q}"
        params: list[Any] = [run]
        if after_seq > 0:  # only then: a seq range lures SQLite's planner off the round/type indexes
            sql += f" AND seq > {q}"
            params.append(after_seq)
        if round is not None:
            sql += f" AND round = {q}"
            params.append(round)
        if upto_seq is not None:
            sql += f" AND seq <= {q}"
            params.append(upto_seq)
        if types is not None:
            types = list(types)
            if not types:
                sql += " AND 1 = 0"
            else:
                sql += f" AND type IN ({', '.join([q] * len(types))})"
                params.extend(types)
        return sql, params

    def _order(self, after_seq: int, types: Collection[str] | None, round: int | None) -> str:
        """``ORDER BY seq``. Without a seq range but with a round or types, SQLite's planner would
        rather walk the whole run in (run_id, seq) order than sort the few rows the round or
        type index finds; ``+seq`` tells it to sort them."""
        if self._dialect == "sqlite" and after_seq <= 0 and (round is not None or types is not None):
            return "ORDER BY +seq"
        return "ORDER BY seq"

    def iter_rows(
        self, run: str, *, after_seq: int = 0, types: Collection[str] | None = None, round: int | None = None
    ) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
        """(seq, round, type, data) in seq order (of one ``round`` only, if given), texts left as
        artifact refs: the replay path."""
        loads = _loads
        with self._cursor(stream=True) as cur:
            where, params = self._where(run, after_seq, None, types, round)
            cur.execute(f"SELECT seq, round, type, data FROM events {where} {self._order(after_seq, types, round)}", params)
            while rows := cur.fetchmany(_FETCH):
                for seq, rnd, typ, data in rows:
                    yield seq, rnd, typ, loads(data)

    def read(
        self,
        run: str,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        types: Collection[str] | None = None,
        round: int | None = None,
        texts: bool = False,
        limit: int | None = None,
    ) -> Iterator[StoredEvent]:
        """Events of a run in seq order (of one ``round`` only, if given; at most ``limit``);
        ``texts=True`` puts artifact texts back inline."""
        where, params = self._where(run, after_seq, upto_seq, types, round)
        where += " " + self._order(after_seq, types, round)
        if limit:
            where += f" LIMIT {int(limit)}"
        return self._select(where, params, texts)

    def read_naming(
        self,
        run: str,
        keys: dict[str, Collection[str]],
        *,
        types: Collection[str] | None = None,
        round: int | None = None,
        texts: bool = False,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Events of a run whose data names one of the given ids in one of the given fields
        (``{"cause_id": ["C3"], "matched_cause": ["C3"]}``), in seq order: indexed reads, one per
        field, never a scan of the run. Fields: :data:`diagevo.events.keys.KEY_FIELDS`."""
        found: dict[int, StoredEvent] = {}
        wanted_types = None if types is None else set(types)
        for field, values in keys.items():
            if field not in KEY_FIELDS:
                raise StoreError(f"events cannot be looked up by {field!r}: use one of {', '.join(KEY_FIELDS)}")
            values = list(dict.fromkeys(values))
            for i in range(0, len(values), _SQLITE_MAX_PARAMS):
                chunk = values[i : i + _SQLITE_MAX_PARAMS]
                # only the run and the ids in SQL: any other condition (a seq range, a type list)
                # can lure the planner onto an index that scans the run; the rest is checked here
                where = f"WHERE run_id = {self._p} AND {field} IN ({', '.join([self._p] * len(chunk))})"
                for e in self._select(where, [run, *chunk], texts=False):
                    if (wanted_types is None or e.type in wanted_types) and (round is None or e.round == round):
                        found[e.seq] = e
        picked = [found[seq] for seq in sorted(found)]
        if limit:
            picked = picked[:limit]
        if texts and picked:
            with self._cursor() as cur:
                self._restore_texts(cur, picked)
        return picked

    def _select(self, where: str, params: list[Any], texts: bool) -> Iterator[StoredEvent]:
        loads = _loads
        with self._cursor(stream=True) as cur, (self._cursor() if texts else nullcontext()) as art_cur:
            cur.execute(
                "SELECT seq, event_id, run_id, round, type, schema_version, data, recorded_at, prev_hash, hash "
                f"FROM events {where}",
                params,
            )
            while rows := cur.fetchmany(_FETCH):
                batch = [
                    StoredEvent(r[0], r[1], r[2], r[3], r[4], r[5], loads(r[6]), r[7], r[8], r[9]) for r in rows
                ]
                if texts:
                    self._restore_texts(art_cur, batch)
                yield from batch

    def _restore_texts(self, cur: Any, batch: list[StoredEvent]) -> None:
        refs: list[tuple[dict[str, Any], str, str]] = []
        for ev in batch:
            for f in TEXT_FIELDS.get(ev.type, ()):
                v = ev.data.get(f)
                if isinstance(v, dict) and ARTIFACT_KEY in v:
                    refs.append((ev.data, f, v[ARTIFACT_KEY]))
        if not refs:
            return
        texts = self._artifacts(cur, list({sha for _, _, sha in refs}))
        for data, f, sha in refs:
            try:
                data[f] = texts[sha]
            except KeyError:
                raise StoreError(f"artifact {sha} is missing from the database") from None

    def _artifacts(self, cur: Any, shas: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for i in range(0, len(shas), _SQLITE_MAX_PARAMS):
            chunk = shas[i : i + _SQLITE_MAX_PARAMS]
            cur.execute(
                f"SELECT sha256, text FROM artifacts WHERE sha256 IN ({', '.join([self._p] * len(chunk))})", chunk
            )
            out.update(cur.fetchall())
        return out

    def artifact(self, sha256: str) -> str:
        with self._cursor() as cur:
            found = self._artifacts(cur, [sha256])
        if sha256 not in found:
            raise StoreError(f"unknown artifact {sha256}")
        return found[sha256]

    def last_seq(self, run: str) -> int:
        with self._cursor() as cur:
            return self._run_head(cur, run)[0]

    def runs(self) -> list[str]:
        """Run ids in order of their first event: a skip scan of the (run_id, seq) index, one
        probe per run, never a pass over the events."""
        with self._cursor() as cur:
            cur.execute(
                "WITH RECURSIVE r(run_id) AS ("
                " SELECT MIN(run_id) FROM events"
                " UNION ALL SELECT (SELECT MIN(e.run_id) FROM events e WHERE e.run_id > r.run_id)"
                " FROM r WHERE r.run_id IS NOT NULL) "
                "SELECT run_id, (SELECT MIN(e.seq) FROM events e WHERE e.run_id = r.run_id) AS first_seq "
                "FROM r WHERE run_id IS NOT NULL ORDER BY first_seq"
            )
            return [r[0] for r in cur.fetchall()]

    def has_run(self, run: str) -> bool:
        return self.last_seq(run) > 0

    def existing_ids(self, ids: Collection[str]) -> set[str]:
        """Which of these event ids are already stored (an indexed lookup per chunk)."""
        with self._cursor() as cur:
            return self._existing_ids(cur, list(ids))

    def retained_counts(self, run: str) -> dict[int, int]:
        """Per round, how many ``question.scored`` events say ``retained: true`` (read from the
        partial index ``ix_events_retained`` alone)."""
        with self._cursor() as cur:
            cur.execute(
                f"SELECT round, COUNT(*) FROM events WHERE run_id = {self._p} AND {RETAINED_CONDITION[self._dialect]} "
                "GROUP BY round",
                (run,),
            )
            return {int(r[0]): int(r[1]) for r in cur.fetchall()}

    def type_counts(self, run: str, round: int | None = None) -> dict[tuple[int, str], int]:
        """Events per (round, type) of a run, or of one round: read from the (run_id, round,
        type) index alone."""
        where, params = f"WHERE run_id = {self._p}", [cast(Any, run)]
        if round is not None:
            where += f" AND round = {self._p}"
            params.append(round)
        with self._cursor() as cur:
            cur.execute(f"SELECT round, type, COUNT(*) FROM events {where} GROUP BY round, type", params)
            return {(int(r[0]), r[1]): int(r[2]) for r in cur.fetchall()}

    def latest_run(self) -> str | None:
        """The run of the most recently appended event (the run last worked on)."""
        with self._cursor() as cur:
            cur.execute("SELECT run_id FROM events ORDER BY seq DESC LIMIT 1")
            row = cur.fetchone()
        return row[0] if row else None

    # --- hash chain ---------------------------------------------------------------------------

    def verify_chain(self, run: str) -> list[str]:
        """Recompute the run's hash chain; returns one line per problem (empty: intact)."""
        problems: list[str] = []
        prev = GENESIS_HASH
        with self._cursor(stream=True) as cur:
            where, params = self._where(run, 0, None, None)
            cur.execute(
                "SELECT seq, event_id, run_id, round, type, schema_version, data, prev_hash, hash "
                f"FROM events {where} ORDER BY seq",
                params,
            )
            while rows := cur.fetchmany(_FETCH):
                for seq, eid, run_id, rnd, typ, sv, data, stored_prev, stored_hash in rows:
                    if stored_prev != prev:
                        problems.append(f"seq {seq}: prev_hash does not match the hash of the run's previous event")
                    want = chain_hash(stored_prev, canonical_event_json(eid, run_id, rnd, typ, sv, data))
                    if want != stored_hash:
                        problems.append(f"seq {seq}: hash mismatch (event {eid} was altered)")
                    prev = stored_hash
        return problems

    # --- snapshots and checkpoints ------------------------------------------------------------

    def _upsert(self, conn: Connection, table: str, keys: tuple[str, ...], values: dict[str, Any]) -> None:
        cols = ", ".join(values)
        binds = ", ".join(f":{c}" for c in values)
        sets = ", ".join(f"{c} = excluded.{c}" for c in values if c not in keys)
        conn.execute(
            text(f"INSERT INTO {table} ({cols}) VALUES ({binds}) ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}"),
            values,
        )

    def put_snapshot(self, run: str, round: int, seq: int, state: dict[str, Any]) -> None:
        """Store (or replace) the cached memory of ``run`` at committed ``round``."""
        state_json = _json_or_error(state, "snapshot state")
        with self._write_tx() as conn:
            self._upsert(
                conn, "snapshots", ("run_id", "round"), {"run_id": run, "round": round, "seq": seq, "state": state_json}
            )

    def get_snapshot(self, run: str, round: int) -> tuple[int, dict[str, Any]] | None:
        """(seq, state) of the snapshot at ``round``, or None."""
        with self._read_conn() as conn:
            row = conn.execute(
                text("SELECT seq, state FROM snapshots WHERE run_id = :run AND round = :round"),
                {"run": run, "round": round},
            ).first()
        return (int(row[0]), _loads(row[1])) if row else None

    def latest_snapshot(self, run: str, upto_round: int | None = None) -> tuple[int, int, dict[str, Any]] | None:
        """(round, seq, state) of the latest snapshot at or before ``upto_round``."""
        sql = "SELECT round, seq, state FROM snapshots WHERE run_id = :run"
        params: dict[str, Any] = {"run": run}
        if upto_round is not None:
            sql += " AND round <= :upto"
            params["upto"] = upto_round
        with self._read_conn() as conn:
            row = conn.execute(text(sql + " ORDER BY round DESC LIMIT 1"), params).first()
        return (int(row[0]), int(row[1]), _loads(row[2])) if row else None

    def snapshots(self, run: str) -> list[tuple[int, int, dict[str, Any]]]:
        """(round, seq, state) of every snapshot of the run, by round."""
        with self._read_conn() as conn:
            rows = conn.execute(
                text("SELECT round, seq, state FROM snapshots WHERE run_id = :run ORDER BY round"), {"run": run}
            ).all()
        return [(int(r[0]), int(r[1]), _loads(r[2])) for r in rows]

    def drop_snapshots(self, run: str) -> int:
        """Delete the run's snapshots (they are a cache); returns how many were dropped."""
        with self._write_tx() as conn:
            res = conn.execute(text("DELETE FROM snapshots WHERE run_id = :run"), {"run": run})
        return int(res.rowcount)

    def get_checkpoint(self, name: str, run: str) -> int:
        """Last seq applied by projection ``name`` for ``run``; 0 when none."""
        with self._read_conn() as conn:
            row = conn.execute(
                text("SELECT seq FROM checkpoints WHERE name = :name AND run_id = :run"), {"name": name, "run": run}
            ).first()
        return int(row[0]) if row else 0

    def checkpoint_info(self, name: str, run: str) -> dict[str, Any]:
        """The ``info`` stored with a checkpoint (e.g. the embed model name); {} when none."""
        with self._read_conn() as conn:
            row = conn.execute(
                text("SELECT info FROM checkpoints WHERE name = :name AND run_id = :run"), {"name": name, "run": run}
            ).first()
        return _loads(row[0]) if row else {}

    def set_checkpoint(self, name: str, run: str, seq: int, info: dict[str, Any] | None = None) -> None:
        info_json = _json_or_error(info or {}, "checkpoint info")
        with self._write_tx() as conn:
            self._upsert(
                conn, "checkpoints", ("name", "run_id"), {"name": name, "run_id": run, "seq": seq, "info": info_json}
            )

    @contextmanager
    def _read_conn(self) -> Iterator[Connection]:
        try:
            with _connect(self._engine, self.url) as conn:
                yield conn
        except sa_exc.DBAPIError as exc:
            raise StoreError(f"read from {redact_url(self.url)} failed: {_one_line(exc)}") from None


def _json_or_error(obj: Any, what: str) -> str:
    try:
        return _compact(obj)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON-serialisable: {exc}") from None


def _is_dbapi_error(exc: BaseException) -> bool:
    return isinstance(exc, sa_exc.DBAPIError) or type(exc).__module__.split(".")[0] in {"sqlite3", "psycopg"}


def _is_integrity_error(exc: BaseException) -> bool:
    """A DBAPI IntegrityError of sqlite3 or psycopg (a unique violation among them)."""
    return any(c.__name__ == "IntegrityError" and c.__module__.split(".")[0] in {"sqlite3", "psycopg"}
               for c in type(exc).__mro__)
