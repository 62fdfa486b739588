"""A stored row that slipped past the checks (SQLite has no roles: whoever may write the file may
write any row) is read within ingest's bounds and named, never a crash: a row no reader can take
(data past the bounds or no JSON object) is passed over by every reader and named by ``memory
verify`` with its seq, and so is a row out of its type's shape (what PostgreSQL refuses on
insert), each named by the reader of its own run; and ``diagevo runs`` shows every run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from diagevo.log import StoreError, open_log, payload
from diagevo.log.chain import canonical_event_json, chain_hash
from diagevo.memory.state import Refusal
from diagevo.views.admission import admission
from diagevo.views.runs import runs
from diagevo.views.verify import verdict
from tests.logs import ForgedRow, Log
from tests.test_cli_memory import run_cli
from tests.test_log_shapes_pg import raw_row
from tests.test_log_trainer_role import insert


@pytest.fixture()
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'rows.db'}"
    with open_log(url) as log:
        log.append(Log("base").node("N1").cause("C1", "N1").question("q1", 0.5, active="C1").commit().events())
        log.append(Log("other").node("N1").cause("C1", "N1").commit().events())
    return url


def _raw(url: str, run: str, type_: str, rnd: int, data: str | dict[str, Any]) -> int:
    """Insert a chained row of this data (``str``: JSON as written, no key columns); its seq."""
    row = raw_row(url, run, type_, rnd, {} if isinstance(data, str) else data)
    if isinstance(data, str):
        row["data"] = data
        row["hash"] = chain_hash(row["prev_hash"], canonical_event_json(row["event_id"], run, rnd, type_, 1, data))
    engine = create_engine(url)
    insert(engine, row)
    engine.dispose()
    with open_log(url, create=False) as log:
        return log.last_seq(run)


def test_verify_names_a_row_nested_5000_deep(db: str) -> None:
    seq = _raw(db, "base", "eval.recorded", 1, '{"x":' + "[" * 5000 + "]" * 5000 + "}")
    why = "its data cannot be read: JSON nested deeper than 64 levels"
    with open_log(db, create=False) as log:
        checked = verdict(log, "base")
        assert checked.problems == [f"seq {seq}: {why} (every reader passes it over)"]
        assert seq not in [e.seq for e in log.read("base")]
        assert admission(log, "base").refusals == (Refusal(seq, "eval.recorded", why),)
        assert verdict(log, "other").ok


def test_verify_names_a_row_whose_data_is_no_object(db: str) -> None:
    """The fold passes over a row it cannot read (it met ``[1]`` as a mapping), and folds the rest."""
    seq = _raw(db, "base", "question.generated", 1, "[1]")
    with open_log(db, create=False) as log:
        checked = verdict(log, "base")
        assert checked.problems == [f"seq {seq}: its data is not a JSON object (every reader passes it over)"]


def test_a_raw_acc_x_is_passed_over_by_memory_why(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A promotion whose ``acc`` is a text (out of its type's shape, which PostgreSQL refuses on
    insert), named by verify; ``memory why`` tells the cause's story without it, naming it in
    one line (issue 73: no stored row stops a reader)."""
    seq = _raw(db, "base", "cause.promoted", 2, {"acc": "x", "cause_id": "C1", "n_candidates": 1})
    code, out, err = run_cli(capsys, "memory", "why", "C1", "--run", "base", "--db", db)
    why = "out of shape: cause.promoted data.acc is not of its type (number)"
    assert code == 0 and "C1" in out, err
    assert err.splitlines() == [f"run 'base', seq {seq}: passed over: {why}"]
    with open_log(db, create=False) as log:
        assert f"seq {seq}: {why} (every reader passes it over)" in verdict(log, "base").problems


def test_a_reader_names_its_own_runs_bad_event(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Both runs hold a bad promotion; ``memory why`` of run ``other`` names ``other``'s, not the
    first run's."""
    _raw(db, "base", "cause.promoted", 2, {"acc": "x", "cause_id": "C1", "n_candidates": 1})
    seq = _raw(db, "other", "cause.promoted", 2, {"acc": "y", "cause_id": "C1", "n_candidates": 1})
    code, _out, err = run_cli(capsys, "memory", "why", "C1", "--run", "other", "--db", db)
    assert code == 0 and err.splitlines() == [
        f"run 'other', seq {seq}: passed over: out of shape: cause.promoted data.acc is not of its type (number)"
    ]


def test_diagevo_runs_shows_every_run_past_an_unreadable_one(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A milestone ``diagevo runs`` reads, holding a 5,000-digit number: that run is shown as it
    is, with the row it passed over, the other as it is."""
    seq = _raw(db, "base", "run.noted", 2, '{"note":"n","n":' + "1" * 5000 + "}")
    with open_log(db, create=False) as log:
        found = {s.run: (s.status, s.passed_over) for s in runs(log)}
    why = "its data cannot be read: a number beyond a double's range"
    assert found == {"base": ("complete", [{"seq": seq, "why": why}]), "other": ("complete", [])}
    code, out, err = run_cli(capsys, "runs", "--db", db)
    assert code == 0 and "other" in out and f"passed over at seq {seq}: " in out
    assert f"run 'base', seq {seq}: passed over: {why}" in err


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "reason"),
    [([[[]]], None), (_nested(65), "JSON nested deeper than 64 levels"), (10**400, "a number beyond")],
    ids=["3 deep", "65 deep", "a 401-digit number"],
)
def test_the_writer_stores_nothing_its_readers_refuse(db: str, value: Any, reason: str | None) -> None:
    """diagevo's own append (whatever a trainer notes) refuses data past the readers' bounds,
    naming the event; data within them is stored and read back."""
    data = {"phase": "n", "stats": {"x": value}}  # a field of any JSON within it
    ev = ForgedRow(type="phase.completed", run="base", round=2, event_id="deep", data=data)
    with open_log(db, create=False) as log:
        if reason is None:
            log.append([ev])
            assert payload(next(log.rows("base", newest=True, limit=1)))["stats"]["x"] == value
        else:
            with pytest.raises(StoreError, match=f"event deep: its data is {reason}"):
                log.append([ev])
            assert not log.existing_ids("base", ["deep"])
