"""The hf loop on this CPU with each sampling engine: transformers ``generate`` (``local``, the
baseline) and vLLM's CPU build (``vllm``, one engine for the run), on the same config and model.

Each engine runs the config's rounds (``configs/smollm2-cpu.toml``: two) in a fresh process, so
its start-up (vLLM's import and engine build) is counted. Per phase: wall seconds, CPU seconds
(this process, every thread: the engine runs in it), tokens generated (the loop's own sampling,
counted with the tokenizer, and GRPO completions from TRL's mean completion length), tokens per
second and per CPU second; then peak RSS and the wall time of the run. Phases nest (a challenger
step samples the frozen solver's votes; the first sampling builds the engine): each figure is
the phase's own, its inner phases taken out.

Not a test and not part of ``make bench`` (half an hour here):
    .venv/bin/python benchmarks/measure_vllm_loop.py --model models/smollm2 [--engines local,vllm]
        [--together] [--set K=V ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CONFIG = ROOT / "configs" / "smollm2-cpu.toml"
PHASES = ["engine start", "challenger GRPO", "Q^cur", "votes", "solver GRPO", "diagnosis", "held-out eval"]


class Meter:
    """Exclusive wall and CPU seconds and tokens per phase, phases nesting on a stack."""

    def __init__(self) -> None:
        self.stack: list[list[Any]] = []  # [name, wall0, cpu0, child_wall, child_cpu]
        self.rows: dict[str, dict[str, float]] = {
            p: {"seconds": 0.0, "cpu_seconds": 0.0, "tokens": 0.0} for p in PHASES
        }

    def wrap(self, name: str, fn: Any, nested: bool = True) -> Any:
        """``fn`` timed as phase ``name``; with ``nested=False``, a call inside another phase is
        that phase's (the challenger's reward samples the frozen solver's votes)."""

        def inner(*args: Any, **kwargs: Any) -> Any:
            if not nested and self.stack:
                return fn(*args, **kwargs)
            self.stack.append([name, time.perf_counter(), time.process_time(), 0.0, 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                _, w0, c0, cw, cc = self.stack.pop()
                wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                row = self.rows[name]
                row["seconds"] += wall - cw
                row["cpu_seconds"] += cpu - cc
                if self.stack:
                    self.stack[-1][3] += wall
                    self.stack[-1][4] += cpu

        return inner

    def tokens(self, n: float) -> None:
        if self.stack:
            self.rows[self.stack[-1][0]]["tokens"] += n


def run_one(engine: str, model: Path, sets: list[str], rounds: int) -> dict[str, Any]:
    """One run in this process; the figures as JSON."""
    from diagevo.catalog import PhaseCompleted, RoundCommitted, of_type
    from diagevo.log import open_log
    from diagevo.train import loop as loop_module
    from diagevo.train.config import load_config
    from diagevo.train.hf.backend import HFBackend
    from diagevo.train.run import TrainOptions, train
    from diagevo.views.verify import verify_run

    cfg = load_config(
        CONFIG,
        [
            f"solver.model={json.dumps(str(model))}",
            f"challenger.model={json.dumps(str(model))}",
            f"hf.use_vllm={'true' if engine == 'vllm' else 'false'}",
            *sets,
        ],
    )
    meter = Meter()
    backend = HFBackend(cfg)
    for method, name in (
        ("train_challenger", "challenger GRPO"),
        ("generate", "Q^cur"),
        ("sample", "votes"),
        ("train_solver", "solver GRPO"),
        ("evaluate", "held-out eval"),
    ):
        setattr(
            backend, method, meter.wrap(name, getattr(backend, method), nested=method not in ("generate", "sample"))
        )
    build = backend._vllm_engine
    backend._vllm_engine = lambda: build() if backend._vllm is not None else meter.wrap("engine start", build)()  # type: ignore[method-assign]
    sampler = backend._generate

    def counted(role: Any, prompts: Any, sampling: Any) -> list[list[str]]:
        outs = sampler(role, prompts, sampling)
        tok = backend.tokenizer(role)
        meter.tokens(sum(len(tok(x, add_special_tokens=False)["input_ids"]) for o in outs for x in o))
        return outs

    backend._generate = counted  # type: ignore[method-assign]
    diagnose = loop_module.Trainer._diagnose
    loop_module.Trainer._diagnose = meter.wrap("diagnosis", diagnose)  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix=f"diagevo-measure-{engine}-") as tmp:
        cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update={"out_dir": Path(tmp) / "ckpt"})})
        store = open_log(f"sqlite:///{tmp}/run.db", create=True)
        load0, started = os.getloadavg()[0], time.perf_counter()
        try:
            run, _ = train(cfg, store, TrainOptions(backend=backend, rounds=rounds))
            wall = time.perf_counter() - started
            for phase in of_type(PhaseCompleted, store.read(run, types=(PhaseCompleted,))):
                if phase.phase in ("challenger", "solver"):  # TRL's completions: mean length x completions
                    n = (phase.completion_length or 0.0) * (phase.completions_per_step or 0) * (phase.steps or 0)
                    meter.rows[f"{phase.phase} GRPO"]["tokens"] += n
            commits = list(of_type(RoundCommitted, store.read(run, types=(RoundCommitted,))))  # summary fields inline
            problems = verify_run(store, run)
        finally:
            store.close()
    engines = 0
    if engine == "vllm":
        from diagevo.generation.vllm_engine import engines_built

        engines = engines_built()
    return {
        "engine": engine,
        "rows": meter.rows,
        "wall_seconds": wall,
        "cpu_seconds": time.process_time(),
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "heldout_acc": [c.heldout_acc for c in commits],
        "round_seconds": [c.timing or {} for c in commits],  # the loop's own clock, per round
        "verify_problems": problems,
        "vllm_engines": engines,
        "load_average": [load0, os.getloadavg()[0]],
    }


def table(r: dict[str, Any]) -> str:
    lines = [
        f"{r['engine']}: {r['wall_seconds']:.0f} s wall, {r['cpu_seconds']:.0f} CPU s, peak RSS "
        f"{r['peak_rss_gib']:.1f} GiB, "
        f"held-out acc {r['heldout_acc']}, vLLM engines {r['vllm_engines']}, verify "
        f"{'clean' if not r['verify_problems'] else r['verify_problems']}, "
        f"load {r['load_average'][0]:.1f} -> {r['load_average'][1]:.1f}",
        "| phase | s | CPU s | tokens | tokens/s | tokens/CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for name in PHASES:
        row = r["rows"][name]
        if not row["seconds"]:
            continue
        s, c, n = row["seconds"], row["cpu_seconds"], row["tokens"]
        lines.append(
            f"| {name} | {s:.1f} | {c:.1f} | {n:.0f} | {n / s if n else 0:.1f} | {n / c if n and c else 0:.2f} |"
        )
    for t, timing in enumerate(r.get("round_seconds", []), start=1):  # as the loop clocked each round
        lines.append(f"round {t}: " + ", ".join(f"{k} {v:.1f} s" for k, v in timing.items()))
    return "\n".join(lines)


def compare(a: dict[str, Any], b: dict[str, Any]) -> str:
    lines = [f"| phase | {a['engine']} s | {b['engine']} s | {a['engine']} / {b['engine']} |", "|---|---|---|---|"]
    for name in PHASES:
        sa, sb = a["rows"][name]["seconds"], b["rows"][name]["seconds"]
        if sa or sb:
            lines.append(f"| {name} | {sa:.1f} | {sb:.1f} | {sa / sb if sb else float('inf'):.2f} |")
    lines.append(
        f"| whole run | {a['wall_seconds']:.1f} | {b['wall_seconds']:.1f} | "
        f"{a['wall_seconds'] / b['wall_seconds']:.2f} |"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="the model directory (diagevo models smollm2 --out DIR)")
    ap.add_argument("--engines", default="local,vllm")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--set", dest="sets", action="append", default=[], help="override a field of configs/smollm2-cpu.toml"
    )
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--together",
        action="store_true",
        help="run the engines at the same time: on a shared machine both see the same load",
    )
    args = ap.parse_args()
    if args.one:
        result = run_one(args.one, args.model, args.sets, args.rounds)
        args.out.write_text(json.dumps(result))
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for engine in args.engines.split(","):
            out = Path(tmp) / f"{engine}.json"
            cmd = [
                sys.executable,
                __file__,
                "--one",
                engine,
                "--model",
                str(args.model),
                "--rounds",
                str(args.rounds),
                "--out",
                str(out),
            ]
            cmd += [x for s in args.sets for x in ("--set", s)]
            procs.append((subprocess.Popen(cmd, cwd=ROOT), out))
            if not args.together:
                procs[-1][0].wait()
        for proc, out in procs:
            if proc.wait() != 0:
                raise SystemExit(f"{out.stem}: the run failed (exit {proc.returncode})")
            results.append(json.loads(out.read_text()))
            if not args.json:
                print(table(results[-1]) + "\n", flush=True)
    if args.json:
        print(json.dumps(results, indent=1))
    elif len(results) == 2:
        print(compare(results[0], results[1]))


if __name__ == "__main__":
    main()
