"""Schema lifecycle on every backend: auto-migration of an empty db, older revisions untouched,
unreachable databases, and the `diagevo db` sub-commands."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import inspect, text
from typer.testing import CliRunner

from diagevo.cli.common import spell
from diagevo.cli.db import db_app
from diagevo.cli.fixes import message
from diagevo.log import SchemaOutdated, StoreError, open_log
from diagevo.log.revision import HEAD_REVISION
from diagevo.log.schema import head_revision, revision_status, upgrade
from tests.conftest import Backend
from tests.logs import wire_event

HEAD = HEAD_REVISION
OLDER = "0001"  # the baseline: older than head once the next migration is there (``next_migration``)


def tables(backend: Backend, url: str) -> set[str]:
    engine = backend.engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def stored_revision(backend: Backend, url: str) -> str | None:
    engine = backend.engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one_or_none()
    finally:
        engine.dispose()


def test_head_is_the_latest_migration() -> None:
    assert head_revision() == HEAD


def test_brand_new_database_is_migrated_to_head(backend: Backend, db_url: str) -> None:
    if backend.name == "postgres":  # a fresh SQLite URL names a file that does not exist yet
        assert revision_status(db_url).state == "empty"
    with open_log(db_url) as store:
        store.append([wire_event("round.started", "r", 1, "e1")])
    assert {"events", "views", "alembic_version"} <= tables(backend, db_url)
    assert revision_status(db_url).current == HEAD
    with open_log(db_url) as again:  # reopening an up-to-date db works and keeps the data
        assert again.last_seq("r") == 1


def test_empty_database_is_not_migrated_when_told_not_to(
    backend: Backend, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SchemaOutdated, match=r"run `diagevo\.log\.schema\.upgrade\(url\)`$") as info:
        open_log(db_url, migrate_empty=False)
    monkeypatch.setattr("diagevo.cli.common._acting_on", [db_url])  # on the command line: its own database
    assert message(info.value).endswith(f"`{spell('db', 'upgrade', db=db_url)}`")
    assert "events" not in tables(backend, db_url)


def test_older_revision_is_refused_and_left_untouched(
    backend: Backend, db_url: str, monkeypatch: pytest.MonkeyPatch, next_migration: str
) -> None:
    HEAD = next_migration  # noqa: N806 - the head while the stand-in is there
    assert upgrade(db_url, OLDER) == (None, OLDER)
    before = tables(backend, db_url)
    with pytest.raises(SchemaOutdated) as info:
        open_log(db_url)
    monkeypatch.setattr("diagevo.cli.common._acting_on", [db_url])
    upgrade_it = spell("db", "upgrade", db=db_url)  # diagevo db upgrade --db URL, the URL quoted when it must be
    assert message(info.value) == f"database is at revision {OLDER}, expected {HEAD}: run `{upgrade_it}`"
    assert str(info.value) == f"database is at revision {OLDER}, expected {HEAD}: run `diagevo.log.schema.upgrade(url)`"
    assert tables(backend, db_url) == before and "next_stand_in" not in before
    assert stored_revision(backend, db_url) == OLDER
    assert upgrade(db_url) == (OLDER, HEAD)
    with open_log(db_url) as store:
        assert store.view_states("memory", "r") == []


def test_unknown_newer_revision_is_refused(backend: Backend, db_url: str) -> None:
    upgrade(db_url)
    engine = backend.engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(SchemaOutdated, match="revision 9999, unknown to this diagevo"):
        open_log(db_url)
    with pytest.raises(StoreError, match="unknown to this diagevo"):
        upgrade(db_url)
    assert stored_revision(backend, db_url) == "9999"


def test_foreign_tables_without_revision_are_not_adopted(backend: Backend, db_url: str) -> None:
    engine = backend.engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE events (x INTEGER)"))
    engine.dispose()
    with pytest.raises(StoreError, match="not a diagevo database: it holds events"):
        open_log(db_url)
    assert tables(backend, db_url) == {"events"}


def _foreign(backend: Backend, url: str, revision: str | None = None) -> None:
    """A database some other application uses: its own tables (and perhaps its own Alembic)."""
    engine = backend.engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE foo (id INTEGER PRIMARY KEY, name TEXT)"))
        conn.execute(text("INSERT INTO foo (id, name) VALUES (1, 'keep me')"))
        if revision is not None:
            conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            conn.execute(text("INSERT INTO alembic_version VALUES (:r)"), {"r": revision})
    engine.dispose()


@pytest.mark.parametrize("revision", [None, "3f2a9c1b7d10"], ids=["no alembic", "another alembic project"])
def test_foreign_database_is_refused_and_left_untouched(backend: Backend, db_url: str, revision: str | None) -> None:
    _foreign(backend, db_url, revision)
    before = tables(backend, db_url)
    for attempt in (lambda: open_log(db_url), lambda: open_log(db_url, create=False), lambda: upgrade(db_url)):
        with pytest.raises(StoreError) as info:
            attempt()
        assert "is not a diagevo database: it holds foo" in str(info.value)
        assert "\n" not in str(info.value)
    assert tables(backend, db_url) == before
    assert stored_revision(backend, db_url) == revision if revision else "alembic_version" not in before
    status = revision_status(db_url)
    assert (status.state, status.up_to_date) == ("foreign", False)


def test_foreign_sqlite_file_is_byte_for_byte_untouched(tmp_path) -> None:
    """Not even switched to WAL: the refusal happens before anything is written."""
    import sqlite3

    path = tmp_path / "app.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE foo (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO foo (name) VALUES ('keep me')")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a diagevo database"):
        open_log(f"sqlite:///{path}")
    with pytest.raises(StoreError, match="not a diagevo database"):
        upgrade(f"sqlite:///{path}")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -shm, no journal
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()


def test_a_zero_byte_file_is_empty_and_migrated(tmp_path) -> None:
    path = tmp_path / "touched.db"
    path.touch()
    assert revision_status(f"sqlite:///{path}").state == "empty"
    with pytest.raises(SchemaOutdated, match="is empty"):
        open_log(f"sqlite:///{path}", create=False)
    assert path.stat().st_size == 0
    with open_log(f"sqlite:///{path}") as store:
        assert store.runs() == []
    assert revision_status(f"sqlite:///{path}").current == HEAD


def test_a_missing_sqlite_file_is_created_only_by_writers(tmp_path) -> None:
    path = tmp_path / "new.db"
    with pytest.raises(
        StoreError,
        match=f"^no database at {path}: start one with `diagevo\\.open_store\\(url, create=True\\)`, "
        "or run your own trainer through the round protocol$",
    ):
        open_log(f"sqlite:///{path}", create=False)
    with pytest.raises(
        StoreError,
        match=f"^no database at {path}: start one with `diagevo\\.open_store\\(url, create=True\\)`, "
        "or run your own trainer through the round protocol$",
    ):
        revision_status(f"sqlite:///{path}")
    assert not path.exists()
    with open_log(f"sqlite:///{path}"):
        pass
    assert path.exists()


@pytest.mark.parametrize(("query", "level"), [("", 2), ("?synchronous=normal", 1), ("?synchronous=FULL", 2)])
def test_sqlite_is_durable_by_default_and_normal_only_when_asked(tmp_path, query: str, level: int) -> None:
    """FULL (2) unless the URL asks for NORMAL (1); the file is in WAL mode once it is ours."""
    with open_log(f"sqlite:///{tmp_path / 'd.db'}{query}") as store:
        store.append([wire_event("round.started", "r", 1, "e1")])
        with store._engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == level
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_an_unknown_synchronous_level_is_refused(tmp_path) -> None:
    with pytest.raises(StoreError, match="synchronous='off' in the database URL: use one of full, normal"):
        open_log(f"sqlite:///{tmp_path / 'd.db'}?synchronous=off")
    assert not (tmp_path / "d.db").exists()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://nobody:secret@127.0.0.1:1/nowhere",
        "sqlite:////nonexistent-dir/diagevo.db",
        "not a url",
        "mysql://u@h/db",
    ],
)
def test_unusable_database_is_one_clear_line(url: str) -> None:
    with pytest.raises(StoreError) as info:
        open_log(url)
    message = str(info.value)
    assert "\n" not in message and "secret" not in message
    assert message.startswith(("cannot open database", "invalid database URL", "unsupported database", "no directory"))


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("postgres://u@h/db", "postgresql+psycopg"),  # libpq's spelling, which SQLAlchemy itself refuses
        ("postgres+psycopg://u@h/db", "postgresql+psycopg"),
        ("postgresql://u@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg"),
    ],
)
def test_postgres_is_an_alias_of_postgresql(url: str, driver: str) -> None:
    from diagevo.log import postgres
    from diagevo.log.backends import backend_of, normalise_url

    assert normalise_url(url).drivername == driver
    assert backend_of(url) is postgres


def test_the_getting_started_table_names_every_backend_and_only_urls_that_open() -> None:
    """Each URL of the documentation's table of databases names a backend, and each backend (the
    in-memory one too) is in the table."""
    import re
    from pathlib import Path

    from diagevo.log.backends import _MODULES, backend_of

    page = (Path(__file__).resolve().parent.parent / "docs" / "getting-started.md").read_text(encoding="utf-8")
    table = page.split("| database | URL |", 1)[1].split("\n\n", 1)[0]
    urls = [u.replace("...", "u@h/db") for u in re.findall(r"`([a-z+]+://[^`]*)`", table)]
    assert any(u.startswith("memory://") for u in urls) and any(u.startswith("postgres://") for u in urls)
    assert {backend_of(u).__name__ for u in urls} == set(_MODULES.values())


@pytest.mark.postgres
def test_a_postgres_url_opens_the_same_log(postgres_backend: Backend) -> None:
    url = postgres_backend.fresh_url()
    assert url.startswith("postgresql+psycopg://")
    alias = "postgres://" + url.split("://", 1)[1]
    with open_log(alias) as store:
        store.append([wire_event("round.started", "r", 1, "e1")])
    with open_log(url) as store:
        assert store.runs() == ["r"] and store.last_seq("r") == 1


# --- CLI: diagevo db ------------------------------------------------------------------------

runner = CliRunner()


def test_cli_current_and_upgrade(backend: Backend, db_url: str, next_migration: str) -> None:
    HEAD = next_migration  # noqa: N806 - the head while the stand-in is there
    upgrade(db_url, OLDER)
    res = runner.invoke(db_app, ["current", "--db", db_url, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) | {"db": None} == {
        "db": None,
        "current": OLDER,
        "head": HEAD,
        "state": "outdated",
        "up_to_date": False,
    }
    res = runner.invoke(db_app, ["upgrade", "--db", db_url])
    assert res.exit_code == 0 and f"from revision {OLDER} to {HEAD}" in res.stdout
    res = runner.invoke(db_app, ["current", "--db", db_url])
    assert res.exit_code == 0 and "up to date" in res.stdout
    res = runner.invoke(db_app, ["upgrade", "--db", db_url])
    assert res.exit_code == 0 and "already at revision" in res.stdout


def test_cli_db_defaults_to_env(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("DIAGEVO_DB", url)
    assert runner.invoke(db_app, ["upgrade"]).exit_code == 0
    assert revision_status(url).current == HEAD


def test_cli_current_does_not_create_a_missing_sqlite_file(tmp_path) -> None:
    path = tmp_path / "missing.db"
    res = runner.invoke(db_app, ["current", "--db", f"sqlite:///{path}", "--json"])
    assert res.exit_code == 1 and res.stderr.strip().startswith(f"error: no database at {path}: start one with `")
    assert not path.exists()
    res = runner.invoke(db_app, ["upgrade", "--db", f"sqlite:///{path}"])  # a writer creates it
    assert res.exit_code == 0 and path.exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["upgrade", "--db", "postgresql://u:pw@127.0.0.1:1/x"], "cannot open database"),
        (["current", "--db", "bogus"], "invalid database URL 'bogus' (a SQLite file is sqlite:///bogus)"),
        (
            ["upgrade", "--db", "sqlite:////nonexistent-dir/x.db"],
            "no directory /nonexistent-dir to hold the database x.db",
        ),
    ],
)
def test_cli_errors_are_one_line_without_traceback(args: list[str], needle: str) -> None:
    res = runner.invoke(db_app, args)
    assert res.exit_code == 1
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
    assert "Traceback" not in res.output and "pw" not in res.output


def test_migrations_match_the_declared_tables(backend: Backend, db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from diagevo.log.tables import metadata

    upgrade(db_url)
    ours = {"events", "views"}
    engine = backend.engine(db_url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "include_name": lambda name, kind, _p: kind != "table" or name in ours,
            },
        )
        diffs = [d for d in compare_metadata(ctx, metadata) if not (isinstance(d, tuple) and d[0] == "remove_table")]
    engine.dispose()
    assert diffs == []


def test_head_revision_constant_is_alembics_head() -> None:
    from diagevo.log.revision import HEAD_REVISION

    assert HEAD_REVISION == head_revision()


def test_sqlite_milestone_index_is_an_or_chain_and_still_unique(tmp_path) -> None:
    """SQLite's milestone index states its predicate as an OR chain (an ``IN`` list costs an
    ephemeral b-tree per inserted row), and a second ``round.committed`` of a round is refused."""
    import sqlite3

    from diagevo import rounds
    from tests.test_rounds import promote_on_a_question

    url, path = f"sqlite:///{tmp_path / 'm.db'}", tmp_path / "m.db"
    with open_log(url) as store:
        rounds.start_run(store, "a", {"k": 0.5})
        rnd = rounds.Round.open(store, "a")
        promote_on_a_question(rnd)
        rnd.commit()

    def predicate() -> str:
        with sqlite3.connect(path) as conn:
            (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'uq_events_milestones'").fetchone()
        return sql.split(" WHERE ", 1)[1]

    def second_commit_refused() -> bool:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute(
                "INSERT INTO events (seq, event_id, run_id, round, type, schema_version, data, recorded_at, prev_hash,"
                " hash) SELECT seq + 100, event_id || '-again', run_id, round, type, schema_version, data, recorded_at,"
                " prev_hash, hash FROM events WHERE type = 'round.committed'"
            )
        except sqlite3.IntegrityError as exc:
            return "uq_events_milestones" in str(exc) or "UNIQUE" in str(exc)
        finally:
            conn.close()
        return False

    assert predicate().count(" OR ") == 3 and " IN " not in predicate()
    assert second_commit_refused()
    with open_log(url) as store:
        assert [e.type for e in store.read("a")][-1] == "round.committed"
