"""Audits at scale: the read commands a user runs to ask the log why, timed as whole processes on
a 1,000,000-event log, cold and right after a large append (a script, not a test).

The commands: ``memory why`` of the realistic run's busiest cause and of a cause attributed
``--hot`` times (30,000 by default: a run of its own beside the realistic one), ``memory events
--cause`` of each, ``memory replay`` of a middle round and ``memory stats``; ``diagevo --help`` is
the floor every command pays. Each runs as ``python -m diagevo.cli.app ... --run RUN`` in a new
process (imports from cached bytecode, as installed) and is timed by the wall clock:

- cold: its first run on a fresh copy of the log, as a writer left it (its views saved);
- after append: its first run right after ``--append`` more events of the realistic run (whole
  rounds, committed) were appended and the views brought up to date, as ``memory ingest`` does;
- best: the best of 3 runs after that.

The target: every command within 1 s. With ``--baseline DIR`` (a checkout of an earlier diagevo,
e.g. ``git worktree add DIR REV``) every step is done by that diagevo too, on its own copy of the
same log (taken down to its revision), interleaved with this one: the ratios are this diagevo's
time over the baseline's. The log is ``--db FILE`` (a SQLite file, copied, never written), else
one built by ``bench_store.build_log`` and kept under ``--work``. The exit status is 0 either way
(a report).

    python benchmarks/bench_audits.py [--db FILE] [--events 1000000] [--hot 30000]
        [--append 95000] [--baseline DIR] [--work /tmp/diagevo-audits]
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_reads import hot_run  # noqa: E402
from bench_store import build_log, realistic_events  # noqa: E402

from diagevo.catalog import RoundCommitted
from diagevo.interchange import encode_line
from diagevo.log import open_log
from diagevo.log.revision import HEAD_REVISION
from diagevo.log.schema import _alembic_config, upgrade
from diagevo.views.caches import refresh

TARGET_S = 1.0

_APPEND = """
import json, sys
from diagevo.log import open_log
from diagevo.schemas import validate_event
from diagevo.views.caches import refresh
url, run, lines = sys.argv[1:4]
with open(lines) as f:
    events = [validate_event(json.loads(line)) for line in f]
with open_log(url) as store:
    for i in range(0, len(events), 5000):
        store.append(events[i : i + 5000])
    refresh(store, run)
"""


def prepared_log(args: argparse.Namespace) -> tuple[Path, str, int]:
    """A copy of the log at this diagevo's revision with its views saved and the hot run beside
    it (kept under ``--work`` for later runs): (file, run, events of the run)."""
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"source-{HEAD_REVISION}.db"
    if not path.exists():
        partial = work / "partial.db"
        if args.db is not None:
            shutil.copyfile(args.db, partial)
            upgrade(f"sqlite:///{partial}")
        else:
            build_log(f"sqlite:///{partial}", args.events)
        with open_log(f"sqlite:///{partial}") as store:
            refresh(store, store.runs()[0])  # the views a writer leaves (build_log saves none)
        hot_run(f"sqlite:///{partial}", args.hot)
        partial.rename(path)
    with open_log(f"sqlite:///{path}") as store:
        run = store.runs()[0]
        return path, run, store.last_seq(run)


def appended_lines(work: Path, run: str, stored: int, more: int) -> Path:
    """The next ``more`` events of the realistic run (whole rounds), one JSON line each."""
    path = work / f"append-{stored}-{more}.jsonl"
    if not path.exists():
        with path.open("w") as f:
            for ev in itertools.islice(realistic_events(run, stored + more), stored, None):
                f.write(encode_line(ev.line()))
    return path


def busiest_cause(path: Path, run: str) -> tuple[str, int]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT cause_id, COUNT(*) FROM events WHERE run_id = ? AND type = 'failure.attributed' "
            "GROUP BY cause_id ORDER BY 2 DESC LIMIT 1",
            (run,),
        ).fetchone()
    finally:
        conn.close()


class Diagevo:
    """One diagevo (this checkout, or a baseline's) with its own copy of the log."""

    def __init__(self, name: str, checkout: Path, db: Path) -> None:
        self.name, self.checkout, self.db = name, checkout, db
        self.env = {**os.environ, "PYTHONPATH": str(checkout), "COLUMNS": "200"}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules load from cached bytecode

    def time(self, args: list[str]) -> tuple[float, float]:
        """Wall-clock and CPU seconds (user + system: what other jobs on the machine disturb least)."""
        cmd = [sys.executable, "-m", "diagevo.cli.app", *args]
        if args != ["--help"]:
            cmd += ["--db", f"sqlite:///{self.db}"]
        before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        done = subprocess.run(cmd, env=self.env, cwd=self.checkout, capture_output=True, text=True)
        took, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{self.name}: {' '.join(args)} failed: {done.stderr.strip()[-400:]}")
        return took, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime

    def append(self, run: str, lines: Path) -> float:
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", _APPEND, f"sqlite:///{self.db}", run, str(lines)],
            env=self.env,
            cwd=self.checkout,
            check=True,
        )
        return time.perf_counter() - t0


def baseline_copy(source: Path, baseline: Path, dest: Path) -> None:
    """The log taken down to the baseline's revision (this diagevo's migrations know the way)."""
    from alembic import command
    from sqlalchemy import create_engine

    found = subprocess.run(
        [sys.executable, "-c", "from diagevo.log.revision import HEAD_REVISION; print(HEAD_REVISION)"],
        env={**os.environ, "PYTHONPATH": str(baseline)},
        cwd=baseline,
        capture_output=True,
        text=True,
        check=True,
    )
    shutil.copyfile(source, dest)
    engine = create_engine(f"sqlite:///{dest}")
    with engine.begin() as conn:
        cfg = _alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, found.stdout.strip())
    engine.dispose()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, help="a SQLite file holding a realistic log (copied, never written)")
    ap.add_argument("--events", type=int, default=1_000_000, help="events of the log built without --db")
    ap.add_argument("--hot", type=int, default=30_000, help="attributions of the hot run's cause")
    ap.add_argument("--append", type=int, default=95_000, help="events appended before the second timing")
    ap.add_argument("--baseline", type=Path, help="a checkout of an earlier diagevo to time beside this one")
    ap.add_argument("--work", type=Path, default=Path("/tmp/diagevo-audits"), help="where the copies are kept")
    args = ap.parse_args(argv)
    source, run, stored = prepared_log(args)
    lines = appended_lines(args.work, run, stored, args.append)
    cause, attributions = busiest_cause(source, run)
    hot = f"hot-{args.hot}"
    with open_log(f"sqlite:///{source}") as store:
        middle = store.count(run, types=(RoundCommitted,)) // 2
    this = Diagevo("this", HERE.parent, args.work / "this.db")
    shutil.copyfile(source, this.db)
    sides = [this]
    if args.baseline is not None:
        before = Diagevo("baseline", args.baseline.resolve(), args.work / "baseline.db")
        baseline_copy(source, before.checkout, before.db)
        sides.append(before)
    commands = {
        "--help (floor)": ["--help"],
        f"why {cause} ({attributions:,} attributions)": ["memory", "why", cause, "--run", run],
        f"why H0 ({args.hot:,} attributions)": ["memory", "why", "H0", "--run", hot],
        f"events --cause {cause}": ["memory", "events", "--cause", cause, "--run", run],
        "events --cause H0": ["memory", "events", "--cause", "H0", "--run", hot],
        f"replay --round {middle}": ["memory", "replay", "--round", str(middle), "--run", run],
        "stats": ["memory", "stats", "--run", run],
    }
    for side in sides:
        side.time(["--help"])  # writes the bytecode
    times: dict[tuple[str, str, str], tuple[float, float]] = {}
    for name, cmd in commands.items():
        for side in sides:
            times[side.name, "cold", name] = side.time(cmd)
    for side in sides:
        print(f"{side.name}: appended {args.append:,} events in {side.append(run, lines):.1f} s", flush=True)
    for name, cmd in commands.items():
        for side in sides:
            times[side.name, "after append", name] = side.time(cmd)
    for name, cmd in commands.items():
        for side in sides:
            runs = [side.time(cmd) for _ in range(3)]
            times[side.name, "best", name] = (min(w for w, _ in runs), min(c for _, c in runs))
    print(f"log: {stored:,} events of run {run} (+ run {hot}); seconds per command, a new process each")
    met = 0
    for clock, which in (("wall", 0), ("CPU", 1)):
        steps = ("cold", "after append", "best")
        head = "".join(f"{s:>14}" for s in steps)
        if len(sides) > 1:
            head += "".join(f"{'base ' + s:>19}" for s in steps) + "".join(f"{'ratio ' + s:>19}" for s in steps)
        print(f"\n{clock + ' clock':<36}{head}" + (f"  <= {TARGET_S:g} s" if clock == "wall" else ""))
        for name in commands:
            ours = [times["this", s, name][which] for s in steps]
            row = "".join(f"{t:>13.2f}s" for t in ours)
            if len(sides) > 1:
                theirs = [times["baseline", s, name][which] for s in steps]
                row += "".join(f"{t:>18.2f}s" for t in theirs)
                row += "".join(f"{a / b:>18.2f}x" for a, b in zip(ours, theirs, strict=True))
            if clock == "wall":
                passed = max(ours) <= TARGET_S
                met += passed
                row += f"  {'ok' if passed else 'MISSED'}"
            print(f"{name:<36}{row}")
    print(f"targets met: {met} of {len(commands)} (a report: the exit status is 0 either way)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
