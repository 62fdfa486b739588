"""Issue 73's leftovers: what a reader shows follows what the fold takes, never the raw row.

Run ``base`` (round 1 committed through diagevo, round 2 open) gets rows written past diagevo's
checks: into SQLite raw (no check but the chain's), into PostgreSQL as the trainer role with the
documented grants (a plain INSERT the database takes: none of these rows breaks what keeps the
log whole). Then:

- ``memory stats`` counts only the rows the fold takes: an attribution to a cause no event
  created and a question generated for a round already committed are passed over by the fold,
  so they are no attribution of round 2 and no question of round 1; each is named in one line,
  and the counts equal the ones ``memory verify`` checks the saved statistics against;
- a ``run.forked`` naming a real commit of another run, written in the middle of the run, makes
  it no fork and no what-if: ``diagevo runs`` lists it as it is, naming the row passed over, and
  the round protocol goes on with it;
- a row of a declared field of the wrong JSON type (SQLite has no check of that; PostgreSQL
  refuses it on insert) is passed over by every reader, named, each exiting 0.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import RoundCommitted
from diagevo.log import open_log
from diagevo.schemas import EventIn
from diagevo.views.caches import refresh
from tests.input_cases import cli
from tests.logs import ForgedRow, Log, wire_event
from tests.test_log_trainer_role import roles  # noqa: F401 - the fixture (PostgreSQL's trainer role)

RUN = "base"
OTHER = "other"


@dataclass
class Forged:
    """A database of run ``base`` (round 1 committed, round 2 open) and run ``other`` (round 1
    committed), and how a raw row goes into ``base``: ``forge(type, round, data)`` appends it
    past diagevo's checks and returns its seq."""

    db: str
    forge: Callable[[str, int, dict[str, Any]], int]


def _runs() -> list[EventIn]:
    base = Log(RUN).node("N1").cause("C1", "N1").question("q1", 0.5, active="C1").commit().events()
    other = Log(OTHER).node("N1").cause("C1", "N1").commit().events()
    return [*base, wire_event("round.started", RUN, 2, "base/2/round.started"), *other]


def _sqlite(tmp_path: Path) -> Forged:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    with open_log(db) as log:
        log.append(_runs())
        refresh(log, RUN)

    def forge(type_: str, rnd: int, data: dict[str, Any]) -> int:
        with open_log(db) as log:  # as tests.test_hostile_logs.store_raw: no check but the chain's
            eid = f"forged-{uuid.uuid4().hex[:8]}"
            log.append([ForgedRow(type=type_, run=RUN, round=rnd, event_id=eid, data=data)])
            return log.last_seq(RUN)

    return Forged(db, forge)


def _postgres(request: pytest.FixtureRequest) -> Forged:
    from tests.test_log_shapes_pg import raw_row
    from tests.test_log_trainer_role import insert

    trainer = request.getfixturevalue("roles")  # run base, round 1 committed by the owner
    with open_log(trainer.trainer_url, create=False) as log:  # the trainer appends through diagevo
        log.append([e for e in _runs() if e.run != RUN or e.round == 2])

    def forge(type_: str, rnd: int, data: dict[str, Any]) -> int:
        insert(trainer.trainer, raw_row(trainer.trainer_url, RUN, type_, rnd, data))  # a plain INSERT
        with open_log(trainer.trainer_url, create=False) as log:
            return log.last_seq(RUN)

    return Forged(trainer.trainer_url, forge)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def forged(request: pytest.FixtureRequest, tmp_path: Path) -> Forged:
    return _sqlite(tmp_path) if request.param == "sqlite" else _postgres(request)


def _stats(db: str) -> tuple[dict[int, dict[str, Any]], str]:
    code, out, err = cli("memory", "stats", "--run", RUN, "--db", db, "--json")
    assert code == 0, err
    return {r["round"]: r for r in json.loads(out)["rounds"]}, err


def passed(seq: int, why: str) -> str:
    return f"run {RUN!r}, seq {seq}: passed over: {why}"


def test_stats_count_only_what_the_fold_takes(forged: Forged) -> None:
    """Two forged rows, then round 2 committed raw: round 1's questions and round 2's
    attributions are as the fold has them (0 attributions: the one written names no cause the
    memory holds), each forged row named by its seq; read again from the saved statistics, the
    same; ``memory verify`` finds the saved statistics equal to the log."""
    before, _ = _stats(forged.db)
    ghost = forged.forge("failure.attributed", 2, {"failure_id": "f9", "cause_id": "C999", "via": "dedup"})
    late = forged.forge(
        "question.generated",
        1,
        {"question_id": "q9", "mode": "free", "active_cause": None, "mastered_cause": None, "text": "late"},
    )
    forged.forge("round.committed", 2, {})
    rounds, err = _stats(forged.db)
    assert rounds[1]["questions"] == before[1]["questions"] == 1
    assert rounds[2]["attributions"] == 0 and rounds[2]["questions"] == 0
    assert passed(ghost, "unknown cause 'C999'") in err, err
    assert passed(late, "round 1 goes backwards: round 1 is already committed") in err, err
    with open_log(forged.db, create=False) as log:
        refresh(log, RUN)  # the saved statistics, as a writer leaves them (the database's owner on PostgreSQL)
    again, _ = _stats(forged.db)
    assert again == rounds
    code, out, _ = cli("memory", "verify", "--run", RUN, "--db", forged.db, "--json")
    problems = json.loads(out)["problems"]
    assert code == 1 and not [p for p in problems if "saved statistics" in p], problems
    assert any(f"seq {ghost}: unknown cause 'C999'" in p for p in problems), problems


def test_a_forged_fork_marker_makes_no_fork(forged: Forged) -> None:
    """A ``run.forked`` in round 2, naming run ``other``'s commit of round 1 with its hash, as a
    what-if's: the run is listed as it is (no origin, not a what-if), the row named; the round
    protocol still serves round 2; ``memory verify`` names it."""
    with open_log(forged.db, create=False) as log:
        commit = next(log.read(OTHER, types=(RoundCommitted,)))
    marker = {
        "source_run": OTHER,
        "source_round": 1,
        "source_seq": commit.seq,
        "source_hash": commit.hash,
        "whatif": {"settings": {"memory.k": 1.0}, "meaning": "a what-if"},
    }
    seq = forged.forge("run.forked", 2, marker)
    code, out, err = cli("runs", "--db", forged.db, "--json")
    assert code == 0, err
    (row,) = [r for r in json.loads(out)["runs"] if r["run"] == RUN]
    assert row["forked_from"] is None and row["status"] not in ("forked", "what-if"), row
    assert [p["seq"] for p in row["passed_over"]] == [seq], row
    assert passed(seq, "run forked at its opening: run.forked (source round 1) does not follow") in err, err
    code, out, _ = cli("runs", "--db", forged.db)  # the table says why, not "unreadable"
    assert code == 0 and f"passed over at seq {seq}:" in out and "unreadable" not in out, out
    code, _, err = cli("round", "requests", "--run", RUN, "--n", "2", "--db", forged.db)
    assert code == 0, err
    code, out, _ = cli("memory", "verify", "--run", RUN, "--db", forged.db)
    assert code == 1 and f"seq {seq}: run forked at its opening" in " ".join(out.split()), out


WRONG_TYPES = {  # (type, round, the field of the wrong type, data)
    "a list for a node id": ("cause.created", 2, "node_id", {"cause_id": "Cx", "node_id": ["x"], "description": "d"}),
    "a list for a failure id": ("failure.recorded", 2, "failure_id", {"failure_id": ["f"], "question_id": "q1"}),
    "a text for the metrics": ("eval.recorded", 1, "metrics", {"metrics": "x"}),
    "a number for a question id": (
        "question.generated",
        2,
        "question_id",
        {"question_id": 7, "mode": "free", "active_cause": None, "mastered_cause": None, "text": "t"},
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_a_row_of_a_wrong_json_type_stops_no_reader(tmp_path: Path, case: str) -> None:
    """On SQLite (no check of a field's JSON type): ``report``, ``memory stats``, ``runs`` (it is
    the newest row), ``memory show``, ``memory events`` exit 0, each that reads the row naming it
    in one line; ``memory verify``
    names it as every reader passes it over; round 1 reads as it did."""
    made = _sqlite(tmp_path)
    before, _ = _stats(made.db)
    type_, rnd, field, data = WRONG_TYPES[case]
    seq = made.forge(type_, rnd, data)
    why = f"out of shape: {type_} data.{field} is not of its type"
    for command in (
        ("report", "--run", RUN, "-o", str(tmp_path / "r.html")),
        ("memory", "stats", "--run", RUN),
        ("runs",),
        ("memory", "show", "--run", RUN),
        ("memory", "events", "--run", RUN, "--limit", "0"),
    ):
        code, _, err = cli(*command, "--db", made.db)
        assert code == 0, f"{' '.join(command)} exits {code}:\n{err[-2000:]}"
        if command[1:2] != ("show",) or type_ == "cause.created":  # show reads what the fold applies
            assert passed(seq, why) in err, (command, err)
    assert _stats(made.db)[0][1] == before[1]
    code, out, _ = cli("memory", "verify", "--run", RUN, "--db", made.db, "--json")
    named = [p for p in json.loads(out)["problems"] if p.startswith(f"seq {seq}: ")]
    assert code == 1 and len(named) == 1 and named[0].startswith(f"seq {seq}: {why}"), named
    assert named[0].endswith("(every reader passes it over)"), named
