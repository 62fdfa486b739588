"""Ctrl-C while PostgreSQL is still answering a statement (a follower or a trainer stopped by
hand on a busy machine): the connection is thrown away, never reset and returned to the pool,
whose failed reset SQLAlchemy would log with a traceback on stderr; the KeyboardInterrupt
reaches the caller as itself."""

from __future__ import annotations

import pytest

from diagevo.log import open_log
from diagevo.log.sql import SQLRecorder
from tests.conftest import Backend
from tests.logs import ForgedRow

pytestmark = pytest.mark.postgres


def _event(eid: str) -> ForgedRow:
    return ForgedRow(
        type="question.scored",
        run="r",
        round=1,
        event_id=eid,
        data={"question_id": eid, "n": 8, "p1": 0.5, "p2": 0.25, "pseudo_label": "42", "retained": True},
    )


def _busy(cur: object) -> None:
    """The server is answering a query when the interrupt comes."""
    cur.connection.pgconn.send_query(b"SELECT pg_sleep(0.2)")  # type: ignore[attr-defined]


def _logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("sqlalchemy")]


def test_ctrl_c_in_a_read_throws_its_connection_away(
    postgres_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    with open_log(postgres_backend.fresh_url()) as store:
        assert isinstance(store, SQLRecorder)
        with pytest.raises(KeyboardInterrupt), store._cursor() as cur:
            _busy(cur)
            raise KeyboardInterrupt
        assert _logged(caplog) == []
        assert store.runs() == [] and store.latest_run() is None  # reads on, with another connection


def test_ctrl_c_in_an_append_stores_nothing_and_stays_a_ctrl_c(
    postgres_backend: Backend, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_log(postgres_backend.fresh_url()) as store:
        store.append([_event("a")])

        def interrupted(self: SQLRecorder, cur: object, rows: object) -> None:
            _busy(cur)
            raise KeyboardInterrupt

        with monkeypatch.context() as m:
            m.setattr(type(store), "_insert_rows", interrupted)
            with pytest.raises(KeyboardInterrupt):  # not "write failed: another command is in progress"
                store.append([_event("b")])
        assert _logged(caplog) == []
        assert [e.event_id for e in store.read("r")] == ["a"]
        assert store.append([_event("b")]).appended == 1
