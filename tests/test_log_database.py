"""What the database itself enforces, on SQLite and PostgreSQL: UPDATE, DELETE and TRUNCATE of
the log are refused, one milestone per run and round, texts in their events' rows, and an edit
made behind the database's back shows in ``verify``. The INSERT-only trainer role's attacks on
PostgreSQL are in ``test_log_trainer_role.py``."""

from __future__ import annotations

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from diagevo.log import Recorder, StoreError
from diagevo.log.checks import verify_chain
from diagevo.schemas import EventIn
from tests.conftest import Backend
from tests.logs import wire_event


def scored(run: str, eid: str) -> EventIn:
    return wire_event("question.scored", run, 1, eid, question_id=eid, n=8, p1=0.5, p2=0.5, retained=True)


def batch(run: str, n: int) -> list[EventIn]:
    return [scored(run, f"e-{i}") for i in range(n)]


@pytest.mark.parametrize(
    "sql", ["UPDATE events SET round = 99", "UPDATE events SET data = '{}' WHERE seq = 1", "DELETE FROM events"]
)
def test_update_and_delete_on_events_are_refused_by_the_database(backend: Backend, store: Recorder, sql: str) -> None:
    store.append(batch("r", 3))
    before = list(store.raw("r"))
    engine = backend.engine(store.url)
    with pytest.raises(sa_exc.DBAPIError, match="append-only"):
        with engine.begin() as conn:
            conn.execute(text(sql))
    engine.dispose()
    assert list(store.raw("r")) == before


@pytest.mark.postgres
def test_truncate_is_refused_on_postgres(postgres_backend: Backend) -> None:
    from diagevo.log import open_log

    url = postgres_backend.fresh_url()
    with open_log(url) as store:
        store.append(batch("r", 2))
        engine = postgres_backend.engine(url)
        with pytest.raises(sa_exc.DBAPIError, match="append-only"):
            with engine.begin() as conn:
                conn.execute(text("TRUNCATE events"))
        engine.dispose()
        assert store.last_seq("r") == 2


def test_a_round_is_committed_once_whoever_inserts(store: Recorder) -> None:
    """The milestone index (migration 0009): a second ``round.committed`` of a round, even under
    another id, is refused by the database, and nothing of its batch is stored."""
    store.append([wire_event("round.committed", "r", 1, "c1"), wire_event("round.started", "r", 2, "s2")])
    with pytest.raises(StoreError, match="failed"):
        store.append([scored("r", "x"), wire_event("round.committed", "r", 1, "c1-again")])
    assert [e.event_id for e in store.read("r")] == ["c1", "s2"]


def test_texts_are_kept_in_their_events_row(backend: Backend, store: Recorder) -> None:
    """A text lies in its event's row (``texts``); the data names it by its sha256, so the chain
    commits to it."""
    evs = [
        wire_event("question.generated", "r", 1, f"g{i}", question_id=f"q{i}", mode="free", text="same text")
        for i in range(3)
    ] + [wire_event("failure.recorded", "r", 1, "f", failure_id="f1", question_id="q0", response="r", reference="")]
    store.append(evs[:2])
    store.append(evs[2:])
    engine = backend.engine(store.url)
    with engine.connect() as conn:
        column = dict(conn.execute(text("SELECT event_id, texts FROM events")).all())
    engine.dispose()
    assert column == {f"g{i}": '{"text":"same text"}' for i in range(3)} | {"f": '{"response":"r"}'}


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        (
            "UPDATE events SET data = replace(data, '\"p1\":0.5', '\"p1\":0.9') WHERE event_id = 'e-2'",
            "seq 3: hash mismatch",
        ),
        ("UPDATE events SET texts = '{\"text\":\"edited\"}' WHERE event_id = 'g'", "text text"),
        ("UPDATE events SET question_id = 'other' WHERE event_id = 'e-1'", "its id columns do not hold"),
    ],
)
def test_an_edit_behind_the_databases_back_shows_in_verify(
    backend: Backend, db_url: str, sql: str, problem: str
) -> None:
    from diagevo.log import open_log

    with open_log(db_url) as store:
        store.append(
            batch("r", 5) + [wire_event("question.generated", "r", 1, "g", question_id="q", mode="free", text="t")]
        )
        backend.disable_append_only(db_url)
        engine = backend.engine(db_url)
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
        engine.dispose()
        problems = verify_chain(store, "r")
    assert len(problems) == 1 and problem in problems[0]
