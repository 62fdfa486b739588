"""The hf backend on two real processes (``accelerate launch --cpu``, gloo): the challenger
reward over the global batch, and one tiny round led by rank 0."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")

from diagevo.catalog import (
    PhaseCompleted,  # noqa: E402
    of_type,  # noqa: E402
)
from diagevo.curriculum.reward import challenger_rewards  # noqa: E402
from tests.dist_rewards import P1, SHARDS  # noqa: E402
from tests.logs import phase_figures  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``accelerate launch`` of two processes on this CPU. ``--cpu`` alone starts one process
    here (accelerate's multi-CPU launcher is mpirun); ``--multi_gpu`` starts two through torchrun,
    as on GPUs, and ``ACCELERATE_USE_CPU`` puts them on the CPU with gloo."""
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_ip",
        "127.0.0.1",
        "--main_process_port",
        str(free_port()),
    ]
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "ACCELERATE_USE_CPU": "true",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "PYTHONFAULTHANDLER": "1",  # a rank killed by a signal (an abort in C++) prints where each thread was
    }
    return subprocess.run([*cmd, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def why(done: subprocess.CompletedProcess[str]) -> str:
    """What a failed launch said: the end of its output (how far rank 0 got: a round's table is
    printed once the round is committed) and of its errors (each rank's traceback, or where each
    thread of a rank a signal killed stood)."""
    return f"stdout: ...{done.stdout[-1000:]}\nstderr: ...{done.stderr[-6000:]}"


@pytest.mark.slow
def test_the_challenger_penalty_is_computed_over_the_global_batch(tmp_path: Path) -> None:
    done = launch([str(ROOT / "tests" / "dist_rewards.py"), str(tmp_path)], timeout=120)
    assert done.returncode == 0, why(done)
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [g["size"] for g in got] == [2, 2]
    everything = [q for shard in SHARDS for q in shard]
    expected = challenger_rewards(list(everything), [P1] * len(everything))
    assert got[0]["rewards"] + got[1]["rewards"] == expected
    # the question both shards hold is penalised only when the batch is global
    per_shard = [challenger_rewards(list(s), [P1] * len(s)) for s in SHARDS]
    assert per_shard[0] + per_shard[1] != expected


@pytest.mark.slow
def test_a_tiny_round_on_two_processes_is_led_by_rank_0(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from diagevo.log import open_log
    from tests.hf_fixtures import tiny_pair

    tiny = tiny_pair(request.config)
    db = tmp_path / "x.db"
    done = launch(
        [
            "-m",
            "diagevo.cli.app",
            "train",
            "--config",
            "configs/tiny-hf.toml",
            "--db",
            f"sqlite:///{db}",
            "--run",
            "r",
            "--quiet",
            "--set",
            f"solver.model={json.dumps(str(tiny / 'solver'))}",
            "--set",
            f"challenger.model={json.dumps(str(tiny / 'challenger'))}",
            "--set",
            f"train.out_dir={json.dumps(str(tmp_path / 'ckpt'))}",
            "--set",
            "train.challenger_questions=2",
            "--set",
            "train.curriculum_questions=4",
            "--set",
            "solver.max_steps=1",
            "--set",
            "grpo.construction_responses=4",
        ],
        timeout=400,
    )
    assert done.returncode == 0, why(done)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt",
        "x.db",
        "x.diagevo",
    ]  # one log, and one folder with its vector index and its writer lease
    assert done.stdout.count("log: sqlite") == 1  # one rank reports
    store = open_log(f"sqlite:///{db}")
    try:
        events = list(store.read("r"))
    finally:
        store.close()
    ids = [e.event_id for e in events]
    assert len(ids) == len(set(ids))
    assert sum(e.type == "run.started" for e in events) == 1
    assert sum(e.type == "round.committed" for e in events) == 1
    phases = [{"phase": p.phase, **phase_figures(p)} for p in of_type(PhaseCompleted, events)]
    assert sorted(p["phase"] for p in phases) == ["challenger", "construct", "diagnose", "solver"]
    trained = {p["phase"]: p for p in phases if p["phase"] in ("challenger", "solver")}
    assert all(p["processes"] == 2 and p["steps"] >= 1 and "reward" in p for p in trained.values())
    ckpts = [e.event.path for e in events if e.type == "checkpoint.written"]
    assert len(ckpts) == 2 == len(set(ckpts))
    assert sorted(p.name for p in (tmp_path / "ckpt").rglob("round*") if p.is_dir()) == sorted(
        Path(c).name for c in ckpts
    )
    assert sum(e.type == "failure.recorded" for e in events) > 0

    # round 2, resumed: every rank reloads round 1's checkpoint; the run's stored config holds (the
    # command line's models/tiny does not exist: a rank built from it would fail)
    again = launch(
        [
            "-m",
            "diagevo.cli.app",
            "train",
            "--config",
            "configs/tiny-hf.toml",
            "--db",
            f"sqlite:///{db}",
            "--run",
            "r",
            "--quiet",
            "--resume",
            "--rounds",
            "2",
            "--out-dir",  # where round 1's checkpoints lie: the command says, never the log
            str(tmp_path / "ckpt"),
        ],
        timeout=400,
    )
    assert again.returncode == 0, why(again)
    store = open_log(f"sqlite:///{db}")
    try:
        second = list(store.read("r", in_round=2))
    finally:
        store.close()
    assert sum(e.type == "round.committed" for e in second) == 1
    assert sum(e.type == "checkpoint.written" for e in second) == 2
    done = [phase_figures(p) for p in of_type(PhaseCompleted, second)]
    assert all(s["processes"] == 2 for s in done if "processes" in s)
    assert sum(e.type == "question.generated" for e in second) <= 4  # train.curriculum_questions of the run


def test_only_the_hf_backend_runs_on_several_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    from diagevo.train.config import load_config
    from diagevo.train.hf.distributed import for_this_rank, with_processes

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="backend 'sim' runs in one process: start it without accelerate launch"):
        for_this_rank(load_config(ROOT / "configs" / "sim.toml"))
    assert with_processes(load_config(ROOT / "configs" / "tiny-hf.toml")).hf.num_processes == 2
    monkeypatch.setenv("WORLD_SIZE", "1")
    cfg = load_config(ROOT / "configs" / "sim.toml")
    assert for_this_rank(cfg) == (cfg, True)


def test_followers_run_the_phases_rank_0_announces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0's backend, made to lead, announces each collective phase; a follower runs it with a
    copy of rank 0's random stream as the phase started, and computes no reward."""
    import random
    from types import SimpleNamespace

    from diagevo.train.config import load_config
    from diagevo.train.hf import distributed

    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = load_config(ROOT / "configs" / "tiny-hf.toml")
    leader = distributed.lead(SimpleNamespace(config=cfg, leading=False))
    assert leader.leading and leader.config.hf.num_processes == 2
    rng = random.Random(7)
    script = [
        distributed.Command("train_solver", leader.config, questions=("q",), group_size=4, rng=rng),
        distributed.Command(distributed.STOP),
    ]
    monkeypatch.setattr(distributed, "broadcast", lambda _: script.pop(0))
    ran: list[tuple[list[str], int, float]] = []

    class Follower:
        config = leader.config

        def train_solver(self, questions: list[str], reward_fn: object, group_size: int, r: random.Random) -> None:
            ran.append((questions, group_size, r.random()))
            with pytest.raises(RuntimeError, match="a follower computes no rewards"):
                reward_fn(0, ["x"])  # type: ignore[operator]

    assert distributed.follow(lambda _: Follower()) == 1
    assert ran == [(["q"], 4, random.Random(7).random())]
