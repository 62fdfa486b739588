"""A checkpoint's name follows from its event (:func:`diagevo.memory.checkpoints.checkpoint_rule`):
a ``checkpoint.written`` of round t after phase p names ``round{t:03d}-p``; a ``checkpoint.pruned``
names a checkpoint the run wrote before it, never the latest of its phase. Each event that names
another is refused by ingest and ``Round.note``; stored raw (as a writer past the checks could),
``memory verify`` names it by seq with the way back, and ``train --resume`` passes it over, naming
it in one line, and trains on from the checkpoint the valid events name: never from other
weights, never stopped for good. On the simulator (its checkpoints are real folders) and the real
SQLite log."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from diagevo import rounds as protocol
from diagevo.catalog import CheckpointPruned, CheckpointWritten, Event, RoundCommitted
from diagevo.interchange import IngestError, export_lines, ingest
from diagevo.log import open_log
from diagevo.memory.counting import CountBreak, breaks
from diagevo.schemas import new_event
from tests.input_cases import cli
from tests.logs import stored
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_hostile_logs import store_raw
from tests.test_train import SMALL

RESUMED = ": what a resume loads"


@dataclass(frozen=True)
class Trained:
    """Run ``t`` of the simulator, two rounds committed, its database and folder."""

    folder: Path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    folder = tmp_path_factory.mktemp("names")
    code, _, err = cli(
        "train", "--db", f"sqlite:///{folder / 'x.db'}", "--run", "t", "--rounds", "2", "--quiet", *SMALL
    )
    assert code == 0, err
    return Trained(folder)


@pytest.fixture
def db(trained: Trained, tmp_path: Path) -> str:
    """A copy of the trained run, with its round 3 open."""
    shutil.copy(trained.folder / "x.db", tmp_path / "x.db")
    shutil.copytree(trained.folder / "x.diagevo", tmp_path / "x.diagevo")
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with open_log(url) as s:
        protocol.Round.open(s, "t", 3)
    return url


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The checkpoints the simulator's backend loads in this process, in order."""
    from diagevo.train.sim.backend import SimBackend

    loaded: list[Path] = []
    real = SimBackend.load

    def load(self: SimBackend, path: Path) -> None:
        loaded.append(Path(path))
        real(self, path)

    monkeypatch.setattr(SimBackend, "load", load)
    return loaded


def held_to_the_rule(
    capsys: pytest.CaptureFixture[str], db: str, event: Event, reason: str, loads: list[Path] | None = None
) -> None:
    """``event`` in round 3 of run ``t`` is refused by ingest and ``Round.note`` naming
    ``reason``; stored raw, ``memory verify`` names its seq with the fork from round 2 that gets
    past it, and ``train --resume`` passes it over, naming it in one line, and trains round 3
    from round 2's solver checkpoint (``loads``: what it loaded)."""
    data = new_event(event, run="t", at_round=3, event_id="t/3/forged").data
    line = {"type": event.name, "run": "t", "round": 3, "event_id": "t/3/forged", "data": data}
    with open_log(db) as s:
        with pytest.raises(IngestError, match=r"^line 1: checkpoint (named by its event|pruned once written): ") as exc:
            ingest(s, json.dumps(line) + "\n")
        assert reason in str(exc.value)
        rnd = protocol.Round.open(s, "t", 3)
        with pytest.raises(protocol.ProtocolError, match=f"^{event.name} refused: ") as refused:
            rnd.note("forged", event)
        assert reason in str(refused.value)
        before = s.last_seq("t")
        s.append([rnd.event("forged", event)])  # a raw write: no rule checked
        seq = s.last_seq("t")
        assert seq == before + 1
    code, out, _ = run_cli(capsys, "memory", "verify", "--run", "t", "--db", db)
    assert code == 1
    said = " ".join(out.split())  # as wrapped to the terminal
    assert f"seq {seq}: " in said and reason in said and "fork it from round 2" in said, out
    code, _, err = run_cli(capsys, "train", "--run", "t", "--resume", "--rounds", "3", "--db", db, "--quiet", *SMALL)
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.strip()]
    assert len(notes) == 1 and notes[0].startswith(f"run 't', seq {seq}: passed over: checkpoint "), err
    assert reason in notes[0], err
    if loads is not None:
        assert [p.name for p in loads] == ["round002-solver"], loads
    with open_log(db) as s:
        assert [e.round for e in s.read("t", types=(RoundCommitted,))] == [1, 2, 3]


def test_a_checkpoint_that_does_not_exist_is_refused_and_passed_over(
    db: str, capsys: pytest.CaptureFixture[str], loads: list[Path]
) -> None:
    """A pruned checkpoint the run never wrote (the prune of one that is not there)."""
    gone = CheckpointPruned(path="round009-solver", phase="solver", written_round=9)
    held_to_the_rule(
        capsys, db, gone, "checkpoint.pruned names round009-solver, which the run never wrote before it", loads
    )


def test_a_checkpoint_written_under_a_round_that_does_not_exist_is_refused_and_passed_over(
    db: str, capsys: pytest.CaptureFixture[str], loads: list[Path]
) -> None:
    """A written checkpoint of round 3 whose name is no round's the run reached."""
    ahead = CheckpointWritten(path="round009-solver", **{"phase": "solver"})
    held_to_the_rule(capsys, db, ahead, "checkpoint.written of round 3 after solver names round009-solver", loads)


def test_a_forged_prune_of_the_current_checkpoint_is_refused_and_passed_over(
    db: str, capsys: pytest.CaptureFixture[str], loads: list[Path]
) -> None:
    """Pruned, round 2's solver checkpoint (what the resume of round 3 loads) would brick the run."""
    forged = CheckpointPruned(path="round002-solver", phase="solver", written_round=2)
    held_to_the_rule(
        capsys, db, forged, "checkpoint.pruned names round002-solver, the latest checkpoint of solver", loads
    )


def test_an_older_rounds_checkpoint_name_is_refused_and_passed_over(
    db: str, capsys: pytest.CaptureFixture[str], loads: list[Path]
) -> None:
    """``round001-solver`` written in round 3: a resume would train round 4 from round 1's weights."""
    older = CheckpointWritten(path="round001-solver", **{"phase": "solver"})
    held_to_the_rule(capsys, db, older, "names round001-solver, not round003-solver", loads)


def test_the_other_roles_checkpoint_name_is_refused_and_passed_over(
    db: str, capsys: pytest.CaptureFixture[str], loads: list[Path]
) -> None:
    """The solver's checkpoint of round 3 named as the challenger's (and a phase no loop has)."""
    with open_log(db) as s:
        rnd = protocol.Round.open(s, "t", 3)
        with pytest.raises(protocol.ProtocolError, match="names phase 'critic', not challenger or solver"):
            rnd.note("critic", CheckpointWritten(path="round003-critic", **{"phase": "critic"}))
    other = CheckpointWritten(path="round003-challenger", **{"phase": "solver"})
    held_to_the_rule(capsys, db, other, "names round003-challenger, not round003-solver", loads)


def test_a_resume_whose_checkpoint_folder_is_missing_is_refused_in_one_line(
    db: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.rmtree(tmp_path / "x.diagevo" / "runs" / "t" / "round002-solver")
    code, _, err = run_cli(capsys, "train", "--run", "t", "--resume", "--rounds", "3", "--db", db, "--quiet", *SMALL)
    assert_one_line_error(
        code,
        err,
        "cannot continue run 't' at round 3: checkpoint round002-solver is in none of ",
        "(checkpoint.written in round 2, seq ",
        "put it back (or give the command the folder it lies in), or its rounds through 1 are intact: fork it from "
        "round 1",
    )


def test_a_fork_names_a_checkpoint_named_against_the_rule_and_leaves_it_behind(
    tmp_path: Path, trained: Trained, loads: list[Path]
) -> None:
    """A fork copies the source up to its round but what its readers pass over: a checkpoint event
    that breaks the rule (stored raw) is named by the fork and left behind, and the fork trains on
    from the checkpoint the valid events name."""
    with open_log(f"sqlite:///{trained.folder / 'x.db'}") as s:
        lines = [json.loads(line) for line in export_lines(s, "t")]
    at = max(i for i, line in enumerate(lines) if line["type"] == "phase.completed" and line["round"] == 2)
    forged = {"type": "checkpoint.pruned", "run": "t", "round": 2, "event_id": "t/2/forged"}
    forged["data"] = {"path": "round002-solver", "phase": "solver", "written_round": 2, "bytes": 0}
    db = f"sqlite:///{tmp_path / 'f.db'}"
    store_raw(db, [*lines[: at + 1], forged, *lines[at + 1 :]])
    shutil.copytree(trained.folder / "x.diagevo", tmp_path / "f.diagevo")
    seq = lines[at]["seq"] + 1
    code, out, err = cli("memory", "fork", "--run", "t", "--round", "2", "--to", "u", "--db", db)
    assert code == 0, err
    said = " ".join(err.split())
    assert f"run 't', seq {seq}: passed over: checkpoint pruned once written: " in said, err
    assert "the latest checkpoint of solver" in said, err
    code, _, err = cli("train", "--run", "u", "--resume", "--rounds", "3", "--db", db, "--quiet", *SMALL)
    # the fork holds no such row; the resume reads the source's checkpoints, whose refusal it names
    assert code == 0 and "run 'u'" not in err and f"run 't', seq {seq}: passed over" in err, err
    code, out, _ = cli("memory", "verify", "--run", "u", "--db", db)
    assert code == 0, out
    assert [p.name for p in loads] == ["round002-solver"] and loads[0].parent.name == "t", loads  # the source's


def test_the_rule_on_hand_written_rows() -> None:
    """What the loop writes holds (an older log's absolute path read by its name); each other
    name, a checkpoint of a round not open and a size that is no count of bytes break the rule,
    named by seq. An event that breaks it counts for nothing after it."""
    ckpt = "checkpoint.written"
    rows = [
        (1, 1, "round.started", {}),
        (2, 1, ckpt, {"path": "/old/place/round001-challenger", "phase": "challenger"}),
        (3, 1, ckpt, {"path": "round001-solver", "phase": "solver"}),
        (4, 1, "round.committed", {}),
        (5, 2, "round.started", {}),
        (6, 2, ckpt, {"path": "round002-challenger", "phase": "challenger"}),
        (7, 2, "checkpoint.pruned", {"path": "/old/place/round001-challenger", "phase": "challenger"}),
        (8, 2, ckpt, {"path": "round002-solver", "phase": "solver"}),
        (9, 2, "checkpoint.pruned", {"path": "round001-solver", "phase": "solver"}),
        (10, 2, "round.committed", {}),
        (11, 3, "round.started", {}),
        (12, 3, ckpt, {"path": "round002-challenger", "phase": "challenger"}),  # an older round's
        (13, 3, ckpt, {"path": "round003-solver", "phase": "challenger"}),  # the other role's
        (14, 3, ckpt, {"path": "round003-solver"}),  # no phase
        (15, 3, "checkpoint.pruned", {"path": "round007-solver"}),  # never written
        (16, 3, "checkpoint.pruned", {"path": "../round002-solver"}),  # no checkpoint name
        (17, 3, "checkpoint.pruned", {"path": "round002-solver"}),  # the latest of its phase
        (18, 4, ckpt, {"path": "round004-solver", "phase": "solver"}),  # a round not started
        (19, 2, ckpt, {"path": "round002-solver", "phase": "solver"}),  # a round committed
        (20, 3, ckpt, {"path": "round003-foo", "phase": "foo"}),  # a phase no loop has
        (21, 3, ckpt, {"path": "round003-solver", "phase": "solver", "bytes": 1e300}),  # no count of bytes
        (22, 3, "checkpoint.pruned", {"path": "round003-solver", "phase": "solver"}),  # never written (21 broke)
        (23, 3, "checkpoint.pruned", {"path": "round002-solver", "phase": "solver", "bytes": -1}),
    ]
    named, pruned, opened = (
        "checkpoint named by its event",
        "checkpoint pruned once written",
        "checkpoint of an open round",
    )
    after = "checkpoint.written of round 3 after challenger names"
    never = "which the run never wrote before it"
    not_open = "is not open (started, not committed)"
    size = "checkpoint size a count of bytes"
    assert list(breaks([stored(*r) for r in rows])) == [
        CountBreak(12, named, f"{after} round002-challenger, not round003-challenger"),
        CountBreak(13, named, f"{after} round003-solver, not round003-challenger"),
        CountBreak(14, named, "checkpoint.written of round 3 names phase None, not challenger or solver"),
        CountBreak(15, pruned, f"checkpoint.pruned names round007-solver, {never}"),
        CountBreak(16, pruned, f"checkpoint.pruned names '../round002-solver', {never}"),
        CountBreak(
            17, pruned, "checkpoint.pruned names round002-solver, the latest checkpoint of solver: what a resume loads"
        ),
        CountBreak(18, opened, f"checkpoint.written of round 4 names round004-solver, but round 4 {not_open}"),
        CountBreak(19, opened, f"checkpoint.written of round 2 names round002-solver, but round 2 {not_open}"),
        CountBreak(20, named, "checkpoint.written of round 3 names phase 'foo', not challenger or solver"),
        CountBreak(21, size, "checkpoint.written of round 3 holds bytes 1e+300, not a whole number from 0 to 2^63-1"),
        CountBreak(22, pruned, f"checkpoint.pruned names round003-solver, {never}"),
        CountBreak(23, size, "checkpoint.pruned of round 3 holds bytes -1, not a whole number from 0 to 2^63-1"),
    ]
