"""How far a what-if can be trusted: the what-if against an actual re-run (a script, not a test).

On the simulator, for each seed: a 5-round run under the defaults; then for k and θ_up at three
values each, (a) the what-if of that run under the value (``diagevo.whatif.what_if``: the memory
decided again on the recorded evidence, no model call) and (b) the actual re-run: the run forked
at round 1 with the value set and trained on to round 5 (new questions, new failures, new
diagnoses). Rounds 2-5 of (a) and (b) are compared: Active and Mastered counts, F_t and ε_{t+1}.
Beside each gap, the gap of the recorded run itself against (b): what one would guess with no
what-if at all. Prints a Markdown table (the page docs/concepts/what-if.md quotes it).

    python benchmarks/measure_whatif_trust.py [--seeds 0 1 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from diagevo.fork import fork_run
from diagevo.log import Recorder, open_log
from diagevo.memory.schedule import schedule
from diagevo.train.config import load_config
from diagevo.train.run import TrainOptions, train
from diagevo.views.memory import commit_memories
from diagevo.whatif import what_if

ROOT = Path(__file__).resolve().parent.parent
SIZES = ["train.challenger_questions=16", "train.curriculum_questions=48", "train.keep_checkpoints=0"]
SETTINGS = [("memory.k", v) for v in ("0.25", "1", "2")] + [("memory.theta_up", v) for v in ("0.6", "0.8", "0.9")]
FIELDS = ("active", "mastered", "F", "epsilon")


def rounds_of(store: Recorder, run: str, k: float | None) -> dict[int, dict[str, float]]:
    """Per committed round: Active, Mastered, F_t and ε_{t+1} (under ``k`` when given: the
    value a fork's rounds after the first were scheduled with)."""
    out = {}
    for m in commit_memories(store, run):
        s = schedule(replace(m, k=k) if k is not None else m)
        out[m.committed] = {"active": len(m.active()), "mastered": len(m.mastered()), "F": s.F, "epsilon": s.epsilon}
    return out


def one_seed(store: Recorder, seed: int, rounds: int, tmp: Path) -> list[dict[str, Any]]:
    src = f"s{seed}"
    base = [*SIZES, f"train.rounds={rounds}", f"train.seed={seed}", f'train.out_dir="{tmp / "ckpt"}"']
    train(load_config(ROOT / "configs" / "sim.toml", [*base, f'train.run="{src}"']), store)
    rows = []
    for key, value in SETTINGS:
        k = float(value) if key == "memory.k" else None
        fork = f"{src}-{key}={value}"
        fork_run(store, src, 1, fork, [f"{key}={value}"])
        cfg = load_config(ROOT / "configs" / "sim.toml", [*base, f'train.run="{fork}"'])
        train(cfg, store, TrainOptions(resume=True))
        guess = what_if(store, src, {key: value})
        actual = rounds_of(store, fork, k)
        predicted, recorded = rounds_of(store, guess.run, k), rounds_of(store, src, None)  # recorded: as it ran
        for t in range(2, rounds + 1):
            rows.append(
                {"setting": f"{key}={value}", "seed": seed, "round": t}
                | {f"whatif_{f}": abs(predicted[t][f] - actual[t][f]) for f in FIELDS}
                | {f"recorded_{f}": abs(recorded[t][f] - actual[t][f]) for f in FIELDS}
                | {f"actual_{f}": actual[t][f] for f in FIELDS}
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Mean absolute gap per setting over seeds and rounds 2-5: what-if (recorded run) vs re-run."""
    head = "| setting | Active | Mastered | F_t | ε_t+1 | re-run's mean F_t |"
    lines = [head, "|---|---|---|---|---|---|"]
    for setting in dict.fromkeys(r["setting"] for r in rows):
        mine = [r for r in rows if r["setting"] == setting]

        def gap(field: str, mine: list[dict[str, Any]] = mine) -> str:
            w = statistics.mean(r[f"whatif_{field}"] for r in mine)
            n = statistics.mean(r[f"recorded_{field}"] for r in mine)
            return f"{w:.3f} ({n:.3f})" if field == "epsilon" else f"{w:.1f} ({n:.1f})"

        actual_f = statistics.mean(r["actual_F"] for r in mine)
        lines.append(f"| {setting} | {' | '.join(gap(f) for f in FIELDS)} | {actual_f:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, open_log(f"sqlite:///{Path(tmp) / 'trust.db'}") as store:
        for seed in args.seeds:
            rows += one_seed(store, seed, args.rounds, Path(tmp))
    print(
        f"mean |what-if - re-run| over seeds {args.seeds} and rounds 2-{args.rounds} "
        "(in parentheses: |recorded run - re-run|, no what-if at all)\n"
    )
    print(table(rows))
    print(f"\n{len(rows)} comparisons in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
