"""Paths from the log are never trusted: a checkpoint is stored by its name in the run's folder
(``roundNNN-phase``), a resume reads it only there (or in the fork source's folder), never through a
link, and anything else is refused by name, in ingest and in ``Round.note`` alike (a raw row holding
one is passed over by the resume, named). On the simulator and the real SQLite log."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from diagevo import rounds as protocol
from diagevo.catalog import CheckpointWritten
from diagevo.files.confined import checkpoint_name
from diagevo.interchange import IngestError, export_lines, ingest
from diagevo.log import open_log
from diagevo.views.checkpoints import checkpoint_path
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_hostile_logs import store_raw
from tests.test_train import SMALL


def _train(capsys: pytest.CaptureFixture[str], db: str, run: str, rounds: int, *more: str) -> tuple[int, str, str]:
    return run_cli(capsys, "train", "--db", db, "--run", run, "--rounds", str(rounds), "--quiet", *SMALL, *more)


def _paths(db: str, run: str) -> list[str]:
    with open_log(db) as s:
        return [e.event.path for e in s.read(run, types=(CheckpointWritten,))]


def test_checkpoint_paths_are_stored_relative_to_the_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert _train(capsys, db, "t", 1)[0] == 0
    assert _paths(db, "t") == ["round001-challenger", "round001-solver"]
    with open_log(db) as s:
        assert checkpoint_path(s, "t", "round001-solver") == tmp_path / "x.diagevo" / "runs" / "t" / "round001-solver"


def test_a_log_moved_with_its_folder_resumes_from_its_own_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The strace case: a log ingested (or moved) elsewhere pointed into someone else's folder."""
    first, moved = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    assert _train(capsys, f"sqlite:///{first / 'x.db'}", "t", 1)[0] == 0
    shutil.copytree(first, moved)
    shutil.rmtree(first)  # nothing left where it was written
    code, _, err = _train(capsys, f"sqlite:///{moved / 'x.db'}", "t", 2, "--resume")
    assert code == 0, err
    assert _paths(f"sqlite:///{moved / 'x.db'}", "t")[-1] == "round002-solver"
    assert not first.exists()


def test_a_bogus_checkpoint_path_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert _train(capsys, db, "t", 1)[0] == 0
    for bogus in ("/etc/passwd", "../other/round001-solver", "round001-solver/../../x", "sub/round001-solver"):
        assert checkpoint_name(bogus) is None
        line = {
            "type": "checkpoint.written",
            "run": "t",
            "round": 1,
            "event_id": f"t/1/bogus/{bogus}",
            "data": {"path": bogus, "phase": "solver"},
        }
        with open_log(db) as s, pytest.raises(IngestError, match=r"^line 1: checkpoint.written: data.path: checkpoint"):
            ingest(s, json.dumps(line) + "\n")
    with open_log(db) as s:
        rnd = protocol.Round.open(s, "t", 2)
        with pytest.raises(protocol.ProtocolError, match="'/tmp/round001-solver' is absolute"):
            rnd.note("ckpt", CheckpointWritten(path="/tmp/round001-solver"))
        s.append([rnd.event("raw", CheckpointWritten.model_construct(path="../../etc"))])  # a raw write
        seq = s.last_seq("t")
    code, _, err = _train(capsys, db, "t", 2, "--resume")  # passed over, named: round 2 goes on from round 1's
    assert code == 0, err
    (note,) = [line for line in err.splitlines() if line.strip()]
    assert note.startswith(f"run 't', seq {seq}: passed over: checkpoint named by its event: "), note
    assert "checkpoint path '../../etc' is not a checkpoint name of the run's folder" in note


def test_a_link_in_place_of_a_checkpoint_is_never_followed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert _train(capsys, db, "t", 1)[0] == 0
    own = tmp_path / "x.diagevo" / "runs" / "t"
    elsewhere = tmp_path / "elsewhere"
    shutil.move(own / "round001-solver", elsewhere)
    os.symlink(elsewhere, own / "round001-solver")
    code, _, err = _train(capsys, db, "t", 2, "--resume")
    assert_one_line_error(code, err, "round001-solver is a symbolic link")


def test_an_absolute_path_of_an_older_log_is_read_by_its_name_in_the_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert _train(capsys, db, "t", 1)[0] == 0
    trap = tmp_path / "someone-else" / "round001-solver"
    trap.mkdir(parents=True)
    (trap / "sim_backend.json").write_text("not a checkpoint")  # loaded, the resume would fail
    with open_log(db) as s:  # round 1's solver checkpoint as an older log named it: by its absolute path
        lines = [json.loads(line) for line in export_lines(s, "t")]
    for line in lines:
        if line["type"] == "checkpoint.written" and line["data"]["path"] == "round001-solver":
            line["data"]["path"] = str(trap)
    older = f"sqlite:///{tmp_path / 'older.db'}"
    store_raw(older, lines)
    shutil.copytree(tmp_path / "x.diagevo", tmp_path / "older.diagevo")
    with open_log(older) as s:
        assert checkpoint_path(s, "t", str(trap)) == tmp_path / "older.diagevo" / "runs" / "t" / "round001-solver"
    code, _, err = _train(capsys, older, "t", 2, "--resume")
    assert code == 0 and "passed over" not in err, err


def test_a_fork_reads_its_copied_rounds_checkpoints_in_its_source_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert _train(capsys, db, "a", 1)[0] == 0
    code, _, err = run_cli(capsys, "memory", "fork", "--run", "a", "--round", "1", "--to", "b", "--db", db)
    assert code == 0, err
    with open_log(db) as s:
        assert checkpoint_path(s, "b", "round001-solver") == tmp_path / "x.diagevo" / "runs" / "a" / "round001-solver"
    code, _, err = run_cli(capsys, "train", "--run", "b", "--resume", "--rounds", "2", "--db", db, "--quiet")
    assert code == 0, err
    assert _paths(db, "b")[-1] == "round002-solver"
    assert (tmp_path / "x.diagevo" / "runs" / "b" / "round002-solver").is_dir()
