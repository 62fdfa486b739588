"""Read commands on a 1,000,000-event log, as a user runs them (a script, not a test).

Each command runs as ``diagevo memory ... --json`` in a new process (process start and imports
included; best of 3 wall-clock times). The baseline, measured in the same run, is the full-scan
projection each command used to be: ``stats`` = ``round_stats`` over every event, ``why`` =
``cause_story`` over the whole run with texts, ``events --cause/--failure/--question/--round`` =
a filter over every event. ``diagevo --help`` is the floor every command pays.

The log is built once (``bench_store.build_log``) into ``--db`` (default a file under /tmp) and
reused by later runs; its snapshots are written as a training run would have written them.

    python benchmarks/bench_reads.py [--db sqlite:////tmp/diagevo-bench-1m.db] [--events 1000000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import build_log  # noqa: E402

from diagevo.events.store import EventStore, sqlite_path  # noqa: E402
from diagevo.memory.audit import cause_story, round_stats  # noqa: E402
from diagevo.replay import refresh_snapshots  # noqa: E402

CAUSE_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause")


def prepare(url: str, events: int) -> str:
    path = sqlite_path(url)
    if path is None or not path.exists():
        t0 = time.perf_counter()
        build_log(url, events)
        print(f"built a {events:,}-event log in {time.perf_counter() - t0:.0f} s")
    with EventStore(url) as store:
        run = store.runs()[0]
        refresh_snapshots(store, run)
    return run


def best_of(cmd: list[str], n: int = 3) -> float:
    best = float("inf")
    env = {**os.environ, "COLUMNS": "200"}
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        best = min(best, time.perf_counter() - t0)
    return best


def timed(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="sqlite:////tmp/diagevo-bench-1m.db")
    ap.add_argument("--events", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    run = prepare(args.db, args.events)
    exe = str(Path(sys.executable).with_name("diagevo"))
    with EventStore(args.db) as store:
        n = store.last_seq(run)
        named: Counter[str] = Counter()
        fid = qid = None
        for _, _, _, d in store.iter_rows(run, types=("failure.attributed", "failure.recorded")):
            named[d.get("cause_id")] += 1
            fid = fid or d.get("failure_id")
            qid = qid or d.get("question_id")
        cause = next(c for c, _ in named.most_common() if c)
        rnd = max(r for _, r, _, _ in store.iter_rows(run, types=("round.committed",))) // 2

        def scan(keep) -> None:  # noqa: ANN001
            for e in store.read(run):
                keep(e)

        baselines = {
            "stats": lambda: round_stats(store.iter_rows(run), run),
            "why": lambda: cause_story(((e.seq, e.round, e.type, e.data) for e in store.read(run, texts=True)), cause),
            "events --cause": lambda: scan(lambda e: cause in {e.data.get(k) for k in CAUSE_FIELDS}),
            "events --failure": lambda: scan(lambda e: e.data.get("failure_id") == fid),
            "events --question": lambda: scan(lambda e: e.data.get("question_id") == qid),
            "events --round": lambda: scan(lambda e: e.round == rnd),
        }
        base = {k: timed(f) for k, f in baselines.items()}
    db = ["--db", args.db, "--run", run, "--json"]
    commands = {
        "--help (floor)": [exe, "--help"],
        "stats": [exe, "memory", "stats", *db],
        "why": [exe, "memory", "why", cause, *db],
        "events --cause": [exe, "memory", "events", "--cause", cause, "--limit", "0", *db],
        "events --failure": [exe, "memory", "events", "--failure", fid, "--limit", "0", *db],
        "events --question": [exe, "memory", "events", "--question", qid, "--limit", "0", *db],
        "events --round": [exe, "memory", "events", "--round", str(rnd), "--limit", "0", *db],
        "events --type nodes.merged": [exe, "memory", "events", "--type", "nodes.merged", "--limit", "0", *db],
        "show": [exe, "memory", "show", *db],
        f"replay --round {rnd}": [exe, "memory", "replay", "--round", str(rnd), *db],
    }
    print(f"log: {n:,} events, run {run}; cause {cause} named by {named[cause]} events")
    print(f"{'command (new process, --json)':<34}{'wall':>9}{'full scan':>11}{'speed-up':>10}{'<= 1 s':>8}")
    ok = True
    for name, cmd in commands.items():
        wall = best_of(cmd)
        b = base.get(name)
        passed = wall <= (0.3 if name.startswith("--help") else 1.0)
        ok &= passed
        cols = f"{b:>10.2f}s{b / wall:>9.0f}x" if b else f"{'':>11}{'':>10}"
        print(f"{name:<34}{wall:>8.2f}s{cols}{'ok' if passed else 'MISSED':>8}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
