"""The hf backend on two processes against one: seconds per GRPO phase of the same tiny-hf round,
started as ``diagevo train`` in one process (the baseline, measured in the same run) and under
``accelerate launch`` with two CPU processes (rank 0 leads; rewards gathered to it and scattered
back every step). Two processes share a step's prompts, so on idle cores a phase should take less
time; the gloo collectives and the second model copy are the cost.

Needs a tiny pair: ``diagevo models tiny --out models/tiny``.
Run: ``.venv/bin/python benchmarks/bench_processes.py [--tiny models/tiny]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diagevo.catalog import PhaseCompleted, of_type
from diagevo.log import open_log

SIZES = ["train.challenger_questions=4", "train.curriculum_questions=8", "grpo.construction_responses=4"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_round(tiny: Path, tmp: Path, processes: int) -> tuple[float, dict[str, float]]:
    db = tmp / f"p{processes}.db"
    args = [
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
        f"train.out_dir={json.dumps(str(tmp / f'ckpt{processes}'))}",
    ]
    for s in SIZES:
        args += ["--set", s]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    if processes > 1:
        env["ACCELERATE_USE_CPU"] = "true"
        args = [
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_processes",
            str(processes),
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
            *args,
        ]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{processes} process(es) failed: {done.stderr.strip().splitlines()[-1]}")
    store = open_log(f"sqlite:///{db}")
    try:
        phases = {
            p.phase: float(p.seconds or 0) for p in of_type(PhaseCompleted, store.read("r", types=(PhaseCompleted,)))
        }
    finally:
        store.close()
    return wall, phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", type=Path, default=ROOT / "models" / "tiny")
    args = parser.parse_args()
    if not (args.tiny / "solver" / "config.json").is_file():
        sys.exit(f"no tiny pair at {args.tiny}: diagevo models tiny --out {args.tiny}")
    print(f"{os.cpu_count()} CPU cores; sizes: {', '.join(SIZES)}")
    with tempfile.TemporaryDirectory() as tmp:
        base_wall, base = one_round(args.tiny.resolve(), Path(tmp), 1)
        two_wall, two = one_round(args.tiny.resolve(), Path(tmp), 2)
    for phase in ("challenger", "solver"):
        print(
            f"{phase} GRPO: 1 process {base[phase]:.2f} s, 2 processes {two[phase]:.2f} s; ratio "
            f"{base[phase] / two[phase]:.2f}x"
        )
    print(
        f"whole round (process start included): 1 process {base_wall:.1f} s, 2 processes {two_wall:.1f} s; ratio "
        f"{base_wall / two_wall:.2f}x"
    )


if __name__ == "__main__":
    main()
