"""Replay benchmark (a script, not a test).

Builds a 1,000,000-event log with ``bench_store.build_log`` and measures, each in a fresh process:
(a) a full replay from the log with no snapshot: ``load_memory`` reads the run's memory events
    (the query skips evidence and bookkeeping rows, whose fold is a no-op) and folds them;
(b) a validating fold of every event of the run (what ``memory verify`` and ingest do);
(c) replay of the latest committed round from its snapshot (what ``memory replay --round N`` does);
(d) the baseline, in the same run: the memory rows of (a) folded by ``evolve`` one event at a time,
    each change copying the memory's tables (how the fold worked before its private working copy).
(e) ``memory verify`` of the run (``verify_run``: the chain, the fold and the rules every event
    is held to, the snapshots): wall and CPU time; with ``--verify-baseline DIR`` (a checkout of an
    earlier diagevo, e.g. ``git archive REV diagevo | tar -x -C DIR``), the same verify by that
    diagevo, run before and after this one, and the ratio of the CPU times (what other jobs on a
    loaded machine disturb least).
Targets: (a) <= 10 s and <= 1 GiB peak RSS; (c) <= 50 ms; (e) at most 2x the baseline's CPU time.
With ``--db`` naming a log that already holds a run, that log is reused (building 1M events takes
a minute; build it once).

    python benchmarks/bench_replay.py [--events 1000000] [--db URL] [--no-baseline] [--verify-baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import _peak_rss_mib, build_log, in_fresh_process  # noqa: E402

from diagevo.log import open_log
from diagevo.memory.fold import fold  # noqa: E402
from diagevo.views.caches import refresh as refresh_snapshots
from diagevo.views.memory import committed_rounds, load_memory


def full_replay(url: str, run: str) -> dict[str, float]:
    with open_log(url) as store:
        t0 = time.perf_counter()
        mem = load_memory(store, run)
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "peak_rss_mib": _peak_rss_mib(), "causes": len(mem.causes), "round": mem.committed}


def validating_fold(url: str, run: str) -> dict[str, float]:
    with open_log(url) as store:
        t0 = time.perf_counter()
        fold(store.rows(run), run)
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "peak_rss_mib": _peak_rss_mib()}


def evolve_each(url: str, run: str) -> dict[str, float]:
    from diagevo.catalog import FOLDED as FOLD_TYPES
    from diagevo.catalog import RunStarted
    from diagevo.memory.fold import evolve, start

    with open_log(url) as store:
        rows = list(store.rows(run, types=FOLD_TYPES))
    t0 = time.perf_counter()
    mem = None
    for row in rows:
        event = row.event
        if mem is None:
            assert isinstance(event, RunStarted)
            mem = start(run, event, row.seq)
        else:
            mem = evolve(mem, event, row.round)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    fold(rows, run)
    return {"seconds": seconds, "draft_seconds": time.perf_counter() - t0, "rows": len(rows)}


VERIFY = """
import json, sys, time
from diagevo.log import open_log
from diagevo.views.verify import verify_run
with open_log(sys.argv[1]) as store:
    t0, c0 = time.perf_counter(), time.process_time()
    problems = verify_run(store, sys.argv[2])
    print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "problems": len(problems)}))
"""


def timed_verify(url: str, run: str, checkout: Path | None = None) -> dict[str, float]:
    """``verify_run`` in a new process, by this diagevo or by the one in ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)} if checkout is not None else None
    out = subprocess.run([sys.executable, "-c", VERIFY, url, run], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def snapshot_replay(url: str, run: str, rnd: int, repeats: int = 20) -> dict[str, float]:
    with open_log(url) as store:
        load_memory(store, run, rnd)  # warm the connection
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            load_memory(store, run, rnd)
            best = min(best, time.perf_counter() - t0)
    return {"seconds": best}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--db", default=None, help="database URL (default: a SQLite file in a temp dir)")
    ap.add_argument("--no-baseline", action="store_true", help="skip (d): the old fold is quadratic, hours at 10M")
    ap.add_argument("--verify-baseline", type=Path, help="a checkout of an earlier diagevo to time verify with")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'replay.db'}"
        t0 = time.perf_counter()
        with open_log(url) as store:
            existing = store.runs()
        run = existing[0] if existing else build_log(url, args.events)
        build_s = time.perf_counter() - t0
        with open_log(url) as store:
            args.events = store.last_seq(run)
        with open_log(url) as store:
            t0 = time.perf_counter()
            n_snap = refresh_snapshots(store, run)
            snap_s = time.perf_counter() - t0
            last = max(committed_rounds(store, run))
        snap = in_fresh_process(snapshot_replay, url, run, last)
        with open_log(url) as store:
            store.drop_view_states("memory", run)
        full = in_fresh_process(full_replay, url, run)
        every = in_fresh_process(validating_fold, url, run)
        base = None if args.no_baseline else in_fresh_process(evolve_each, url, run)
        with open_log(url) as store:
            refresh_snapshots(store, run)  # as a trained run holds them: verify compares them to the fold
        before = [timed_verify(url, run, args.verify_baseline)] if args.verify_baseline else []
        verified = timed_verify(url, run)
        if args.verify_baseline:  # before and after this one: the load of the machine moves
            before.append(timed_verify(url, run, args.verify_baseline))
    built = "reused" if existing else f"built in {build_s:.1f} s"
    print(
        f"log: {args.events:,} events, {last} rounds, {full['causes']} causes, {built}; {n_snap} snapshots "
        f"written in {snap_s:.1f} s"
    )
    print(f"{'measurement':<44}{'value':>14}{'target':>12}")
    rows = [
        ("(a) full replay from the log, no snapshot", f"{full['seconds']:.2f} s", "<= 10 s", full["seconds"] <= 10),
        ("    log events/s", f"{args.events / full['seconds']:,.0f}", "", True),
        ("    peak RSS", f"{full['peak_rss_mib']:.0f} MiB", "<= 1024", full["peak_rss_mib"] <= 1024),
        ("(b) validating fold of every event", f"{every['seconds']:.2f} s", "", True),
        ("    events/s", f"{args.events / every['seconds']:,.0f}", "", True),
        ("    peak RSS", f"{every['peak_rss_mib']:.0f} MiB", "<= 1024", every["peak_rss_mib"] <= 1024),
        (
            f"(c) replay round {last} from its snapshot",
            f"{snap['seconds'] * 1000:.1f} ms",
            "<= 50 ms",
            snap["seconds"] <= 0.05,
        ),
        ("    speed-up over (a)", f"{full['seconds'] / snap['seconds']:,.0f}x", "", True),
    ]
    if base is not None:
        rows += [
            (f"(d) {base['rows']:,} memory rows, evolve each", f"{base['seconds']:.2f} s", "", True),
            ("    the fold's working copy, same rows", f"{base['draft_seconds']:.2f} s", "", True),
            ("    speed-up", f"{base['seconds'] / base['draft_seconds']:.1f}x", "", True),
        ]
    rows += [
        ("(e) memory verify, wall", f"{verified['seconds']:.1f} s", "", verified["problems"] == 0),
        ("    CPU", f"{verified['cpu']:.1f} s", "", True),
    ]
    if before:
        cpu = sum(b["cpu"] for b in before) / len(before)
        ratio = verified["cpu"] / cpu
        rows += [
            ("    the baseline's, CPU (mean of 2)", f"{cpu:.1f} s", "", True),
            ("    ratio of the CPU times", f"{ratio:.2f}x", "<= 2x", ratio <= 2),
        ]
    ok = True
    for name, value, target, passed in rows:
        ok &= passed
        print(f"{name:<44}{value:>14}{target:>12}{'' if passed else '  MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
