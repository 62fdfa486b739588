"""Nothing outside the database's folder is ever written or deleted (issue 47, item 2).

A symbolic link planted below ``x.diagevo/`` (the run folder, a checkpoint, ``tb/``) is refused
before anything is written, and a prune deletes only a checkpoint the run's log recorded inside
the run's own folder. A file or FIFO where a folder or a file belongs (``runs/``,
``index.lance``, the lease file, the database itself) is refused up front in one line: no event
is written, nothing hangs. On the simulator and the real SQLite log."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from diagevo import rounds as protocol
from diagevo.catalog import CheckpointWritten
from diagevo.files.confined import OutsideFolder, owned_dir, remove_owned
from diagevo.log import open_log
from diagevo.schemas import new_event
from tests.test_checkpoint_retention import as_models  # noqa: F401 - a fixture
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_train import SMALL


def _train(capsys: pytest.CaptureFixture[str], db: str, run: str, rounds: int, *more: str) -> tuple[int, str, str]:
    return run_cli(capsys, "train", "--db", db, "--run", run, "--rounds", str(rounds), "--quiet", *SMALL, *more)


def _events(db: Path) -> int:
    if not db.exists():
        return 0
    with open_log(f"sqlite:///{db}") as s:
        return sum(s.count(r) for r in s.runs())


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A user's folder elsewhere, with a file diagevo must never touch."""
    v = tmp_path / "v"
    (v / "round001-solver").mkdir(parents=True)
    (v / "round001-solver" / "mine.txt").write_text("a user's file")
    (v / "user.txt").write_text("precious")
    return v


def _untouched(v: Path) -> None:
    assert sorted(str(p.relative_to(v)) for p in v.rglob("*")) == [
        "round001-solver",
        "round001-solver/mine.txt",
        "user.txt",
    ]
    assert (v / "user.txt").read_text() == "precious"


def test_the_issues_planted_run_folder_is_refused_and_the_users_files_stay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, victim: Path
) -> None:
    """``y.diagevo/runs/t`` a link to ``v/``: ``train --run t --rounds 2 --set train.keep_checkpoints=1``
    wrote its checkpoints into ``v/`` and pruning deleted ``v/round001-solver``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "y.diagevo" / "runs").mkdir(parents=True)
    os.symlink(victim, tmp_path / "y.diagevo" / "runs" / "t")
    code, _, err = _train(capsys, "sqlite:///y.db", "t", 2, "--set", "train.keep_checkpoints=1")
    assert_one_line_error(code, err, "y.diagevo/runs/t is a symbolic link")
    _untouched(victim)
    assert _events(tmp_path / "y.db") == 0


@pytest.mark.parametrize("planted", ["runs/t/round002-solver", "runs/t/round001-solver/inner"])
def test_a_link_planted_below_the_run_folder_is_refused_before_the_round_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], victim: Path, planted: str
) -> None:
    db = tmp_path / "x.db"
    assert _train(capsys, f"sqlite:///{db}", "t", 1, "--set", "train.keep_checkpoints=1")[0] == 0
    before = _events(db)
    os.symlink(victim, tmp_path / "x.diagevo" / planted)
    code, _, err = run_cli(
        capsys, "train", "--db", f"sqlite:///{db}", "--run", "t", "--resume", "--rounds", "2", "--quiet"
    )
    assert_one_line_error(code, err, f"{planted} is a symbolic link")
    _untouched(victim)
    assert _events(db) == before


@pytest.mark.usefixtures("as_models")
def test_a_prune_deletes_only_what_the_run_wrote_in_its_own_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], victim: Path
) -> None:
    """A ``checkpoint.written`` naming a folder outside the run's (an absolute path, as a log
    written before paths were stored relative holds, appended raw by another writer) is read by
    its name in the run's own folder, never there, and never pruned; the run's own old
    checkpoints are. A link in the run's folder is refused up front."""
    db = tmp_path / "x.db"
    url = f"sqlite:///{db}"
    assert _train(capsys, url, "t", 1, "--set", "train.keep_checkpoints=1")[0] == 0
    own = tmp_path / "x.diagevo" / "runs" / "t"
    shutil.copy(own / "round001-challenger" / "sim_backend.json", victim / "round001-solver")
    with open_log(url) as s:
        rnd = protocol.Round.open(s, "t", 2)
        forged = {"path": str(victim / "round001-solver"), "phase": "solver", "bytes": 1}
        with pytest.raises(protocol.ProtocolError, match="is absolute: a checkpoint is noted by its name"):
            rnd.notes([rnd.event("forged", CheckpointWritten(**forged))])
        s.append([new_event(CheckpointWritten(**forged), run="t", at_round=1, event_id="t/1/forged")])  # as round 1's
    os.symlink(victim, own / "round000-solver")
    code, _, err = run_cli(capsys, "train", "--db", url, "--run", "t", "--resume", "--rounds", "3", "--quiet")
    assert_one_line_error(code, err, "runs/t/round000-solver is a symbolic link")  # refused up front
    os.unlink(own / "round000-solver")
    code, _, err = run_cli(capsys, "train", "--db", url, "--run", "t", "--resume", "--rounds", "3", "--quiet")
    assert code == 0, err
    assert (victim / "round001-solver" / "sim_backend.json").is_file() and (victim / "user.txt").is_file()
    assert sorted(p.name for p in own.iterdir()) == ["round003-challenger", "round003-solver"]


def test_remove_owned_deletes_a_folder_directly_inside_and_nothing_else(tmp_path: Path, victim: Path) -> None:
    top = owned_dir(tmp_path, "runs", "t")
    (top / "round001-solver").mkdir()
    os.symlink(victim, top / "round002-solver")
    assert remove_owned(top, top / "round001-solver") and not (top / "round001-solver").exists()
    for outside in (victim / "round001-solver", top / "round002-solver", top.parent / "u", top / "a" / "b", top):
        with pytest.raises(OutsideFolder):
            remove_owned(top, outside)
    _untouched(victim)
    os.symlink(victim, tmp_path / "runs" / "u")
    with pytest.raises(OutsideFolder, match="runs/u is a symbolic link"):
        owned_dir(tmp_path, "runs", "u", "round001-solver")
    _untouched(victim)


@pytest.mark.parametrize(
    ("part", "kind"),
    [("runs", "a file"), ("index.lance", "a file"), ("runs", "a FIFO"), ("leases", "a file"), ("tb", "a file")],
)
def test_a_file_or_fifo_where_a_folder_belongs_is_refused_before_any_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], part: str, kind: str
) -> None:
    (tmp_path / "x.diagevo").mkdir()
    where = tmp_path / "x.diagevo" / part
    if kind == "a FIFO":
        os.mkfifo(where)
    else:
        where.write_text("not a folder")
    more = ["--set", 'train.report_to="tensorboard"'] if part == "tb" else []
    code, _, err = _train(capsys, f"sqlite:///{tmp_path / 'x.db'}", "r", 1, *more)
    assert_one_line_error(code, err, f"x.diagevo/{part} is {kind}, not a folder")
    assert _events(tmp_path / "x.db") == 0


def test_a_link_as_the_tensorboard_run_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], victim: Path
) -> None:
    (tmp_path / "x.diagevo" / "tb").mkdir(parents=True)
    os.symlink(victim, tmp_path / "x.diagevo" / "tb" / "r")
    code, _, err = _train(capsys, f"sqlite:///{tmp_path / 'x.db'}", "r", 1, "--set", 'train.report_to="tensorboard"')
    assert_one_line_error(code, err, "x.diagevo/tb/r is a symbolic link")
    _untouched(victim)


def test_a_fifo_as_the_lease_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "x.db"
    assert _train(capsys, f"sqlite:///{db}", "r", 1)[0] == 0
    (lease,) = (tmp_path / "x.diagevo" / "leases").iterdir()
    lease.unlink()
    os.mkfifo(lease)
    before = _events(db)
    code, _, err = run_cli(
        capsys, "train", "--db", f"sqlite:///{db}", "--run", "r", "--resume", "--rounds", "2", "--quiet"
    )
    assert_one_line_error(code, err, f"{lease.name} is not a regular file")
    assert _events(db) == before


@pytest.mark.parametrize("name", ["fifo.db", "fifo.db-wal"])
def test_a_fifo_as_the_database_is_one_line_and_never_hangs(tmp_path: Path, name: str) -> None:
    if name != "fifo.db":
        with open_log(f"sqlite:///{tmp_path / 'fifo.db'}") as s:
            s.append([])
        (tmp_path / name).unlink(missing_ok=True)
    os.mkfifo(tmp_path / name)
    for args in (["memory", "stats"], ["runs"], ["train", "--run", "r", "--rounds", "1"]):
        done = subprocess.run(
            [sys.executable, "-m", "diagevo.cli.app", *args, "--db", "sqlite:///fifo.db"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,  # a hang fails here instead of stalling the suite
        )
        assert_one_line_error(done.returncode, done.stderr, f"{name} is not a regular file")
