"""SQLite append: this diagevo's work per event against an earlier diagevo's, counted instead of timed
(a script, not a test).

Wall-clock ratios of the append path move by ±20% on a shared 2-core machine; instruction counts
do not. Each tree appends the same realistic events (``bench_store.realistic_events``) in batches of
1000 to a fresh SQLite file, in a process of its own under ``valgrind --tool=callgrind`` (CPU
instructions of the whole process, SQLite's C code and the Python interpreter included) and under
``strace -f -c`` (system calls: ``fsync``/``fdatasync``, ``pwrite64``, file locks). Both counts are
taken twice, for ``--small`` and ``--large`` appended events, with every event loaded and validated
in both: the difference divided by the events between them is the steady per-event cost, start-up
and imports taken out. Ratios are "baseline / this" (above 1: this diagevo does less work).

    python benchmarks/measure_append_work.py --baseline DIR [--small 1000] [--large 5000]

DIR is a checkout of an earlier diagevo (``git worktree add --detach DIR REV``). Needs valgrind
and strace (Debian packages). Under callgrind Python runs about 50x slower: a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parent.parent

from bench_store import realistic_events  # noqa: E402

BATCH = 1000

# runs in the tree under test (PYTHONPATH): every event validated, then the first N appended
_APPENDER = r"""
import json, sys
from diagevo.log import open_log
from diagevo.schemas import validate_event
url, path, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
events = [validate_event(json.loads(line)) for line in open(path)]
store = open_log(url)
for i in range(0, n, size):
    store.append(events[i : min(i + size, n)])
store.close()
"""

SYSCALLS = ("fsync", "fdatasync", "pwrite64", "pread64", "fcntl", "flock", "openat")


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}


def instructions(tree: Path, events: Path, n: int, tmp: Path) -> int:
    """CPU instructions of one appender process (callgrind's ``Collected``)."""
    db = tmp / f"i-{tree.name}-{n}.db"
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp / 'cg.out'}", sys.executable, "-c", _APPENDER]
        + [f"sqlite:///{db}", str(events), str(n), str(BATCH)],
        env=_env(tree),
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(re.search(r"Collected : (\d+)", out.stderr).group(1))  # type: ignore[union-attr]


def syscalls(tree: Path, events: Path, n: int, tmp: Path) -> dict[str, int]:
    """System calls of one appender process and its threads, by name."""
    db = tmp / f"s-{tree.name}-{n}.db"
    report = tmp / "strace.txt"
    subprocess.run(
        ["strace", "-f", "-c", "-o", str(report), sys.executable, "-c", _APPENDER]
        + [f"sqlite:///{db}", str(events), str(n), str(BATCH)],
        env=_env(tree),
        cwd=tree,
        capture_output=True,
        check=True,
    )
    counts: dict[str, int] = {}
    for line in report.read_text().splitlines():
        cells = line.split()
        if len(cells) >= 5 and cells[-1].isidentifier() and cells[3].isdigit():
            counts[cells[-1]] = int(cells[3])
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="a checkout of an earlier diagevo")
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--large", type=int, default=5000)
    args = ap.parse_args(argv)
    if not 0 <= args.small < args.large:
        ap.error("--small must be below --large")
    trees = {"baseline": args.baseline.resolve(), "this": ROOT}
    with tempfile.TemporaryDirectory(prefix="bench_append_work_") as d:
        tmp = Path(d)
        events = tmp / "events.jsonl"
        evs = list(realistic_events("work", args.large))[: args.large]
        events.write_text("".join(json.dumps(e.model_dump(mode="json")) + "\n" for e in evs))
        span = args.large - args.small
        per_event: dict[str, float] = {}
        calls: dict[str, dict[str, float]] = {}
        for name, tree in trees.items():
            small, large = (instructions(tree, events, n, tmp) for n in (args.small, args.large))
            per_event[name] = (large - small) / span
            s_small, s_large = (syscalls(tree, events, n, tmp) for n in (args.small, args.large))
            calls[name] = {c: (s_large.get(c, 0) - s_small.get(c, 0)) / (span / BATCH) for c in SYSCALLS}
        print(f"SQLite append, batches of {BATCH}, events {args.small:,} -> {args.large:,} (steady state)")
        print(f"{'':<28}{'baseline':>14}{'this':>14}{'baseline / this':>18}")
        b, t = per_event["baseline"], per_event["this"]
        print(f"{'instructions per event':<28}{b:>14,.0f}{t:>14,.0f}{b / t:>17.2f}x")
        for c in SYSCALLS:
            b, t = calls["baseline"][c], calls["this"][c]
            if b or t:
                print(f"{c + ' per batch':<28}{b:>14.1f}{t:>14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
