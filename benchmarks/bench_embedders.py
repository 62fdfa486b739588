"""The default static embedder against the full local MiniLM (a script, not a test).

Two figures, each embedder measured in the same run, interleaved, best of ``--repeat``:

* embedding 200 cause-like phrases with an empty cache (the static table and the model loaded
  before the clock starts), per text;
* ``diagevo train --rounds R`` on the simulator in a new process (load, rounds, diagnosis),
  wall-clock and CPU seconds (user + system of the child).

    python benchmarks/bench_embedders.py [--repeat 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from diagevo.diagnosis.tools import make_embedder

WORDS = (
    "fails to carry the remainder when adding multi digit numbers column by column and drops the sign "
    "of a negative term moved across the equals sign while treating a percentage decrease followed by "
    "an equal increase as a return to the start and counting fence posts instead of gaps"
).split()


def phrases(n: int) -> list[str]:
    """``n`` different 12-18 word phrases drawn from the words above (deterministic)."""
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(12 + i % 7)) + f" case {i}" for i in range(n)]


def per_text(spec: str, texts: list[str]) -> float:
    """Seconds per text, a fresh cache (the model or table loaded first)."""
    make_embedder(spec).embed(["load before the clock starts"])  # the model or table is kept per process
    emb = make_embedder(spec)  # an empty cache
    t0 = time.perf_counter()
    emb.embed(texts)
    return (time.perf_counter() - t0) / len(texts)


def train(spec: str, rounds: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds of ``diagevo train`` in a new process."""
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "diagevo.cli.app", "train", "--run", "b", "--rounds", str(rounds), "--quiet"]
            + ["--db", f"sqlite:///{Path(tmp) / 'b.db'}", "--set", f'diagnosis.embedder="{spec}"'],
            check=True,
            capture_output=True,
            cwd=tmp,
            env={**os.environ, "DIAGEVO_DB": ""},
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    texts = phrases(200)
    best: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for spec in ("static", "local"):
            wall, cpu = train(spec, args.rounds)
            got = [per_text(spec, texts), wall, cpu]
            best[spec] = [min(a, b) for a, b in zip(best.get(spec, got), got, strict=True)]
    load = os.getloadavg()[0]
    for spec, (one, wall, cpu) in best.items():
        print(f"{spec:6s}: {one * 1e3:.3f} ms a text; train --rounds {args.rounds}: {wall:.1f} s wall, {cpu:.1f} s CPU")
    s, loc = best["static"], best["local"]
    print(
        f"static vs local: {loc[0] / s[0]:.0f}x faster a text; train {loc[1] / s[1]:.2f}x wall, "
        f"{loc[2] / s[2]:.2f}x CPU (best of {args.repeat}; load average {load:.1f})"
    )


if __name__ == "__main__":
    main()
