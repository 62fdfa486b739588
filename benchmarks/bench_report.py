"""The run report on a large log: how long ``diagevo report`` takes against reading the log.

Builds a realistic log (``bench_store.build_log``: questions, scores, failures with trajectories,
diagnoses, causes, merges, commits) and measures, each in a new process as ``diagevo report``
runs (the plotting package of an earlier diagevo, matplotlib, imported outside the timings):

- baseline: reading every event of the run with its texts (``Recorder.read(texts=True)``);
- ``load_run``: everything the report draws, as plain rows (stats, stories, M_t per round);
- the whole report, as the command writes it: ``load_run``, the figures and the HTML (the
  templates compiled on the way), written to a file;
- ``render`` again in the same process: the figures and the HTML from loaded data, the templates
  already compiled;
- the page alone: ``render`` with no figure (each of ``figures``' functions replaced by a stub
  drawing an empty ``<svg>``; an earlier diagevo's ``to_svg`` too), best of 3 in the process: the
  view data and the HTML.

With ``--baseline DIR`` (a checkout of an earlier diagevo, e.g. ``git worktree add DIR REV``), the
same log is reported by that diagevo too, its process interleaved with this one's: the "before"
column. Each figure is the best of ``--repeat`` runs.

Run: ``.venv/bin/python benchmarks/bench_report.py [--events 100000] [--baseline DIR]``.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_store import build_log  # noqa: E402

from diagevo.log import open_log  # noqa: E402
from diagevo.views.caches import refresh as refresh_snapshots  # noqa: E402

# one measurement in a new process of the diagevo on PYTHONPATH: argv = url, run, out
MEASURE = """
import json, sys, time
from pathlib import Path
from diagevo.log import open_log
from diagevo.files.written import write_replacing
from diagevo.report import report_html
from diagevo.report.data import load_run
from diagevo.report.html import render

url, run, out = sys.argv[1:4]
FIGURES = ("accuracy", "metrics", "pseudo_labels", "heatmap", "lifecycle", "schedule", "steps", "question_properties",
           "timing")
command = lambda *args: " ".join(["diagevo", *args])
# the page of report_html's result: a RunReport's html, an earlier diagevo's (data, html) pair
page_html = lambda report: report[1] if isinstance(report, tuple) else report.html
try:  # an earlier diagevo drew with matplotlib
    from diagevo.report.figures import _pyplot
    _pyplot()
except ImportError:
    pass
with open_log(url, readonly=True) as store:
    t0 = time.perf_counter()
    n = sum(1 for _ in store.read(run, texts=True))
    read = time.perf_counter() - t0
    t0 = time.perf_counter()
    write_replacing(Path(out), page_html(report_html(store, run, url, command)))
    whole = time.perf_counter() - t0
    t0 = time.perf_counter()
    data = load_run(store, run)
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    render(data, url, command)
    again = time.perf_counter() - t0
    from diagevo.report import figures
    for name in FIGURES:  # no figure built nor drawn: the page's own work alone
        setattr(figures, name, lambda *args, **kwargs: "<svg></svg>")
    figures.to_svg = lambda fig: "<svg></svg>"  # an earlier diagevo's matplotlib figure to SVG
    html = []
    for _ in range(3):
        t0 = time.perf_counter()
        render(data, url, command)
        html.append(time.perf_counter() - t0)
print(json.dumps({"events": n, "read": read, "load_run": load, "whole": whole, "render": again, "html": min(html),
                  "rounds": len(data.committed), "causes": len(data.stories), "bytes": Path(out).stat().st_size}))
"""


def measure(checkout: Path, url: str, run: str, out: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, url, run, str(out)],
        env={**os.environ, "PYTHONPATH": str(checkout)},
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{checkout}: {done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--baseline", type=Path, help="a checkout of an earlier diagevo to time beside this one")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sides = {"this": ROOT} | ({"before": args.baseline.resolve()} if args.baseline else {})
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/report.db"
        t0 = time.perf_counter()
        run = build_log(url, args.events)
        with open_log(url) as store:
            refresh_snapshots(store, run)
        print(f"log: {args.events:,} events built in {time.perf_counter() - t0:.1f} s")
        runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for _ in range(args.repeat):
            for side, checkout in sides.items():  # interleaved: the machine's load falls on both alike
                runs[side].append(measure(checkout, url, run, Path(tmp) / f"{side}.html"))
    best = {side: {k: min(r[k] for r in rs) for k in rs[0]} for side, rs in runs.items()}
    now = best["this"]
    print(
        f"report of {now['events']:,.0f} events ({now['rounds']:.0f} rounds, {now['causes']:.0f} causes, "
        f"{now['bytes'] / 1e6:.1f} MB), best of {args.repeat}; read the log with texts: {now['read']:.2f} s"
    )
    for key, what in (
        ("load_run", "load_run"),
        ("whole", "whole report (a new process)"),
        ("render", "render again (figures and HTML)"),
        ("html", "the page alone (no figure)"),
    ):
        line = f"  {what:<34} {now[key]:6.2f} s = {now[key] / now['read']:.2f}x reading the log"
        if "before" in best:
            line += f"   before: {best['before'][key]:6.2f} s ({now[key] / best['before'][key]:.2f}x)"
        print(line)
    if "before" in best:
        print(f"  page size: {now['bytes']:,.0f} bytes, before {best['before']['bytes']:,.0f}")
    print(f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs while measuring)")


if __name__ == "__main__":
    main()
