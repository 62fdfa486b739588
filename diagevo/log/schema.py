"""Who owns the database: diagevo's schema is owned by Alembic (``migrations/``). A brand-new
empty database is migrated to head on first use; anything else without diagevo's revision (a
foreign database, a table named ``events`` that is not diagevo's, an older or newer revision) is
refused without a single byte written. A database of an earlier diagevo's migration chain (before
the baseline) is told apart by its schema and carried over by :func:`upgrade`
(:mod:`diagevo.log.old_chain`). The dialect-specific parts (what "empty" means, how a
migration excludes other writers) come from the backend module. Opening a log already at the head
loads neither this module nor Alembic: :mod:`diagevo.log.revision` tells it is there.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Engine

from diagevo.errors import NEWER, Call, Fix
from diagevo.log import old_chain
from diagevo.log.backends import connect, dialect_of, make_engine, missing_database, sqlalchemy_errors
from diagevo.log.errors import LockTimeout, SchemaOutdated, StoreError
from diagevo.log.recorder import LOCK_WAIT_S
from diagevo.log.revision import BASELINE, RevisionStatus, State
from diagevo.text.parsing import error_line
from diagevo.text.urls import redact_url

MIGRATE_LOCK_KEY = int.from_bytes(b"diagevo2", "big")  # the migrators' lock (where the backend has one)


def _migrations_dir() -> Path:
    """The alembic environment is the subpackage :mod:`diagevo.migrations` (a checkout links it
    to ``migrations/`` at the top; a wheel holds it as files)."""
    spec = importlib.util.find_spec("diagevo.migrations")  # found, not imported: its env.py imports the log
    if spec is None or not spec.submodule_search_locations:
        raise StoreError("cannot find the diagevo migrations (diagevo.migrations)")
    return Path(next(iter(spec.submodule_search_locations)))


def _alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_migrations_dir()))
    return cfg


@cache
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(_alembic_config())


def head_revision() -> str:
    head = _script().get_current_head()
    if head is None:
        raise StoreError("the diagevo migrations have no head revision")
    return head


def status_of(conn: Connection, url: str) -> RevisionStatus:
    head = head_revision()
    cur = MigrationContext.configure(conn).get_current_revision()
    state: State
    objects: list[str] = []
    ours = cur is not None and _has_our_events(conn)  # a revision alone could be another project's
    if ours and old_chain.holds(conn, cur):  # before the ids: the old chain's 0001 is not the baseline
        state = "old_chain"
    elif cur == head and ours:
        state = "up_to_date"
    elif ours and cur in {s.revision for s in _script().walk_revisions()}:
        state = "outdated"
    else:
        objects = dialect_of(conn).schema_objects(conn)
        if cur is None:
            state = "foreign" if objects else "empty"
        else:  # a revision we do not know over diagevo's log (a newer diagevo), or another project
            state = "unknown" if ours else "foreign"
    return RevisionStatus(redact_url(url), cur, head, state, tuple(objects))


# columns every diagevo revision's ``events`` table has
_EVENT_COLUMNS = frozenset({"seq", "event_id", "run_id", "round", "type", "data", "prev_hash", "hash"})


def _has_our_events(conn: Connection) -> bool:
    """Whether the schema's ``events`` table is diagevo's (read from the catalog: a failing
    SELECT would abort a PostgreSQL transaction)."""
    insp = inspect(conn)
    if not insp.has_table("events"):
        return False
    return _EVENT_COLUMNS <= {c["name"] for c in insp.get_columns("events")}


def consistent_status(engine: Engine, url: str) -> RevisionStatus:
    """``_status_of`` read from one snapshot. Its two reads (the revision, then the schema's
    objects) must not straddle another process's migration commit, or a database half-seen
    as migrated would look foreign. The read transaction writes nothing (SQLite: a deferred
    BEGIN; PostgreSQL: REPEATABLE READ, so every statement sees the same snapshot)."""
    with connect(engine, url) as conn:
        conn = dialect_of(conn).snapshot_reads(conn)
        with conn.begin():
            return status_of(conn, url)


def refusal(status: RevisionStatus) -> SchemaOutdated:
    """Why a database that is not up to date is not used (one line), with the call that fixes it."""
    if status.state == "foreign":
        tables = [o for o in status.objects if o != "alembic_version"]
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        return SchemaOutdated(
            f"{status.url} is not a diagevo database: it holds {shown or 'objects'} and no diagevo "
            "Alembic revision; it is left untouched (use an empty database)"
        )
    if status.state == "unknown":
        return SchemaOutdated(
            f"database is at revision {status.current}, unknown to this diagevo (expected {status.head}): "
            "a newer diagevo wrote it; upgrade diagevo",
            Fix(hint=NEWER),
            aside=True,
        )
    upgrade = Call("upgrade", "diagevo.log.schema.upgrade(url)")
    if status.state == "old_chain":
        return SchemaOutdated(
            f"database is at revision {status.current} of an earlier diagevo's migrations (0001-0019, "
            f"replaced by the baseline {BASELINE}), expected {status.head}: run",
            upgrade,
        )
    if status.state == "empty":
        return SchemaOutdated(
            f"database {status.url} is empty (no diagevo log yet): a writer (train, round start, "
            "memory ingest) creates it, or run",
            upgrade,
        )
    return SchemaOutdated(f"database is at revision {status.current}, expected {status.head}: run", upgrade)


@contextmanager
def migration_tx(engine: Engine, url: str, lock_wait_s: float = LOCK_WAIT_S) -> Iterator[Connection]:
    """A transaction that excludes concurrent migrators (and, on SQLite, all writers). It waits
    ``lock_wait_s`` at most for each lock it takes (PostgreSQL: the migrators' lock, any role
    may take it; a table a reader's open transaction holds), then fails naming the holder."""
    with connect(engine, url) as conn:
        dialect = dialect_of(conn)
        dialect.exclusive(conn)
        try:
            with conn.begin():
                dialect.lock(conn, MIGRATE_LOCK_KEY, lock_wait_s)
                yield conn
        except sqlalchemy_errors("DBAPIError") as exc:
            if not dialect.lock_timed_out(exc):
                raise
            holder = dialect.lock_holder(conn, MIGRATE_LOCK_KEY) or "a session that has ended since"
            raise LockTimeout(
                f"the migration of {redact_url(url)} waited {lock_wait_s:g} s for a lock and gave up: held by "
                f"{holder}; end that session or let it finish, then run the upgrade again"
            ) from None


def upgrade_in(conn: Connection, target: str = "head") -> None:
    cfg = _alembic_config()
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, target)


def carry_over(conn: Connection) -> tuple[str, ...]:
    """An earlier diagevo's database (the migrations before the baseline) at the baseline, its log
    appended as it was, in the caller's transaction (:mod:`diagevo.log.old_chain`): a line for each
    row whose data it could not read (carried as it is, passed over by every reader)."""
    count, unread = old_chain.hold_rows(conn)
    old_chain.drop_old(conn)
    upgrade_in(conn, BASELINE)
    old_chain.append_held(conn, count)
    return tuple(unread)


def revision_status(url: str) -> RevisionStatus:
    """Where the database stands relative to the migrations' head (touches nothing; a missing
    SQLite file is an error, not created)."""
    missing = missing_database(url)
    if missing is not None:
        raise missing
    engine = make_engine(url, readonly=True)
    try:
        return consistent_status(engine, url)
    except sqlalchemy_errors("DBAPIError") as exc:
        raise StoreError(f"cannot read the revision of {redact_url(url)}: {error_line(exc)}") from None
    finally:
        engine.dispose()


def upgrade(url: str, target: str = "head", lock_wait_s: float = LOCK_WAIT_S) -> tuple[str | None, str | None]:
    """Migrate the database to ``target`` (creating a missing SQLite file); returns (revision
    before, revision after). A foreign database or a newer revision is refused untouched; a lock
    held elsewhere is waited for ``lock_wait_s`` at most (:func:`migration_tx`)."""
    before, after = migrate(url, target, lock_wait_s)
    return before.current, after.current


def migrate(url: str, target: str = "head", lock_wait_s: float = LOCK_WAIT_S) -> tuple[RevisionStatus, RevisionStatus]:
    """:func:`upgrade`, returning where the database stood before and stands after (an earlier
    diagevo's ``0001`` and the baseline's share the id: the states tell them apart)."""
    engine = make_engine(url)
    try:
        with migration_tx(engine, url, lock_wait_s) as conn:
            before = status_of(conn, url)
            if before.state in ("unknown", "foreign"):
                raise refusal(before)
            unread = carry_over(conn) if before.state == "old_chain" else ()
            upgrade_in(conn, target)
            after = replace(status_of(conn, url), passed_over=unread)
        return before, after
    except sqlalchemy_errors("DBAPIError") as exc:
        raise StoreError(f"upgrade of {redact_url(url)} failed: {error_line(exc)}") from None
    finally:
        engine.dispose()
