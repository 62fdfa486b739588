"""Issue 73: no checkpoint row stops a reader, and where checkpoints lie comes from the machine.

Each finding of the issue is written as a raw row into run ``t`` of the simulator after its two
rounds: into SQLite past every check (as whoever may write the file could), into PostgreSQL as the
trainer role with the documented grants (a plain INSERT the database takes: none of these rows
breaks what keeps the log whole). Then ``memory verify`` names the row by its seq, ``diagevo runs``
and ``memory stats`` read the run, and ``train --resume`` passes the row over, saying so in one line
(the run, the seq, the rule), and trains on from the checkpoint the valid events name, every valid
round kept:

- a ``checkpoint.written`` of ``round003-solver`` in round 3, which no ``round.started`` opened;
- a ``checkpoint.pruned`` of the latest checkpoint, written again under its absolute path form
  (the text differs, the name is the latest);
- a checkpoint of phase ``foo``;
- a checkpoint whose ``bytes`` is ``1e300``;
- a ``run.configured`` whose ``train.out_dir`` names another folder: a row the rules take, whose
  folder is named and never looked in (the database's folder is, or the command's ``--out-dir``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from diagevo import rounds as protocol
from diagevo.catalog import RoundCommitted, RunStarted
from diagevo.log import open_log
from diagevo.log.paths import beside_database
from diagevo.log.recorder import payload
from tests.input_cases import cli
from tests.logs import ForgedRow
from tests.test_log_trainer_role import roles  # noqa: F401 - the fixture (PostgreSQL's trainer role)
from tests.test_train import SMALL

RUN = "t"


@dataclass
class Log:
    """A database of run ``t`` (two simulated rounds) and how a raw row goes in: ``forge(type,
    round, data)`` appends it past diagevo's checks and returns its seq."""

    db: str
    forge: Callable[[str, int, dict[str, Any]], int]

    @property
    def runs(self) -> Path:
        """The database's folder of run folders (where a resume looks)."""
        return beside_database(self.db, ".runs", move=False).resolve()

    def train(self, *more: str) -> tuple[int, str, str]:
        return cli("train", "--db", self.db, "--run", RUN, "--quiet", *SMALL, *more)


def _sqlite(tmp_path: Path) -> Log:
    db = f"sqlite:///{tmp_path / 'x.db'}"

    def forge(type_: str, rnd: int, data: dict[str, Any]) -> int:
        with open_log(db) as s:  # as tests.test_hostile_logs.store_raw: no check but the chain's
            eid = f"forged-{uuid.uuid4().hex[:8]}"
            s.append([ForgedRow(type=type_, run=RUN, round=rnd, event_id=eid, data=data)])
            return s.last_seq(RUN)

    return Log(db, forge)


def _postgres(request: pytest.FixtureRequest) -> Log:
    from tests.test_log_shapes_pg import raw_row
    from tests.test_log_trainer_role import insert

    trainer = request.getfixturevalue("roles")  # the documented grants: SELECT, and INSERT into events

    def forge(type_: str, rnd: int, data: dict[str, Any]) -> int:
        insert(trainer.trainer, raw_row(trainer.trainer_url, RUN, type_, rnd, data))  # a plain INSERT as the trainer
        with open_log(trainer.trainer_url, create=False) as s:
            return s.last_seq(RUN)

    return Log(trainer.trainer_url, forge)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def log(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Log:
    """Run ``t`` trained two rounds (on PostgreSQL as the trainer role), its folder under ``tmp_path``."""
    monkeypatch.chdir(tmp_path)  # a PostgreSQL database's folder is the working directory's
    made = _sqlite(tmp_path) if request.param == "sqlite" else _postgres(request)
    code, _, err = made.train("--rounds", "2")
    assert code == 0, err
    return made


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The checkpoints the simulator's backend loads in this process, in order."""
    from diagevo.train.sim.backend import SimBackend

    loaded: list[Path] = []
    real = SimBackend.load

    def load(self: SimBackend, path: Path) -> None:
        loaded.append(Path(path))
        real(self, path)

    monkeypatch.setattr(SimBackend, "load", load)
    yield loaded


def open_round_3(log: Log) -> None:
    """Round 3 opened as the trainer opens it, through the round protocol."""
    with open_log(log.db, create=False) as s:
        protocol.Round.open(s, RUN, 3)


def read_on(log: Log, seq: int) -> None:
    """``memory verify`` names the row by its seq; ``diagevo runs`` lists the run as it stands
    (not unreadable), ``memory stats`` (the checkpoints' sizes) reads it."""
    code, out, err = cli("memory", "verify", "--run", RUN, "--db", log.db)
    assert code == 1 and f"seq {seq}: " in " ".join(out.split()), out + err
    code, out, err = cli("runs", "--db", log.db, "--json")
    assert code == 0, err
    (status,) = [r["status"] for r in json.loads(out)["runs"] if r["run"] == RUN]
    assert status in ("complete", "interrupted"), status
    code, out, err = cli("memory", "stats", "--run", RUN, "--db", log.db, "--json")
    assert code == 0 and [r["round"] for r in json.loads(out)["rounds"]][:2] == [1, 2], err


def resumed_past(log: Log, seq: int, rule: str, *words: str) -> str:
    """``train --resume --rounds 3`` exits 0, naming the row at ``seq`` in one line (run, seq,
    the rule and ``words``), and round 3 is committed after rounds 1 and 2: its stderr."""
    code, _, err = log.train("--resume", "--rounds", "3")
    assert code == 0, err
    (note,) = [line for line in err.splitlines() if f"seq {seq}:" in line]
    assert note.startswith(f"run '{RUN}', seq {seq}: passed over: {rule}: "), note
    assert all(w in note for w in words), note
    with open_log(log.db, create=False) as s:
        assert [e.round for e in s.read(RUN, types=(RoundCommitted,))] == [1, 2, 3]
    return err


def test_a_checkpoint_of_a_round_not_started_is_passed_over(log: Log, loads: list[Path]) -> None:
    seq = log.forge("checkpoint.written", 3, {"path": "round003-solver", "phase": "solver", "bytes": 10})
    read_on(log, seq)
    resumed_past(log, seq, "checkpoint of an open round", "round003-solver", "round 3 is not open")
    assert loads == [log.runs / RUN / "round002-solver"]  # the last checkpoint the valid events name
    assert (log.runs / RUN / "round003-solver").is_dir()  # and round 3 wrote its own


def test_a_prune_of_the_latest_written_again_by_its_absolute_path_is_passed_over(
    log: Log, loads: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round 3 stopped in its diagnosis (its two checkpoints written); the row that names its
    solver's by an absolute path is taken (an older log's form), the prune of that checkpoint
    by its name is refused: the latest of its phase, what the resume loads."""
    import diagevo.train.loop as loop

    def stop(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(loop, "diagnose", stop)
        code, _, err = log.train("--resume", "--rounds", "3")
        assert code == 130 and "interrupted in round 3" in err, err
    solver = log.runs / RUN / "round003-solver"
    assert solver.is_dir()
    log.forge("checkpoint.written", 3, {"path": str(solver), "phase": "solver", "bytes": 10})
    prune = {"path": "round003-solver", "phase": "solver", "written_round": 3, "bytes": 10}
    seq = log.forge("checkpoint.pruned", 3, prune)
    read_on(log, seq)
    resumed_past(log, seq, "checkpoint pruned once written", "the latest checkpoint of solver")
    assert loads == [log.runs / RUN / "round002-solver", solver]  # round 3 went on from its own solver
    assert solver.is_dir()


def test_a_checkpoint_of_a_phase_no_loop_has_is_passed_over(log: Log, loads: list[Path]) -> None:
    open_round_3(log)
    seq = log.forge("checkpoint.written", 3, {"path": "round003-foo", "phase": "foo", "bytes": 10})
    read_on(log, seq)
    resumed_past(log, seq, "checkpoint named by its event", "phase 'foo', not challenger or solver")
    assert loads == [log.runs / RUN / "round002-solver"]


def test_a_checkpoint_whose_size_is_no_count_of_bytes_is_passed_over(log: Log, loads: list[Path]) -> None:
    open_round_3(log)
    forged = {"path": "round003-challenger", "phase": "challenger", "bytes": 1e300}
    seq = log.forge("checkpoint.written", 3, forged)
    read_on(log, seq)
    resumed_past(log, seq, "checkpoint size a count of bytes", "holds bytes 1e+300")
    assert loads == [log.runs / RUN / "round002-solver"]


def test_a_stored_out_dir_is_named_and_not_looked_in(log: Log, loads: list[Path], tmp_path: Path) -> None:
    """A ``run.configured`` the rules take, whose ``train.out_dir`` names another folder: the
    resume looks in the database's folder, names the stored one, and writes nothing there."""
    elsewhere = tmp_path / "elsewhere"
    with open_log(log.db, create=False) as s:
        (started,) = s.read(RUN, types=(RunStarted,))
        config = payload(started)["config"]
    config = {**config, "train": {**config["train"], "out_dir": str(elsewhere)}}
    log.forge("run.configured", 3, {"config": config, "seed": 0})
    code, out, err = cli("memory", "verify", "--run", RUN, "--db", log.db)
    assert code == 0, out + err  # a config the rules take: only where it points is the machine's to say
    code, _, err = log.train("--resume", "--rounds", "3")
    assert code == 0, err
    (note,) = [line for line in err.splitlines() if line.strip()]
    said = f"passed over: its train.out_dir '{elsewhere}' is not looked in: checkpoints are looked for under "
    said += f"{log.runs} "
    assert re.match(rf"run '{RUN}', seq \d+: ", note) and said in note, note
    assert loads == [log.runs / RUN / "round002-solver"]
    assert (log.runs / RUN / "round003-solver").is_dir() and not elsewhere.exists()


def test_the_commands_own_out_dir_is_where_checkpoints_go_and_are_looked_for(tmp_path: Path, loads: list[Path]) -> None:
    """``--out-dir`` (``train.out_dir`` of the command) for a new run and for its resume; a
    resume without it looks in the database's folder alone, naming the stored folder."""
    made, out_dir = _sqlite(tmp_path), tmp_path / "big-disk"
    code, _, err = made.train("--rounds", "1", "--out-dir", str(out_dir))
    assert code == 0, err
    assert (out_dir / RUN / "round001-solver").is_dir() and not made.runs.exists()
    code, _, err = made.train("--resume", "--rounds", "2", "--out-dir", str(out_dir))
    assert code == 0 and not err.strip(), err  # the stored folder is the command's: nothing to name
    assert loads == [out_dir / RUN / "round001-solver"]
    code, _, err = made.train("--resume", "--rounds", "3")
    (error,) = err.strip().split("\n")  # one line, naming the stored folder
    assert code == 1 and error.startswith(f"error: cannot continue run '{RUN}' at round 3: checkpoint round002-"), err
    assert f"checkpoint round002-solver is in none of {made.runs / RUN} (" in error, error
    assert f"; not in its stored train.out_dir '{out_dir}' (seq " in error, error
    assert "put it back (or give the command the folder it lies in)" in error, error
