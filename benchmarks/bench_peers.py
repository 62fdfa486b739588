"""The store's append against the ``eventsourcing`` library's recorders and raw inserts (a script, not a test).

Same machine, same run, same payloads (``bench_store.realistic_events``: one run, the data as the
recorders' ``state``), batches of 1000, best of 3: diagevo's ``append`` (hash chain, idempotency,
texts named by their sha256 and kept in the row, commit order; on PostgreSQL the database checks
every row's chain) against

- SQLite: ``SQLiteAggregateRecorder`` / ``SQLiteApplicationRecorder``, and raw ``sqlite3``
  executemany of the very rows diagevo stored into an identical schema (the same Alembic
  migrations, WAL, synchronous=FULL, one ``BEGIN IMMEDIATE`` ... ``COMMIT`` per batch);
- PostgreSQL: ``PostgresAggregateRecorder`` / ``PostgresApplicationRecorder``, and raw ``COPY`` of
  the very rows diagevo stored there, one transaction per batch (the chain check included, as
  the database runs it for any insert);
- with ``--baseline DIR`` (a checkout of an earlier diagevo, e.g. ``git worktree add DIR REV``):
  that diagevo's append, timed in a process of its own between ours, on both backends.

Ratios are "diagevo / it": diagevo's events/s divided by the other writer's (above 1: diagevo is
faster). diagevo's in-memory recorder (``memory://``, no database) is timed too and shown as a
multiple of diagevo's SQLite events/s. ``--runs N`` repeats the whole measurement N times, then
prints each ratio's range over the runs and whether the floors hold in every run: SQLite no
slower than the baseline diagevo, PostgreSQL at least 1.0x each eventsourcing recorder. The exit
status is 0 either way (a report). eventsourcing is a benchmark-only extra: ``pip install -e .[bench]``.

    python benchmarks/bench_peers.py [--events 20000] [--runs 3]
        [--pg postgresql://postgres@127.0.0.1:5432] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import (  # noqa: E402
    _bench_raw_pg,
    _bench_raw_sqlite,
    _drop_pg_database,
    _pg_database,
    realistic_events,
)

from diagevo.log import open_log
from diagevo.log.sql import EVENT_COLUMNS
from diagevo.schemas import EventIn

BATCH = 1000
REPEATS = 3  # each run is the best of this many workloads

DIAGEVO = "diagevo append"
BEFORE = "diagevo --baseline append"
MEMORY = "diagevo InMemoryRecorder"
RAW_SQLITE = "raw sqlite3 executemany"
RAW_PG = "raw COPY"
SQLITE_PEERS = ("SQLiteAggregateRecorder", "SQLiteApplicationRecorder")
PG_PEERS = ("PostgresAggregateRecorder", "PostgresApplicationRecorder")

Grouped = list[tuple[list[tuple[Any, ...]], list[tuple[str, str]]]]  # per batch: (events rows, artifacts rows: none)
Best = dict[str, dict[str, float]]  # backend -> writer -> best seconds per event


def _batches(items: list[EventIn], size: int = BATCH) -> list[list[EventIn]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def time_diagevo(url: str, events: list[EventIn]) -> float:
    """Seconds for ``Recorder.append`` of ``events`` in batches (opening and migrating outside the timing)."""
    with open_log(url) as store:
        t0 = time.perf_counter()
        for b in _batches(events):
            store.append(b)
        return time.perf_counter() - t0


def time_recorder(recorder: Any, events: list[EventIn]) -> float:
    """Like for like with ``Recorder.append``, which serialises each event's data itself: the
    recorders' payloads are serialised (same canonical JSON) inside the timing too."""
    from eventsourcing.persistence import StoredEvent

    originator = f"run-{uuid.uuid4().hex}"
    dumps = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode
    t0 = time.perf_counter()
    version = 0
    for b in _batches(events):
        stored = []
        for e in b:
            version += 1
            stored.append(StoredEvent(originator, version, e.type, dumps(e.data).encode()))
        recorder.insert_events(stored)
    return time.perf_counter() - t0


# --- the rows diagevo stored, for the raw inserts ------------------------------------------------


def _group_by_batch(events: list[tuple[Any, ...]], sizes: list[int]) -> Grouped:
    """The store's rows (every ``events`` column, in ``seq`` order) split into its batches; an
    event count that does not add up is an error rather than a lighter raw insert."""
    if len(events) != sum(sizes):
        raise RuntimeError(f"the store holds {len(events)} events, the batches {sum(sizes)}")
    out: Grouped = []
    i = 0
    for size in sizes:
        out.append((events[i : i + size], []))
        i += size
    return out


def sqlite_rows(path: Path, sizes: list[int]) -> Grouped:
    conn = sqlite3.connect(path)
    try:
        events = conn.execute(f"SELECT {EVENT_COLUMNS} FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()
    return _group_by_batch(events, sizes)


def pg_rows(url: str, sizes: list[int]) -> Grouped:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        events = conn.execute(f"SELECT {EVENT_COLUMNS} FROM events ORDER BY seq").fetchall()
    return _group_by_batch(events, sizes)


# --- an earlier diagevo, in a process of its own --------------------------------------------------

_BASELINE_TIMER = r"""
import json, sys, time
from diagevo.log import open_log
from diagevo.schemas import validate_event
url, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
events = [validate_event(json.loads(line)) for line in open(path)]
store = open_log(url)
t0 = time.perf_counter()
for i in range(0, len(events), size):
    store.append(events[i : i + size])
print(time.perf_counter() - t0)
store.close()
"""


def time_baseline(baseline: Path, url: str, events_file: Path) -> float:
    """Seconds for the baseline diagevo's append of the same events in the same batches."""
    env = {**os.environ, "PYTHONPATH": str(baseline)}
    out = subprocess.run(
        [sys.executable, "-c", _BASELINE_TIMER, url, str(events_file), str(BATCH)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=baseline,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _events_file(tmp: Path, rep: int, events: list[EventIn]) -> Path:
    path = tmp / f"events-{rep}.jsonl"
    if not path.exists():
        path.write_text("".join(json.dumps(e.line()) + "\n" for e in events))
    return path


# --- one run --------------------------------------------------------------------------------------


def _keep_best(best: Best, backend: str, writer: str, seconds: float, n: int) -> None:
    rows = best.setdefault(backend, {})
    rows[writer] = min(rows.get(writer, float("inf")), seconds / n)


def _sqlite_workload(tmp: Path, rep: int, events: list[EventIn], best: Best, baseline: Path | None) -> None:
    from eventsourcing.sqlite import SQLiteAggregateRecorder, SQLiteApplicationRecorder, SQLiteDatastore

    n, sizes = len(events), [len(b) for b in _batches(events)]
    ours = tmp / f"diagevo-{rep}.db"
    if baseline is not None:  # before ours and after it: interleaved
        _keep_best(
            best,
            "sqlite",
            BEFORE,
            time_baseline(baseline, f"sqlite:///{tmp / f'before-a-{rep}.db'}", _events_file(tmp, rep, events)),
            n,
        )
    _keep_best(best, "sqlite", DIAGEVO, time_diagevo(f"sqlite:///{ours}", events), n)
    if baseline is not None:
        _keep_best(
            best,
            "sqlite",
            BEFORE,
            time_baseline(baseline, f"sqlite:///{tmp / f'before-b-{rep}.db'}", _events_file(tmp, rep, events)),
            n,
        )
    for label, cls in zip(SQLITE_PEERS, (SQLiteAggregateRecorder, SQLiteApplicationRecorder), strict=True):
        recorder = cls(SQLiteDatastore(str(tmp / f"{label}-{rep}.db"), originator_id_type="text"))
        recorder.create_table()
        _keep_best(best, "sqlite", label, time_recorder(recorder, events), n)
    grouped = sqlite_rows(ours, sizes)
    _keep_best(best, "sqlite", RAW_SQLITE, _bench_raw_sqlite(f"sqlite:///{tmp / f'raw-{rep}.db'}", grouped), n)
    # the in-memory recorder: the same serialisation and chain, no database
    _keep_best(best, "memory", MEMORY, time_diagevo(f"memory://peers-{uuid.uuid4().hex}", events), n)
    for f in tmp.glob(f"*-{rep}.db*"):
        f.unlink()


def _pg_workload(admin: str, tmp: Path, rep: int, events: list[EventIn], best: Best, baseline: Path | None) -> None:
    from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder, PostgresDatastore

    n, sizes = len(events), [len(b) for b in _batches(events)]
    host, port = admin.split("@", 1)[1].split(":")
    if baseline is not None:
        name, url = _pg_database(admin)
        try:
            _keep_best(best, "postgresql", BEFORE, time_baseline(baseline, url, _events_file(tmp, rep, events)), n)
        finally:
            _drop_pg_database(admin, name)
    name, url = _pg_database(admin)
    try:
        _keep_best(best, "postgresql", DIAGEVO, time_diagevo(url, events), n)
        grouped = pg_rows(url, sizes)
    finally:
        _drop_pg_database(admin, name)
    for label, cls in zip(PG_PEERS, (PostgresAggregateRecorder, PostgresApplicationRecorder), strict=True):
        name, _ = _pg_database(admin)
        try:
            datastore = PostgresDatastore(name, host, port, "postgres", "", originator_id_type="text")
            recorder = cls(datastore)
            recorder.create_table()
            _keep_best(best, "postgresql", label, time_recorder(recorder, events), n)
            datastore.close()
        finally:
            _drop_pg_database(admin, name)
    name, url = _pg_database(admin)
    try:
        _keep_best(best, "postgresql", RAW_PG, _bench_raw_pg(url, grouped), n)
    finally:
        _drop_pg_database(admin, name)


def measure(tmp: Path, workloads: list[list[EventIn]], pg: str, baseline: Path | None) -> Best:
    """One run: each writer's best seconds per event over the workloads, by backend (SQLite,
    PostgreSQL when ``pg`` names a server, then the in-memory recorder)."""
    best: Best = {"sqlite": {}, "postgresql": {}, "memory": {}} if pg else {"sqlite": {}, "memory": {}}
    for rep, events in enumerate(workloads):
        _sqlite_workload(tmp, rep, events, best, baseline)
        if pg:
            _pg_workload(pg, tmp, rep, events, best, baseline)
    return best


def ratios(best: Best) -> dict[tuple[str, str], float]:
    """(backend, writer) -> diagevo's events/s there / the writer's; ("memory", MEMORY) -> the
    in-memory recorder's events/s / diagevo's SQLite events/s."""
    out = {}
    for backend, rows in best.items():
        if backend == "memory":
            out[backend, MEMORY] = best["sqlite"][DIAGEVO] / rows[MEMORY]
            continue
        for writer, per_event in rows.items():
            if writer != DIAGEVO:
                out[backend, writer] = per_event / rows[DIAGEVO]
    return out


# --- the report ---------------------------------------------------------------------------------


def print_run(best: Best) -> None:
    r = ratios(best)
    print(f"{'backend':<12}{'writer':<30}{'events/s':>10}{'diagevo / it':>14}")
    for backend, rows in best.items():
        for writer, per_event in rows.items():
            if backend == "memory":
                note = f"   ({r[backend, writer]:.2f}x diagevo's SQLite events/s)"
            else:
                note = "" if writer == DIAGEVO else f"{r[backend, writer]:>13.2f}x"
            print(f"{backend:<12}{writer:<30}{1 / per_event:>10,.0f}{note}")


def _targets(
    pg: bool, baseline: bool
) -> list[tuple[str, Callable[[dict[tuple[str, str], float]], float] | None, float]]:
    """(floor, the ratio it is judged on for one run, or None when not measured, threshold)."""
    return [
        ("SQLite >= 1.0x the baseline diagevo", (lambda r: r["sqlite", BEFORE]) if baseline else None, 1.0),
        (
            "PostgreSQL >= 1.0x every eventsourcing recorder",
            (lambda r: min(r["postgresql", w] for w in PG_PEERS)) if pg else None,
            1.0,
        ),
    ]


def print_summary(runs: list[dict[tuple[str, str], float]], pg: bool, baseline: bool) -> None:
    print(f"\nover {len(runs)} run(s), each the best of {REPEATS}: min .. max")
    for key in runs[0]:
        values = [r[key] for r in runs]
        what = "in-memory / diagevo's SQLite" if key[0] == "memory" else f"diagevo / {key[1]}"
        print(f"{key[0]:<12}{what:<48}{min(values):>6.2f}x .. {max(values):.2f}x")
    print("floors (met: in every run)")
    for label, judged, threshold in _targets(pg, baseline):
        if judged is None:
            print(f"  {label:<48}not measured (--pg '' or no --baseline)")
            continue
        values = [judged(r) for r in runs]
        met = sum(v >= threshold for v in values)
        verdict = "met" if met == len(values) else "not met"
        print(f"  {label:<48}{verdict:<9}(worst {min(values):.2f}x, best {max(values):.2f}x; {met}/{len(values)} runs)")


def _default_synchronous() -> str:
    """SQLite's ``synchronous`` level for a connection that does not set it: what the
    eventsourcing recorders commit with (the store sets FULL itself)."""
    conn = sqlite3.connect(":memory:")
    try:
        level = conn.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        conn.close()
    return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[level]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000, help="events per workload (whole rounds, so about this many)")
    ap.add_argument("--runs", type=int, default=3, help="repeat the whole measurement this many times")
    ap.add_argument(
        "--pg", default="postgresql://postgres@127.0.0.1:5432", help="PostgreSQL server (trust auth); '' to skip"
    )
    ap.add_argument("--baseline", type=Path, help="a checkout of an earlier diagevo to time beside this one")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    workloads = [list(realistic_events(f"peers-{rep}", args.events, seed=rep)) for rep in range(REPEATS)]
    print(
        f"append {args.events:,} realistic events in batches of {BATCH}, best of {REPEATS}; payloads serialised "
        "in the timing"
    )
    print(
        "SQLite: all WAL; diagevo and raw executemany synchronous=FULL, eventsourcing "
        f"synchronous={_default_synchronous()} "
        "(library default)"
    )
    if args.pg:
        print("PostgreSQL: all the server's synchronous_commit")
    print("diagevo / it: diagevo's events/s divided by the writer's (above 1: diagevo is faster)")
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench_peers_") as d:
        for i in range(args.runs):
            best = measure(Path(d), workloads, args.pg, args.baseline)
            print(f"\nrun {i + 1}/{args.runs}")
            print_run(best)
            runs.append(ratios(best))
    print_summary(runs, bool(args.pg), args.baseline is not None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
