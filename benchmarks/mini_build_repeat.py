"""Does ``diagevo models mini`` give the same pair twice? Builds it several times, each in a fresh
process, and compares the weights and the held-out accuracy per skill.

    python benchmarks/mini_build_repeat.py --steps 200 --out /tmp/repeat
    python benchmarks/mini_build_repeat.py --steps 1600 --only "1 thread" --only "2 threads"

The builds: one torch thread twice (the default AVX2 kernels: the same bytes?), two threads
(another reduction order in the matrix products), one thread on the processor's own kernels
(``--kernels native``: what the build ran before the kernels were pinned) and one on torch's and
MKL's portable ones (``ATEN_CPU_CAPABILITY=default``, ``MKL_CBWR=COMPATIBLE``), each against the
first. A pair is the same when every weight tensor is equal byte for byte; otherwise the table
gives the largest weight difference and each skill's held-out accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

NATIVE = ["--kernels", "native"]
BUILDS: dict[str, tuple[int, dict[str, str], list[str]]] = {
    "1 thread": (1, {}, []),
    "1 thread, again": (1, {}, []),
    "2 threads": (2, {}, []),
    "1 thread, native kernels": (1, {}, NATIVE),
    "1 thread, portable kernels": (1, {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}, NATIVE),
}


def build(out: Path, steps: int, threads: int, env: dict[str, str], args: list[str]) -> float:
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "diagevo.cli.app", "models", "mini", "--out", str(out), "--threads", str(threads)]
    done = [*cmd, "--steps", str(steps), *args, "--json"]
    subprocess.run(done, check=True, env={**os.environ, **env}, capture_output=True)
    return time.perf_counter() - started


def weights(pair: Path) -> dict[str, object]:
    from safetensors.torch import load_file

    return load_file(pair / "solver" / "model.safetensors")


def compare(a: Path, b: Path) -> tuple[bool, float]:
    wa, wb = weights(a), weights(b)
    same = all(wa[k].equal(wb[k]) for k in wa)  # type: ignore[attr-defined]
    diff = max(float((wa[k] - wb[k]).abs().max()) for k in wa)  # type: ignore[operator]
    return same, diff


def accuracy(pair: Path) -> dict[str, float]:
    return json.loads((pair / "mini.json").read_text(encoding="utf-8"))["measured"]["accuracy"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="warm-up steps of each build (the pair's: 1600)")
    ap.add_argument("--out", type=Path, default=Path("build/repeat"))
    ap.add_argument("--only", action="append", choices=list(BUILDS), help="only these builds (the first is the base)")
    args = ap.parse_args()
    names = args.only or list(BUILDS)
    rows = []
    for name in names:
        threads, env, extra = BUILDS[name]
        out = args.out / name.replace(" ", "-").replace(",", "")
        seconds = build(out, args.steps, threads, env, extra) if not (out / "mini.json").is_file() else float("nan")
        rows.append((name, out, seconds))
    base = rows[0][1]
    skills = list(accuracy(base))
    print(
        f"| build ({args.steps} steps) | seconds | same bytes as {rows[0][0]!r} | largest weight difference | "
        + " | ".join(skills)
        + " | mean |"
    )
    print("|" + "---|" * (5 + len(skills)))
    for name, out, seconds in rows:
        same, diff = compare(base, out)
        acc = accuracy(out)
        print(
            f"| {name} | {'–' if seconds != seconds else f'{seconds:.0f}'} | {'yes' if same else 'no'} | {diff:.2e} | "
            + " | ".join(f"{acc[s]:.2f}" for s in skills)
            + f" | {sum(acc.values()) / len(acc):.3f} |"
        )


if __name__ == "__main__":
    main()
