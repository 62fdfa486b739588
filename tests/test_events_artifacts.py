"""Texts (questions, trajectories, raw replies) are trusted as events are: named in the chained
data by the sha256 of the text, append-only by the database, checked by ``verify``, and never shown
edited. Since migration 0008 a text lies in its event's ``texts`` column; a log written before
keeps its texts in the ``artifacts`` table (append-only since 0005), and both are checked here."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from diagevo.events.schemas import new_event
from diagevo.events.store import HEAD_REVISION, EventStore, StoreError, current, upgrade
from diagevo.replay import verify_run
from tests.conftest import Backend
from tests.test_cli_memory import run_cli

QUESTION = "What is 6 × 7? ünïcødé"
SHA = hashlib.sha256(QUESTION.encode()).hexdigest()


def _log(store: EventStore) -> None:
    store.append([
        new_event("run.started", "r", 0, "r/0/start", config={"k": 0.5}, seed=0),
        new_event("question.generated", "r", 1, "r/1/q1", question_id="q1", mode="free", text=QUESTION),
    ])


def _legacy_log(backend: Backend, url: str) -> None:
    """The same log as a diagevo before 0008 wrote it (texts in ``artifacts``), at the head revision."""
    with EventStore(url) as store:
        _log(store)
    backend.downgrade(url, "0007")  # moves the texts into artifacts
    assert upgrade(url) == ("0007", HEAD_REVISION)


def _drop_event_guard(backend: Backend, url: str) -> None:
    engine = backend.engine(url)
    with engine.begin() as conn:
        if backend.name == "sqlite":
            conn.execute(text("DROP TRIGGER events_no_update"))
        else:
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
    engine.dispose()


def _drop_artifact_guard(backend: Backend, url: str) -> None:
    engine = backend.engine(url)
    with engine.begin() as conn:
        if backend.name == "sqlite":
            conn.execute(text("DROP TRIGGER artifacts_no_update"))
            conn.execute(text("DROP TRIGGER artifacts_no_delete"))
        else:
            conn.execute(text("ALTER TABLE artifacts DISABLE TRIGGER USER"))
    engine.dispose()


def _raw(backend: Backend, url: str, sql: str) -> None:
    engine = backend.engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql))
    finally:
        engine.dispose()


def test_the_key_is_the_hash_of_the_text(store: EventStore) -> None:
    _log(store)
    assert store.artifact(SHA) == QUESTION
    (q,) = store.read("r", types=("question.generated",))
    assert q.data["text"] == {"$artifact": SHA}


@pytest.mark.parametrize("sql", [f"UPDATE artifacts SET text = 'forged' WHERE sha256 = '{SHA}'", "DELETE FROM artifacts"])
def test_the_database_refuses_update_and_delete(backend: Backend, db_url: str, sql: str) -> None:
    _legacy_log(backend, db_url)
    with pytest.raises(Exception, match="artifacts are append-only"):
        _raw(backend, db_url, sql)
    with EventStore(db_url) as store:
        assert store.artifact(SHA) == QUESTION and verify_run(store, "r") == []


def test_truncate_is_refused_on_postgres(backend: Backend, db_url: str) -> None:
    if backend.name != "postgres":
        pytest.skip("SQLite has no TRUNCATE (its DELETE trigger covers it)")
    _legacy_log(backend, db_url)
    with pytest.raises(Exception, match="artifacts are append-only"):
        _raw(backend, db_url, "TRUNCATE artifacts")


def test_an_edited_text_is_reported_by_verify_and_never_shown(
    backend: Backend, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _legacy_log(backend, db_url)
    _drop_artifact_guard(backend, db_url)
    _raw(backend, db_url, f"UPDATE artifacts SET text = 'What is 6 × 8?' WHERE sha256 = '{SHA}'")
    with EventStore(db_url) as store:
        assert store.verify_chain("r") == []  # the chain alone cannot see it
        assert verify_run(store, "r") == [f"seq 2: artifact {SHA} was altered (its text does not hash to its key)"]
        with pytest.raises(StoreError, match="was altered"):
            list(store.read("r", texts=True))
        with pytest.raises(StoreError, match="was altered"):
            store.artifact(SHA)
    code, out, err = run_cli(capsys, "memory", "verify", "--db", db_url, "--run", "r")
    assert code != 0 and "was altered" in out + err
    code, out, err = run_cli(capsys, "memory", "export", "--db", db_url, "--run", "r")
    assert code != 0 and "was altered" in err and "Traceback" not in err


def test_a_deleted_text_is_reported_by_verify(backend: Backend, db_url: str) -> None:
    _legacy_log(backend, db_url)
    _drop_artifact_guard(backend, db_url)
    _raw(backend, db_url, "DELETE FROM artifacts")
    with EventStore(db_url) as store:
        assert verify_run(store, "r") == [f"seq 2: artifact {SHA} is missing"]


def test_a_log_of_revision_0004_is_upgraded_readable_and_verifiable(backend: Backend, db_url: str) -> None:
    _legacy_log(backend, db_url)
    backend.downgrade(db_url, "0004")  # as diagevo 0004 left it: no guard on artifacts
    assert current(db_url) == "0004"
    _raw(backend, db_url, "UPDATE artifacts SET text = text")  # allowed at 0004
    assert upgrade(db_url) == ("0004", HEAD_REVISION)
    with EventStore(db_url) as store:
        assert verify_run(store, "r") == []
        assert [e.data["text"] for e in store.read("r", types=("question.generated",), texts=True)] == [QUESTION]
    with pytest.raises(Exception, match="artifacts are append-only"):
        _raw(backend, db_url, "UPDATE artifacts SET text = text")


# --- texts kept with their events (0008) -----------------------------------------------------


def test_a_text_in_its_events_row_is_guarded_like_the_event(backend: Backend, db_url: str) -> None:
    with EventStore(db_url) as store:
        _log(store)
    with pytest.raises(Exception, match="events are append-only"):
        _raw(backend, db_url, "UPDATE events SET texts = '{\"text\":\"forged\"}' WHERE event_id = 'r/1/q1'")


@pytest.mark.parametrize(
    ("column", "problem"),
    [
        ('{"text":"What is 6 × 8?"}', f"seq 2: text text ({SHA}) was altered (it does not hash to its key)"),
        ("{}", f"seq 2: text text ({SHA}) is missing"),
        ("[1]", "seq 2: its texts column is not a JSON object"),
    ],
)
def test_an_edited_text_in_its_row_is_reported_and_never_shown(
    backend: Backend, db_url: str, column: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventStore(db_url) as store:
        _log(store)
    _drop_event_guard(backend, db_url)
    _raw(backend, db_url, f"UPDATE events SET texts = '{column}' WHERE event_id = 'r/1/q1'")
    with EventStore(db_url) as store:
        assert store.verify_chain("r") == []  # outside the chained data: only the key check sees it
        assert verify_run(store, "r") == [problem]
        with pytest.raises(StoreError, match="were altered"):
            list(store.read("r", texts=True))
    code, out, err = run_cli(capsys, "memory", "export", "--db", db_url, "--run", "r")
    assert code != 0 and "were altered" in err and "Traceback" not in err


def test_old_and_new_texts_are_read_side_by_side(backend: Backend, db_url: str) -> None:
    """A log upgraded to 0008 holds texts in both places; reads and verify take each from its own."""
    _legacy_log(backend, db_url)
    with EventStore(db_url) as store:
        store.append([new_event("question.generated", "r", 1, "r/1/q2", question_id="q2", mode="free", text="new ✓")])
        assert [e.data["text"] for e in store.read("r", types=("question.generated",), texts=True)] == [QUESTION, "new ✓"]
        assert [e.data["text"] for e in store.read_naming("r", {"question_id": ["q1", "q2"]}, texts=True)] == [QUESTION, "new ✓"]
        assert verify_run(store, "r") == []
    engine = backend.engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM artifacts")).scalar_one() == 1
        assert conn.execute(text("SELECT count(*) FROM events WHERE texts IS NOT NULL")).scalar_one() == 1
    engine.dispose()


def test_the_downgrade_to_0007_loses_no_text(backend: Backend, db_url: str) -> None:
    with EventStore(db_url) as store:
        _log(store)
    backend.downgrade(db_url, "0007")
    engine = backend.engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT sha256, text FROM artifacts")).all() == [(SHA, QUESTION)]
    engine.dispose()
