"""How diagnosis scales with a round's failures (a script, not a test).

``diagevo.diagnose`` with the offline heuristic diagnostician (``--diagnostician heuristic``) and
the static embedder on 1,500, 6,000 and 20,000 failures of one round, each on a fresh SQLite file
(synchronous=NORMAL), in this process. The failures' answers miss the pseudo-label in the ways the
heuristic tells apart (sign, off by one, by a factor, another number, no answer), so most failures
are duplicates of a few causes: stage 1, stages 2a-3.5 (16 failures' decisions per transaction),
each appended under the append lock and checked against the memory at the log's head.

Prints the seconds of each size (wall and CPU), its cost per failure, and the ratio of the
per-failure cost of the largest size to the smallest's (the smallest is the baseline, measured in
the same run; the CPU ratio is the one other jobs on the machine move least): diagnosis linear in
a round's failures keeps it near 1. The same script runs against an earlier checkout with that
checkout's interpreter (``/path/.venv/bin/python benchmarks/bench_diagnosis_scale.py`` from
outside both trees).

    python benchmarks/bench_diagnosis_scale.py [--sizes 1500 6000 20000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import diagevo
from diagevo.catalog.failure import Failure
from diagevo.log import open_log
from diagevo.rounds import Round, start_run
from diagevo.train.config import Config

RUN = "scale"
# (response, pseudo-label) shapes: each misses the label in a way the heuristic names
_MISSES = (
    ("The answer is \\boxed{{{neg}}}.", "{n}"),  # sign
    ("So we get \\boxed{{{n1}}}.", "{n}"),  # off by one
    ("Therefore \\boxed{{{n2}}}.", "{n}"),  # off by a factor
    ("Hence \\boxed{{{other}}}.", "{n}"),  # another number
    ("I could not finish the computation.", "{n}"),  # no final answer
)


def failures(n: int) -> list[Failure]:
    out = []
    for i in range(n):
        v = 7 + i % 997
        response, label = _MISSES[i % len(_MISSES)]
        fill = {"n": v, "neg": -v, "n1": v + 1, "n2": 2 * v, "other": v + 9_973}
        out.append(
            Failure(
                failure_id=f"f{i:06d}",
                question_id=f"q{i:06d}",
                question=f"Question {i}: how many marbles are left when {v} are counted twice?",
                pseudo_label=label.format(**fill),
                response=response.format(**fill),
                reference=f"Step 1: count the marbles. The answer is \\boxed{{{v}}}.",
                known_causes=(),
            )
        )
    return out


def diagnose_once(tmp: Path, n: int) -> dict[str, Any]:
    store = open_log(f"sqlite:///{tmp / f'scale-{n}.db'}?synchronous=normal")
    try:
        start_run(store, RUN, Config(), seed=1)
        given = failures(n)
        t0, c0 = time.perf_counter(), time.process_time()
        summary = diagevo.diagnose(Round(store, RUN, 1), diagnostician="heuristic", embedder="static", failures=given)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        store.close()
    return {
        "failures": n,
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "ms_per_failure": round(1000 * wall / n, 3),
        "cpu_ms_per_failure": round(1000 * cpu / n, 3),
        "new_causes": summary.new_causes,
        "duplicates": summary.duplicates,
        "failed": summary.failed,
        "maintenance_s": round(summary.maintenance_s, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1500, 6000, 20000])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sizes = sorted(args.sizes)
    with tempfile.TemporaryDirectory() as d:
        rows = [diagnose_once(Path(d), n) for n in sizes]
    base, last = rows[0], rows[-1]
    ratio = last["ms_per_failure"] / base["ms_per_failure"]
    cpu_ratio = last["cpu_ms_per_failure"] / base["cpu_ms_per_failure"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if args.json:
        out = {
            "sizes": rows,
            "per_failure_ratio": round(ratio, 2),
            "cpu_per_failure_ratio": round(cpu_ratio, 2),
            "load_average_1min": round(load, 2),
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    for r in rows:
        sys.stdout.write(
            f"{r['failures']:>7,} failures: {r['seconds']:8.2f} s ({r['cpu_seconds']:.2f} s CPU), "
            f"{r['ms_per_failure']:.3f} ms per failure ({r['cpu_ms_per_failure']:.3f} CPU); "
            f"{r['new_causes']} new causes, {r['duplicates']} duplicates, {r['failed']} failed\n"
        )
    sys.stdout.write(
        f"per-failure cost, {last['failures']:,} vs {base['failures']:,}: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU "
        f"(load average {load:.2f} on {os.cpu_count()} CPUs)\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
