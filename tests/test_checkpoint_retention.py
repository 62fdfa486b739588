"""``train.keep_checkpoints``: older checkpoints are deleted, each deletion logged as
``checkpoint.pruned``; the ones a fork needs are kept; a fork, a resume or an eval that needs a
pruned checkpoint is refused naming the event. On the simulator (its checkpoints are real files,
a few kB each) and the real SQLite log: the simulator's states are never pruned (a run forks at
any of its rounds), so the retention tests treat them as model checkpoints (``as_models``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagevo.catalog import CheckpointPruned, CheckpointWritten
from diagevo.log import open_log
from diagevo.train.sim.backend import SimBackend
from diagevo.views.checkpoints import checkpoint_folders, runs_root
from tests.test_cli_memory import run_cli
from tests.test_train import small_args


def written(db: str, run: str, root: Path | None = None) -> list[tuple[int, str, Path]]:
    """(round, phase, where) of each checkpoint the log names: in the run's folder under ``root``
    (the trainer's ``train.out_dir``; None: the database's folder), or in its fork source's where
    that holds it (where the first was, once pruned)."""
    with open_log(db) as s:
        folders = checkpoint_folders(s, run, runs_root(s, root))
        out = []
        for e in s.read(run, types=(CheckpointWritten,)):
            name = e.event.path
            where = next((f / name for f in folders if (f / name).exists()), folders[0] / name)
            out.append((e.round, e.event.phase, where))
        return out


def pruned(db: str, run: str) -> list[tuple[int, int, str]]:
    with open_log(db) as s:
        return [(e.round, e.event.written_round, e.event.phase) for e in s.read(run, types=(CheckpointPruned,))]


@pytest.fixture
def as_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's checkpoints taken for model checkpoints: retention applies to them."""
    monkeypatch.setattr(SimBackend, "checkpoints_are_models", True)


def test_the_simulators_states_are_kept_and_a_run_forks_at_any_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46, item 7: ``train --rounds 3`` with the default retention, then a fork at round 1."""
    db = f"sqlite:///{tmp_path / 'e.db'}"
    code, _, err = run_cli(capsys, *small_args(db, "a", 3, tmp_path), "--set", "train.keep_checkpoints=1")
    assert code == 0, err
    assert pruned(db, "a") == [] and all(p.exists() for _, _, p in written(db, "a", tmp_path / "ckpt"))
    code, _, err = run_cli(capsys, "memory", "fork", "--run", "a", "--round", "1", "--to", "b", "--db", db)
    assert code == 0, err
    again = ["train", "--run", "b", "--resume", "--rounds", "2", "--db", db, "--quiet"]
    code, _, err = run_cli(capsys, *again, "--out-dir", str(tmp_path / "ckpt"))
    assert code == 0, err


@pytest.mark.usefixtures("as_models")
def test_keep_one_prunes_the_older_and_logs_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'k.db'}"
    args = [*small_args(db, "k", 3, tmp_path), "--set", "train.keep_checkpoints=1"]
    code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    ckpts = written(db, "k", tmp_path / "ckpt")
    assert len(ckpts) == 6  # after each round's challenger and solver
    on_disk = {(t, phase) for t, phase, p in ckpts if p.exists()}
    assert on_disk == {(3, "challenger"), (3, "solver")}
    # each deletion logged in the round that wrote its successor
    assert pruned(db, "k") == [(2, 1, "challenger"), (2, 1, "solver"), (3, 2, "challenger"), (3, 2, "solver")]
    code, out, err = run_cli(capsys, "memory", "stats", "--db", db, "--run", "k", "--json")
    rows = json.loads(out)["rounds"]
    assert [r["disk_mb"] > 0 for r in rows] == [False, False, True]
    assert all(r["ckpt_mb"] > 0 for r in rows)
    held = sum(p.stat().st_size for p in (tmp_path / "ckpt").rglob("*") if p.is_file())
    assert rows[2]["disk_mb"] == pytest.approx(held / 1e6)  # what is on disk is round 3's
    code, out, _ = run_cli(capsys, "memory", "stats", "--db", db, "--run", "k", "--wide")
    assert "disk MB" in out and "ckpt MB" in out
    # a fork at round 1 would start from round 1's solver checkpoint: gone, and the refusal says so
    code, _, err = run_cli(capsys, "memory", "fork", "--run", "k", "--round", "1", "--to", "f", "--db", db)
    assert code == 1 and err.count("\n") == 1, err
    assert "checkpoint.pruned in round 2" in err and "round001-solver" in err
    with open_log(db) as s:
        assert not s.has_run("f")


@pytest.mark.usefixtures("as_models")
def test_keep_zero_keeps_all_and_a_fork_keeps_its_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'a.db'}"
    assert run_cli(capsys, *small_args(db, "a", 3, tmp_path), "--set", "train.keep_checkpoints=0")[0] == 0
    assert all(p.exists() for _, _, p in written(db, "a", tmp_path / "ckpt")) and pruned(db, "a") == []
    # a run forked at round 1 still needs the source's round-1 checkpoints: they stay
    db2, here = f"sqlite:///{tmp_path / 'b.db'}", ["--out-dir", str(tmp_path / "b" / "ckpt")]
    assert run_cli(capsys, *small_args(db2, "b", 1, tmp_path / "b"), "--set", "train.keep_checkpoints=1")[0] == 0
    assert run_cli(capsys, "memory", "fork", "--run", "b", "--round", "1", "--to", "b1", "--db", db2)[0] == 0
    code, _, err = run_cli(capsys, "train", "--run", "b", "--resume", "--rounds", "3", "--db", db2, "--quiet", *here)
    assert code == 0, err
    kept = {(t, phase) for t, phase, p in written(db2, "b", tmp_path / "b" / "ckpt") if p.exists()}
    assert kept == {(1, "challenger"), (1, "solver"), (3, "challenger"), (3, "solver")}
    assert [(w, phase) for _, w, phase in pruned(db2, "b")] == [(2, "challenger"), (2, "solver")]
    code, _, err = run_cli(capsys, "train", "--run", "b1", "--resume", "--rounds", "2", "--db", db2, "--quiet", *here)
    assert code == 0, err  # the fork starts from the kept round-1 checkpoint


@pytest.mark.slow
def test_a_tiny_hf_run_keeping_one_checkpoint(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three rounds of real models with ``keep_checkpoints = 1``: the disk holds one round's two
    checkpoints, the log says which were pruned, and ``eval --run`` of a pruned round is refused."""
    pytest.importorskip("trl")
    from tests.hf_fixtures import tiny_pair

    tiny = tiny_pair(request.config)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    models = [
        f"challenger.model={json.dumps(str(tiny / 'challenger'))}",
        f"solver.model={json.dumps(str(tiny / 'solver'))}",
    ]
    args = ["train", "--config", str(Path(__file__).parent.parent / "configs" / "tiny-hf.toml"), "--db", db]
    args += ["--run", "h", "--rounds", "3", "--quiet", "--set", "train.keep_checkpoints=1"]
    code, _, err = run_cli(capsys, *args, *[x for m in models for x in ("--set", m)])
    assert code == 0, err
    ckpts = written(db, "h")
    assert {(t, phase) for t, phase, p in ckpts if p.exists()} == {(3, "challenger"), (3, "solver")}
    assert [(w, phase) for _, w, phase in pruned(db, "h")] == [
        (1, "challenger"),
        (1, "solver"),
        (2, "challenger"),
        (2, "solver"),
    ]
    held = sum(p.stat().st_size for p in (tmp_path / "h.diagevo" / "runs").rglob("*") if p.is_file())
    with open_log(db) as s:
        sizes = {e.event.path: e.event.bytes for e in s.read("h", types=(CheckpointWritten,))}
    assert held == sum(sizes[p.name] for _, _, p in ckpts if p.exists())  # the log's sizes are the disk's
    assert sum(sizes.values()) > 2.5 * held  # three rounds written, one kept
    bench = tmp_path / "b.jsonl"
    bench.write_text('{"question": "What is 1 + 1?", "answer": "2"}\n', encoding="utf-8")
    code, _, err = run_cli(capsys, "eval", "--run", "h", "--rounds", "1", "--bench", f"gsm8k={bench}", "--db", db)
    assert code == 1 and err.count("\n") == 1 and "checkpoint.pruned in round 2" in err, err
