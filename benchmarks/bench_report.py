"""The run report on a large log: how long ``diagevo report`` takes against reading the log.

Builds a realistic log (``bench_store.build_log``: questions, scores, failures with trajectories,
diagnoses, causes, merges, commits) and measures, in this process:

- baseline: reading every event of the run with its texts (``EventStore.read(texts=True)``);
- ``load_run``: everything the report draws, as polars frames (stats, stories, M_t per round);
- the whole report: ``load_run``, the matplotlib figures and the HTML, written to a file.

Run: ``.venv/bin/python benchmarks/bench_report.py [--events 100000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_store import build_log  # noqa: E402

from diagevo.log import open_log
from diagevo.report import write_report  # noqa: E402
from diagevo.report.data import load_run  # noqa: E402
from diagevo.report.figures import _pyplot  # noqa: E402
from diagevo.views.caches import refresh as refresh_snapshots


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/report.db"
        t0 = time.perf_counter()
        run = build_log(url, args.events)
        with open_log(url) as store:
            refresh_snapshots(store, run)
            print(f"log: {args.events:,} events built in {time.perf_counter() - t0:.1f} s")
            _pyplot()  # import matplotlib outside the timings
            t0 = time.perf_counter()
            n = sum(1 for _ in store.read(run, texts=True))
            read = time.perf_counter() - t0
            t0 = time.perf_counter()
            data = load_run(store, run)
            load = time.perf_counter() - t0
            out = Path(tmp) / "report.html"
            t0 = time.perf_counter()
            write_report(store, run, out, url, lambda *args: " ".join(["diagevo", *args]))
            full = time.perf_counter() - t0
        print(f"read the log with texts: {read:.2f} s ({n:,} events)")
        print(
            f"load_run (frames, stories, M_t of {len(data.committed)} rounds, {len(data.stories)} causes): "
            f"{load:.2f} s = {load / read:.2f}x reading the log"
        )
        print(f"whole report, {out.stat().st_size / 1e6:.1f} MB: {full:.2f} s = {full / read:.2f}x reading the log")
    print(f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs while measuring)")


if __name__ == "__main__":
    main()
