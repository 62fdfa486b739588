"""A ``run.forked`` forged right after a run's own commit (issue 73).

Whoever may append (a raw row in SQLite, the PostgreSQL trainer role with the documented grants)
can write into run ``victim``, right after its own ``round.committed`` of round 1, a
``run.forked`` naming run ``source``'s real commit of round 1 with its real hash, every column
as diagevo would write it (its id, its ``recorded_at`` that of the run's first row). Where it
stands and what it names are what a fork's marker has; what its writer cannot write is the log
before it. The run's first event and its commit of the round are no copies of the source's, so
the marker makes no fork and no what-if: ``diagevo runs`` lists the run as it is, naming the row
passed over; the round protocol goes on with it. A fork and a what-if made by diagevo, and a
fork exported and ingested elsewhere, still read as such.
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
from diagevo.catalog.ids import event_id
from diagevo.fork import fork_run
from diagevo.interchange import export_lines, ingest
from diagevo.log import open_log
from diagevo.memory.forks import whatif_config
from diagevo.schemas import EventIn
from diagevo.views.admission import admission
from diagevo.views.forks import fork_marker
from diagevo.views.verify import verify_run
from diagevo.whatif import what_if
from tests.input_cases import cli
from tests.logs import ForgedRow, Log, wire_event
from tests.test_log_trainer_role import roles  # noqa: F401 - the fixture (PostgreSQL's trainer role)

VICTIM, SOURCE = "victim", "source"


def _run(run: str, seed: int, val_acc: float, config: dict[str, Any] | None = None) -> list[EventIn]:
    """A run of one committed round, its ids as diagevo's trainer writes them."""
    config = config or {"k": 0.5}
    return [
        wire_event("run.started", run, 0, event_id(run, 0, "run.started"), config=config, seed=seed),
        wire_event("round.started", run, 1, event_id(run, 1, "round.started")),
        wire_event("node.created", run, 1, event_id(run, 1, "node.created", "N1"), node_id="N1", label="algebra"),
        wire_event("round.committed", run, 1, event_id(run, 1, "round.committed"), val_acc=val_acc),
    ]


SETTINGS = {"memory.k": "1.0"}  # the forged what-if's


def _victim(differs: str, whatif: bool) -> list[EventIn]:
    """The victim as its own trainer wrote it, differing from the source only as ``differs``
    says: its config beside what a what-if changes, its seed, or a figure of its commit (with
    the config a what-if under :data:`SETTINGS` would hold: an ablation of the source's k)."""
    same = whatif_config({"k": 0.5}, SETTINGS if whatif else {})
    return {
        "another config": lambda: _run(VICTIM, 0, 0.5, {**same, "train": {**same.get("train", {}), "rounds": 3}}),
        "another seed": lambda: _run(VICTIM, 1, 0.5, same),
        "another figure": lambda: _run(VICTIM, 0, 0.75, same),
    }[differs]()


@dataclass
class Forged:
    """A database of runs ``source`` and ``victim`` (round 1 committed each, nothing after), and
    how a raw row goes into ``victim``: ``forge(type, round, data)`` appends it past diagevo's
    checks, every column as diagevo would write it, and returns its seq."""

    db: str
    forge: Callable[[str, int, dict[str, Any]], int]


def _sqlite(tmp_path: Path, victim: list[EventIn]) -> Forged:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    with open_log(db) as log:
        log.append([*_run(SOURCE, 0, 0.5), *victim])

    def forge(type_: str, rnd: int, data: dict[str, Any]) -> int:
        with open_log(db) as log:  # as tests.test_hostile_logs.store_raw: no check but the chain's
            log.append([ForgedRow(type=type_, run=VICTIM, round=rnd, event_id=_id(), data=data)])
            return log.last_seq(VICTIM)

    return Forged(db, forge)


def _id() -> str:
    return f"forged-{uuid.uuid4().hex[:8]}"


def _postgres(request: pytest.FixtureRequest, victim: list[EventIn]) -> Forged:
    from tests.test_log_trainer_role import insert, next_row

    trainer = request.getfixturevalue("roles")
    with open_log(trainer.trainer_url, create=False) as log:  # the trainer appends through diagevo
        log.append([*_run(SOURCE, 0, 0.5), *victim])
        first = next(log.read(VICTIM, limit=1)).recorded_at

    def forge(type_: str, rnd: int, data: dict[str, Any]) -> int:
        eid = event_id(VICTIM, rnd, type_)  # the id diagevo gives it, the stamp of the run's first append
        row = next_row(trainer.trainer_url, VICTIM, type_, rnd, eid, **data)
        insert(trainer.trainer, {k: v for k, v in row.items() if k != "seq"} | {"recorded_at": first})
        with open_log(trainer.trainer_url, create=False) as log:
            return log.last_seq(VICTIM)

    return Forged(trainer.trainer_url, forge)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _forged(backend: str, request: pytest.FixtureRequest, tmp_path: Path, victim: list[EventIn]) -> Forged:
    return _sqlite(tmp_path, victim) if backend == "sqlite" else _postgres(request, victim)


def _marker(db: str, whatif: bool) -> dict[str, Any]:
    """A ``run.forked`` naming the source's commit of round 1, its seq and hash right."""
    with open_log(db, create=False) as log:
        commit = next(log.read(SOURCE, types=(RoundCommitted,)))
    marker = {"source_run": SOURCE, "source_round": 1, "source_seq": commit.seq, "source_hash": commit.hash}
    return marker | ({"whatif": {"settings": SETTINGS, "meaning": "a what-if"}} if whatif else {})


@pytest.mark.parametrize("whatif", [False, True], ids=["fork", "what-if"])
@pytest.mark.parametrize("differs", ["another config", "another seed", "another figure"])
def test_a_marker_forged_after_a_runs_own_commit_makes_no_fork(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, differs: str, whatif: bool
) -> None:
    forged = _forged(backend, request, tmp_path, _victim(differs, whatif))
    seq = forged.forge("run.forked", 1, _marker(forged.db, whatif))
    code, out, err = cli("runs", "--db", forged.db, "--json")
    assert code == 0, err
    (row,) = [r for r in json.loads(out)["runs"] if r["run"] == VICTIM]
    assert row["forked_from"] is None and row["status"] not in ("forked", "what-if"), row
    assert [p["seq"] for p in row["passed_over"]] == [seq], row
    said = "commit of round 1 (seq" if differs == "another figure" else "first event (seq"
    assert f"run {VICTIM!r}, seq {seq}: passed over: run forked at its opening: its {said}" in err, err
    code, _, err = cli("round", "start", "--run", VICTIM, "--db", forged.db)  # a what-if's would be refused
    assert code == 0, err
    code, out, _ = cli("memory", "verify", "--run", VICTIM, "--db", forged.db)
    assert code == 1 and f"seq {seq}: run forked at its opening: its {said}" in " ".join(out.split()), out


def test_a_fork_a_whatif_and_an_ingested_fork_still_read_as_such(tmp_path: Path) -> None:
    """The rule takes what diagevo writes: a fork, a what-if, and a fork exported, then ingested
    after its source into another database."""
    db, elsewhere = f"sqlite:///{tmp_path / 'x.db'}", f"sqlite:///{tmp_path / 'y.db'}"
    with open_log(db) as log:
        log.append(_run(SOURCE, 0, 0.5))
        fork_run(log, SOURCE, 1, "copy")
        made = what_if(log, SOURCE, SETTINGS, "other-k")
        assert fork_marker(log, "copy") is not None and fork_marker(log, made.run) is not None
        assert not made.left_behind and not any(admission(log, r).refusals for r in log.runs())
        source, copy = list(export_lines(log, SOURCE)), list(export_lines(log, "copy"))
    with open_log(elsewhere) as log:
        ingest(log, source)
        ingest(log, copy)
        assert fork_marker(log, "copy") is not None
        assert not any(admission(log, r).refusals for r in log.runs())


def test_a_forged_whatif_marker_relaxes_no_rule_after_it(tmp_path: Path) -> None:
    """A what-if's questions are its source's (a stitched one may name a cause Active in the
    what-if's memory), and its log ends at its marker: the rules relax nothing after a marker. A
    stitched question naming an Active cause as mastered, written after a forged what-if marker,
    is named by ``memory verify`` as it is in any run."""
    db = f"sqlite:///{tmp_path / 'x.db'}"
    victim = Log(VICTIM).node("N1").cause("C1", "N1").cause("C2", "N1").commit()
    with open_log(db) as log:
        log.append([*_run(SOURCE, 0, 0.5), *victim.events()])
        marker = _marker(db, whatif=True)
        raw = [("run.forked", 1, marker), ("round.started", 2, {})]
        raw.append(("question.generated", 2, {"question_id": "s", "mode": "stitched", "text": "?"}))
        raw[-1][2].update(active_cause="C1", mastered_cause="C2")
        for type_, rnd, data in raw:
            log.append([ForgedRow(type=type_, run=VICTIM, round=rnd, event_id=_id(), data=data)])
        stitched = log.last_seq(VICTIM)
        problems = verify_run(log, VICTIM)
    assert any(p.startswith(f"seq {stitched}: stitched question on a Mastered cause") for p in problems), problems
