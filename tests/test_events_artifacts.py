"""Texts (questions, trajectories, raw replies) are trusted as events are: named in the chained
data by the sha256 of the text, append-only by the database, checked by ``verify``, and never shown
edited. A text lies in its event's ``texts`` column, beside the event's data."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from diagevo.catalog import QuestionGenerated
from diagevo.log import Recorder, StoreError, open_log
from diagevo.log.checks import verify_chain
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
        assert verify_chain(store, "r") == [problem]
        assert verify_run(store, "r") == [problem]
        with pytest.raises(StoreError, match="missing or altered"):
            list(store.read("r", texts=True))
    code, out, err = run_cli(capsys, "memory", "export", "--db", db_url, "--run", "r")
    assert code != 0 and "missing or altered" in err and "Traceback" not in err
