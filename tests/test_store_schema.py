"""Schema lifecycle on every backend: auto-migration of an empty db, older revisions untouched,
unreachable databases, and the `diagevo db` sub-commands."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import inspect, text
from typer.testing import CliRunner

from cli.db import db_app
from diagevo.events.schemas import new_event
from diagevo.events.store import (
    EventStore,
    SchemaOutdated,
    StoreError,
    current,
    head_revision,
    revision_status,
    upgrade,
)
from tests.conftest import Backend

HEAD = "0002"
OLDER = "0001"


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
    assert revision_status(db_url).state == "empty"
    with EventStore(db_url) as store:
        store.append([new_event("round.started", "r", 1, "e1")])
    assert {"events", "artifacts", "snapshots", "checkpoints", "alembic_version"} <= tables(backend, db_url)
    assert current(db_url) == HEAD
    with EventStore(db_url) as again:  # reopening an up-to-date db works and keeps the data
        assert again.last_seq("r") == 1


def test_empty_database_is_not_migrated_when_told_not_to(backend: Backend, db_url: str) -> None:
    with pytest.raises(SchemaOutdated, match="run `diagevo db upgrade`"):
        EventStore(db_url, migrate_empty=False)
    assert "events" not in tables(backend, db_url)


def test_older_revision_is_refused_and_left_untouched(backend: Backend, db_url: str) -> None:
    assert upgrade(db_url, OLDER) == (None, OLDER)
    before = tables(backend, db_url)
    with pytest.raises(SchemaOutdated) as info:
        EventStore(db_url)
    assert str(info.value) == f"database is at revision {OLDER}, expected {HEAD}: run `diagevo db upgrade`"
    assert tables(backend, db_url) == before and "snapshots" not in before
    assert stored_revision(backend, db_url) == OLDER
    assert upgrade(db_url) == (OLDER, HEAD)
    with EventStore(db_url) as store:
        store.put_snapshot("r", 1, 0, {})


def test_unknown_newer_revision_is_refused(backend: Backend, db_url: str) -> None:
    upgrade(db_url)
    engine = backend.engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(SchemaOutdated, match="revision 9999, unknown to this diagevo"):
        EventStore(db_url)
    with pytest.raises(StoreError, match="unknown to this diagevo"):
        upgrade(db_url)
    assert stored_revision(backend, db_url) == "9999"


def test_foreign_tables_without_revision_are_not_adopted(backend: Backend, db_url: str) -> None:
    engine = backend.engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE events (x INTEGER)"))
    engine.dispose()
    with pytest.raises(StoreError, match="no Alembic revision"):
        EventStore(db_url)


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
        EventStore(url)
    message = str(info.value)
    assert "\n" not in message and "secret" not in message
    assert message.startswith(("cannot open database", "invalid database URL", "unsupported database"))


# --- CLI: diagevo db ------------------------------------------------------------------------

runner = CliRunner()


def test_cli_current_and_upgrade(backend: Backend, db_url: str) -> None:
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
    assert current(url) == HEAD


def test_cli_current_does_not_create_a_missing_sqlite_file(tmp_path) -> None:
    path = tmp_path / "missing.db"
    res = runner.invoke(db_app, ["current", "--db", f"sqlite:///{path}", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["state"] == "empty"
    assert not path.exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["upgrade", "--db", "postgresql://u:pw@127.0.0.1:1/x"], "cannot open database"),
        (["current", "--db", "bogus"], "invalid database URL"),
        (["upgrade", "--db", "sqlite:////nonexistent-dir/x.db"], "cannot open database"),
    ],
)
def test_cli_errors_are_one_line_without_traceback(args: list[str], needle: str) -> None:
    res = runner.invoke(db_app, args)
    assert res.exit_code == 1
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
    assert "Traceback" not in res.output and "pw" not in res.output


def test_migrations_match_the_sqlmodel_tables(backend: Backend, db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from diagevo.events.tables import metadata

    upgrade(db_url)
    ours = {"events", "artifacts", "snapshots", "checkpoints"}
    engine = backend.engine(db_url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_name": lambda name, kind, _p: kind != "table" or name in ours}
        )
        diffs = [d for d in compare_metadata(ctx, metadata) if not (isinstance(d, tuple) and d[0] == "remove_table")]
    engine.dispose()
    assert diffs == []
