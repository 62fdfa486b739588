"""Ingest that must not slow as the log grows (a script, not a test).

A valid run of ``--events`` events (``bench_store.realistic_events``: rounds whose promotions
Eq. 5-6 decide, so the evidence rules accept them) is ingested into an empty SQLite log in
``--parts`` parts, one ``memory ingest`` each; every part's time is printed, then the growth
from the first part to the last. Each part is checked against the run stored so far (its memory,
what it counted, the ids it holds): a rule that read the run whole would show as growth.

    python benchmarks/bench_ingest_growth.py [--events 1000000] [--parts 20] [--profile N]
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import realistic_events  # noqa: E402

from diagevo.interchange import ingest  # noqa: E402
from diagevo.log import open_log  # noqa: E402


def _line(e) -> str:  # noqa: ANN001
    return json.dumps({"type": e.type, "run": e.run, "round": e.round, "event_id": e.event_id, "data": e.data})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--parts", type=int, default=20)
    ap.add_argument("--profile", type=int, action="append", default=[], help="profile part N (1-based)")
    args = ap.parse_args(argv)
    size = args.events // args.parts
    events = realistic_events("bench", args.events)
    times: list[float] = []
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp, open_log(f"sqlite:///{Path(tmp) / 'log.db'}") as store:
        for part in range(1, args.parts + 1):
            lines = [_line(e) for e in itertools.islice(events, size)]
            if not lines:
                break
            prof = cProfile.Profile() if part in args.profile else None
            t0 = time.perf_counter()
            if prof is not None:
                prof.enable()
            ingest(store, lines)
            if prof is not None:
                prof.disable()
            times.append(time.perf_counter() - t0)
            print(f"part {part:>3}: {len(lines):>7,} events, stored {store.last_seq('bench'):>9,}: {times[-1]:7.2f}s")
            if prof is not None:
                pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    print(f"growth first -> last part: {times[-1] / times[0]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
