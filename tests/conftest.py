"""Shared fixtures: database backends for the event-store contract (and anyone needing a db).

``backend`` is parametrised over SQLite (a temporary file) and the real PostgreSQL on
127.0.0.1:5432. PostgreSQL tests get one scratch database per session
(``diagevo_test_<random>``, dropped at the end) and a fresh schema per ``fresh_url()`` call;
they are marked ``postgres`` and skipped only when the server is unreachable.
Override the admin URL with env ``DIAGEVO_TEST_PG``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from diagevo.log import Recorder, open_log

_PG_CANDIDATES = (
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "postgresql+psycopg://root@127.0.0.1:5432/test",
)


def _reachable_pg_admin() -> str | None:
    candidates = [os.environ["DIAGEVO_TEST_PG"]] if os.environ.get("DIAGEVO_TEST_PG") else list(_PG_CANDIDATES)
    for url in candidates:
        engine = create_engine(url, connect_args={"connect_timeout": 3}, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return url
        except Exception:
            continue
        finally:
            engine.dispose()
    return None


class Backend:
    """One database backend: hands out fresh, empty database URLs and raw access for tests."""

    name: str

    def fresh_url(self) -> str:
        raise AssertionError("abstract")

    def engine(self, url: str) -> Engine:
        """A plain SQLAlchemy engine (no store semantics), for raw SQL in tests."""
        return create_engine(url)

    def downgrade(self, url: str, revision: str) -> None:
        """Migrate the database down to ``revision``, as an older diagevo left it."""
        from alembic import command

        from diagevo.log.schema import _alembic_config

        engine = self.engine(url)
        with engine.begin() as conn:
            cfg = _alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, revision)
        engine.dispose()

    def writer_lock_held(self, url: str) -> bool:
        """True while some other connection holds the store's append lock."""
        raise AssertionError("abstract")

    def disable_append_only(self, url: str) -> None:
        """Remove the UPDATE/DELETE guard (to simulate tampering that bypasses the database)."""
        raise AssertionError("abstract")


class SQLiteBackend(Backend):
    name = "sqlite"

    def __init__(self, root: Path) -> None:
        self.root = root

    def fresh_url(self) -> str:
        return f"sqlite:///{self.root / f'{uuid.uuid4().hex[:12]}.db'}"

    def writer_lock_held(self, url: str) -> bool:
        import sqlite3

        conn = sqlite3.connect(make_url(url).database, timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            conn.close()

    def disable_append_only(self, url: str) -> None:
        engine = self.engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP TRIGGER events_no_update"))
            conn.execute(text("DROP TRIGGER events_no_delete"))
        engine.dispose()


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self._admin = create_engine(db_url, isolation_level="AUTOCOMMIT")

    def fresh_url(self) -> str:
        schema = f"t_{uuid.uuid4().hex[:12]}"
        with self._admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = make_url(self.db_url).update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(hide_password=False)

    def writer_lock_held(self, url: str) -> bool:
        schema = make_url(url).query["options"].split("=", 1)[1]  # type: ignore[union-attr]
        sql = text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND granted "
            "AND relation = to_regclass(:table) AND pid <> pg_backend_pid()"
        )
        with self._admin.connect() as conn:
            n = conn.execute(sql, {"table": f'"{schema}".events_append_lock'}).scalar_one()
        return n > 0

    def disable_append_only(self, url: str) -> None:
        engine = self.engine(url)
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
        engine.dispose()

    def dispose(self) -> None:
        self._admin.dispose()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """URL of a scratch PostgreSQL database for this session (skips if the server is down)."""
    admin_url = _reachable_pg_admin()
    if admin_url is None:
        if os.environ.get("DIAGEVO_REQUIRE_POSTGRES"):  # CI: a missing server is a failure
            pytest.fail("PostgreSQL on 127.0.0.1:5432 is unreachable and DIAGEVO_REQUIRE_POSTGRES is set")
        pytest.skip("PostgreSQL on 127.0.0.1:5432 is unreachable")
    name = f"diagevo_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def postgres_backend(pg_database: str) -> Iterator[PostgresBackend]:
    be = PostgresBackend(pg_database)
    yield be
    be.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Every backend the event store supports; tests using it run once per backend."""
    if request.param == "sqlite":
        return SQLiteBackend(tmp_path)
    return request.getfixturevalue("postgres_backend")


@pytest.fixture
def db_url(backend: Backend) -> str:
    """A fresh, empty database (not migrated yet) on the current backend."""
    return backend.fresh_url()


@pytest.fixture
def store(db_url: str) -> Iterator[Recorder]:
    """A migrated, empty event store on the current backend."""
    s = open_log(db_url)
    yield s
    s.close()


NEXT_REVISION = "0002"
_NEXT_MIGRATION = '''"""A stand-in for the migration after the baseline (the tests' own): literal, as every one is.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_events_recorded_at", "events", ["recorded_at"])
    op.create_table("next_stand_in", sa.Column("id", sa.Integer(), primary_key=True))


def downgrade() -> None:
    op.drop_table("next_stand_in")
    op.drop_index("ix_events_recorded_at", table_name="events")
'''


@pytest.fixture
def next_migration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """diagevo's migrations plus one after them (:data:`NEXT_REVISION`): a database at today's head
    is then an older one, which ``db upgrade`` takes on, as the next release's will. Yields the
    revision it adds."""
    from diagevo.log import revision, schema

    folder = tmp_path / "migrations"
    shutil.copytree(schema._migrations_dir(), folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "versions" / f"{NEXT_REVISION}_next.py").write_text(_NEXT_MIGRATION, encoding="utf-8")
    monkeypatch.setattr(schema, "_migrations_dir", lambda: folder)
    monkeypatch.setattr(revision, "HEAD_REVISION", NEXT_REVISION)
    schema._script.cache_clear()
    try:
        yield NEXT_REVISION
    finally:
        schema._script.cache_clear()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium (Debian's package) through playwright; the test is skipped without it
    (failed with ``DIAGEVO_REQUIRE_BROWSER`` set). One per test: while playwright's synchronous
    API is open, its event loop counts as running in the main thread, and a later test's
    ``asyncio`` (the diagnosis of a training round) would fail with "another loop is running"."""
    if CHROMIUM is None:
        if os.environ.get("DIAGEVO_REQUIRE_BROWSER"):
            pytest.fail("chromium is not installed (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


# --- tests write only under temporary directories -------------------------------------------
# A session-level check: what `git status --ignored` lists in the repository tree before the run
# and after it. A test that writes into the tree (a `*.lance` index beside a server database's
# default place, a `runs/`, a `diagevo.db`) fails the session, naming the new paths. Tool caches
# (pytest's, hypothesis's, bytecode) are left out.
_ROOT = Path(__file__).resolve().parent.parent
_BEFORE = pytest.StashKey["set[str] | None"]()
_TOOL_CACHES = ("__pycache__/", ".pytest_cache/", ".hypothesis/", ".mypy_cache/", ".ruff_cache/", ".egg-info/")


def _tree_entries() -> set[str] | None:
    import subprocess

    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--ignored", "-z"],
            cwd=_ROOT,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:  # not a git checkout (an sdist): no check
        return None
    entries = {e[3:] for e in done.stdout.decode("utf-8", "replace").split("\0") if e}
    return {e for e in entries if not any(e.endswith(c) or f"/{c}" in f"/{e}" for c in _TOOL_CACHES)}


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller only, under xdist
        session.config.stash[_BEFORE] = _tree_entries()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    after = _tree_entries()
    new = sorted((after or set()) - before)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"the tests wrote into the repository tree (tests write only under tmp dirs): {', '.join(new)}",
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
