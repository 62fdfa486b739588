"""Texts (questions, trajectories, raw replies) are trusted as events are: named in the chained
data by the sha256 of the text, append-only by the database, checked by ``verify``, and never shown
edited. A text lies in its event's ``texts`` column (since 0008); migration 0011 moved the texts
of older logs there from the ``artifacts`` table, which is gone."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from diagevo.catalog import QuestionGenerated
from diagevo.log import Recorder, StoreError, open_log
from diagevo.log.schema import HEAD_REVISION, revision_status, upgrade
from diagevo.views.verify import verify_run
from tests.conftest import Backend
from tests.logs import wire_event
from tests.test_cli_memory import run_cli

QUESTION = "What is 6 × 7? ünïcødé"
SHA = hashlib.sha256(QUESTION.encode()).hexdigest()


def _log(store: Recorder) -> None:
    store.append(
        [
            wire_event("run.started", "r", 0, "r/0/start", config={"k": 0.5}, seed=0),
            wire_event("question.generated", "r", 1, "r/1/q1", question_id="q1", mode="free", text=QUESTION),
        ]
    )


def _legacy_log(backend: Backend, url: str, *sql: str) -> None:
    """The same log as a diagevo before 0008 wrote it (texts in ``artifacts``); ``sql`` run on it
    there (the artifacts' guards lifted first), then upgraded to the head revision."""
    with open_log(url) as store:
        _log(store)
    backend.downgrade(url, "0007")  # 0008's downgrade moves the texts into artifacts
    if sql:
        _raw(
            backend,
            url,
            "DROP TRIGGER artifacts_no_update"
            if backend.name == "sqlite"
            else "ALTER TABLE artifacts DISABLE TRIGGER USER",
        )
        if backend.name == "sqlite":
            _raw(backend, url, "DROP TRIGGER artifacts_no_delete")
        for stmt in sql:
            _raw(backend, url, stmt)
    assert upgrade(url) == ("0007", HEAD_REVISION)


def _tables(backend: Backend, url: str) -> set[str]:
    from sqlalchemy import inspect

    engine = backend.engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _drop_event_guard(backend: Backend, url: str) -> None:
    engine = backend.engine(url)
    with engine.begin() as conn:
        if backend.name == "sqlite":
            conn.execute(text("DROP TRIGGER events_no_update"))
        else:
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
    engine.dispose()


def _raw(backend: Backend, url: str, sql: str) -> None:
    engine = backend.engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql))
    finally:
        engine.dispose()


def test_the_key_is_the_hash_of_the_text(store: Recorder) -> None:
    _log(store)
    (q,) = store.read("r", types=(QuestionGenerated,))
    assert q.event.text == {"$artifact": SHA}
    (full,) = store.read("r", types=(QuestionGenerated,), texts=True)
    assert full.event.text == QUESTION


def test_the_upgrade_moves_the_texts_of_an_older_log_into_their_rows(backend: Backend, db_url: str) -> None:
    _legacy_log(backend, db_url)
    assert "artifacts" not in _tables(backend, db_url)
    with open_log(db_url) as store:
        assert [e.event.text for e in store.read("r", types=(QuestionGenerated,), texts=True)] == [QUESTION]
        assert verify_run(store, "r") == []
    engine = backend.engine(db_url)
    with engine.connect() as conn:
        assert (
            conn.execute(text("SELECT texts FROM events WHERE event_id = 'r/1/q1'")).scalar_one()
            == '{"text":"What is 6 × 7? ünïcødé"}'
        )
    engine.dispose()


@pytest.mark.parametrize(
    "sql", [f"UPDATE artifacts SET text = 'What is 6 × 8?' WHERE sha256 = '{SHA}'", "DELETE FROM artifacts"]
)
def test_a_legacy_text_lost_or_edited_before_the_upgrade_stays_missing(
    backend: Backend, db_url: str, sql: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The upgrade moves only texts that hash to their keys: an edited one is not made the
    event's text; verify reports it missing and reads refuse to show the event's texts."""
    _legacy_log(backend, db_url, sql)
    with open_log(db_url) as store:
        assert store.verify_chain("r") == [f"seq 2: text text ({SHA}) is missing"]
        with pytest.raises(StoreError, match="missing or altered"):
            list(store.read("r", texts=True))
    code, out, err = run_cli(capsys, "memory", "export", "--db", db_url, "--run", "r")
    assert code != 0 and "missing or altered" in err and "Traceback" not in err


def test_a_log_of_revision_0004_is_upgraded_readable_and_verifiable(backend: Backend, db_url: str) -> None:
    _legacy_log(backend, db_url)
    backend.downgrade(db_url, "0004")  # as diagevo 0004 left it
    assert revision_status(db_url).current == "0004"
    assert upgrade(db_url) == ("0004", HEAD_REVISION)
    with open_log(db_url) as store:
        assert verify_run(store, "r") == []
        assert [e.event.text for e in store.read("r", types=(QuestionGenerated,), texts=True)] == [QUESTION]


def test_a_text_in_its_events_row_is_guarded_like_the_event(backend: Backend, db_url: str) -> None:
    with open_log(db_url) as store:
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
    with open_log(db_url) as store:
        _log(store)
    _drop_event_guard(backend, db_url)
    _raw(backend, db_url, f"UPDATE events SET texts = '{column}' WHERE event_id = 'r/1/q1'")
    with open_log(db_url) as store:
        assert store.verify_chain("r") == [problem]
        assert verify_run(store, "r") == [problem]
        with pytest.raises(StoreError, match="missing or altered"):
            list(store.read("r", texts=True))
    code, out, err = run_cli(capsys, "memory", "export", "--db", db_url, "--run", "r")
    assert code != 0 and "missing or altered" in err and "Traceback" not in err


def test_the_downgrade_to_0007_loses_no_text(backend: Backend, db_url: str) -> None:
    with open_log(db_url) as store:
        _log(store)
    backend.downgrade(db_url, "0010")  # artifacts back (empty): the texts stay in their rows
    assert "artifacts" in _tables(backend, db_url)
    backend.downgrade(db_url, "0007")  # the texts column goes: its texts into artifacts
    engine = backend.engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT sha256, text FROM artifacts")).all() == [(SHA, QUESTION)]
    engine.dispose()
    assert upgrade(db_url) == ("0007", HEAD_REVISION)
    with open_log(db_url) as store:
        assert [e.event.text for e in store.read("r", types=(QuestionGenerated,), texts=True)] == [QUESTION]
