"""A foreign schema with a table named ``events`` is "not a diagevo database" whatever Alembic
revision it carries (another project's, or one equal to ours); a PostgreSQL connection lost in
the middle of a read or of a write is one StoreError line, with no stray "error ignored" or pool traceback on
stderr."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import text

from diagevo.log import StoreError, open_log
from diagevo.log.revision import HEAD_REVISION
from diagevo.log.schema import revision_status, upgrade
from tests.conftest import Backend, PostgresBackend

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "revision", [None, "3f2a9c1b7d10", HEAD_REVISION], ids=["no alembic", "another project", "ours"]
)
def test_a_foreign_events_table_is_not_a_diagevo_database(backend: Backend, db_url: str, revision: str | None) -> None:
    engine = backend.engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT)"))
        conn.execute(text("INSERT INTO events (id, name) VALUES (1, 'keep me')"))
        if revision is not None:
            conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            conn.execute(text("INSERT INTO alembic_version VALUES (:r)"), {"r": revision})
    engine.dispose()
    for attempt in (lambda: open_log(db_url), lambda: open_log(db_url, create=False), lambda: upgrade(db_url)):
        with pytest.raises(StoreError) as info:
            attempt()
        assert "is not a diagevo database" in str(info.value) and "\n" not in str(info.value)
    assert revision_status(db_url).state == "foreign"
    engine = backend.engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT name FROM events")).scalar_one() == "keep me"
    engine.dispose()


_LOST = textwrap.dedent("""
    import sys
    from sqlalchemy import create_engine, text
    from diagevo.log import StoreError, ViewState, open_log
    from tests.logs import Log

    url, admin_url = sys.argv[1], sys.argv[2]
    store = open_log(url)
    log = Log("a")
    for i in range(20000):
        log.node(f"N{i}")
    store.append(log.events())
    rows = store.rows("a")
    next(rows)  # a server-side cursor is open, 4096 rows fetched
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE application_name = 'diagevo_lost_test' AND pid <> pg_backend_pid()"))
    try:
        for _ in rows:
            pass
    except StoreError as exc:
        print("refused:", exc)
    first = store.event_at("a", 1)  # the next call gets a fresh connection
    store.put_view_states([ViewState("memory", "a", 1, first.seq, first.hash, {})])
    print("written:", [(v.part, v.seq) for v in store.view_states("memory", "a")][0])

    def decide():  # the connection is lost inside a write transaction
        list(store.rows("a", types=()))
        with admin.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE application_name = 'diagevo_lost_test' AND pid <> pg_backend_pid()"))
        return Log("b").events()

    try:
        store.append_decided(decide)
    except StoreError as exc:
        print("refused:", exc)
    print("appended:", store.append(Log("b").events()).appended)
    admin.dispose()
    store.close()
""")


@pytest.mark.postgres
def test_a_lost_connection_is_one_line_and_nothing_stray(postgres_backend: PostgresBackend) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(postgres_backend.fresh_url()).update_query_dict({"application_name": "diagevo_lost_test"})
    done = subprocess.run(
        [sys.executable, "-c", _LOST, url.render_as_string(hide_password=False), postgres_backend.db_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("refused: read from ") and "connection" in lines[0], lines
    assert lines[1] == "written: (1, 1)"
    assert lines[2].startswith("refused: write to ") and "connection" in lines[2], lines
    assert lines[3] == "appended: 1"
    assert done.stderr == ""  # no "error ignored ...", no "Exception during reset or similar"
