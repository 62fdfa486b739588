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

from diagevo import curriculum as cur  # noqa: E402
from tests.dist_rewards import P1, SHARDS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``accelerate launch`` of two processes on this CPU. ``--cpu`` alone starts one process
    here (accelerate's multi-CPU launcher is mpirun); ``--multi_gpu`` starts two through torchrun,
    as on GPUs, and ``ACCELERATE_USE_CPU`` puts them on the CPU with gloo."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_ip", "127.0.0.1", "--main_process_port", str(free_port())]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([*cmd, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_challenger_penalty_is_computed_over_the_global_batch(tmp_path: Path) -> None:
    done = launch([str(ROOT / "tests" / "dist_rewards.py"), str(tmp_path)], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [g["size"] for g in got] == [2, 2]
    everything = [q for shard in SHARDS for q in shard]
    expected = cur.challenger_rewards(list(everything), [P1] * len(everything))
    assert got[0]["rewards"] + got[1]["rewards"] == expected
    # the question both shards hold is penalised only when the batch is global
    per_shard = [cur.challenger_rewards(list(s), [P1] * len(s)) for s in SHARDS]
    assert per_shard[0] + per_shard[1] != expected
