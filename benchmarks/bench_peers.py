"""The store's append against the ``eventsourcing`` library's recorders (a script, not a test).

The in-memory recorder (``memory://``) is timed beside them, its ratio against diagevo's SQLite.
Same machine, same run, same payloads (``bench_store.realistic_events``: one run, the data as the
recorders' ``state``), batches of 1000, best of 3: diagevo's ``EventStore.append`` (hash chain,
idempotency, texts as artifacts, commit order) against ``SQLiteAggregateRecorder`` /
``SQLiteApplicationRecorder`` and ``PostgresAggregateRecorder`` / ``PostgresApplicationRecorder``.
eventsourcing is a benchmark-only extra: ``pip install -e .[bench]``.

    python benchmarks/bench_peers.py [--events 20000] [--pg postgresql://postgres@127.0.0.1:5432]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import _drop_pg_database, _pg_database, realistic_events  # noqa: E402

from diagevo.events.store import EventStore  # noqa: E402


def _batches(items: list, size: int = 1000) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def time_diagevo(url: str, events: list) -> float:
    with EventStore(url) as store:
        t0 = time.perf_counter()
        for b in _batches(events):
            store.append(b)
        return time.perf_counter() - t0


def time_recorder(recorder, events: list) -> float:  # noqa: ANN001
    """Like for like with ``EventStore.append``, which serialises each event's data itself: the
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


def _default_synchronous() -> str:
    """SQLite's ``synchronous`` level for a connection that does not set it: what the
    eventsourcing recorders commit with (the store sets FULL itself)."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    try:
        level = conn.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        conn.close()
    return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[level]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432", help="PostgreSQL server (trust auth); '' to skip")
    args = ap.parse_args(argv)
    from eventsourcing.sqlite import SQLiteAggregateRecorder, SQLiteApplicationRecorder, SQLiteDatastore

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(3):
            events = list(realistic_events(f"peers-{rep}", args.events, seed=rep))
            n = len(events)
            sql = {"diagevo EventStore": lambda rep=rep, events=events: time_diagevo(f"sqlite:///{Path(tmp) / f'd{rep}.db'}", events)}
            for label, cls in (("SQLiteAggregateRecorder", SQLiteAggregateRecorder), ("SQLiteApplicationRecorder", SQLiteApplicationRecorder)):
                def run(cls=cls, label=label, rep=rep, events=events) -> float:  # noqa: ANN001
                    ds = SQLiteDatastore(str(Path(tmp) / f"{label}{rep}.db"), originator_id_type="text")
                    rec = cls(ds)
                    rec.create_table()
                    return time_recorder(rec, events)
                sql[label] = run
            for label, fn in sql.items():
                results.setdefault("sqlite", {})[label] = min(results.get("sqlite", {}).get(label, 1e9), fn() / n)
            # the in-memory recorder: the same serialisation and chain, no database (ratios against SQLite's)
            mem = time_diagevo(f"memory://peers-{rep}", events) / n
            results.setdefault("memory", {})["diagevo InMemoryRecorder"] = min(
                results.get("memory", {}).get("diagevo InMemoryRecorder", 1e9), mem)
            if args.pg:
                from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder, PostgresDatastore

                for label, cls in (("diagevo EventStore", None), ("PostgresAggregateRecorder", PostgresAggregateRecorder), ("PostgresApplicationRecorder", PostgresApplicationRecorder)):
                    name, url = _pg_database(args.pg)
                    try:
                        if cls is None:
                            seconds = time_diagevo(url, events)
                        else:
                            host_port = args.pg.split("@", 1)[1]
                            host, port = host_port.split(":")
                            ds = PostgresDatastore(name, host, port, "postgres", "", originator_id_type="text")
                            rec = cls(ds)
                            rec.create_table()
                            seconds = time_recorder(rec, events)
                            ds.close()
                    finally:
                        _drop_pg_database(args.pg, name)
                    results.setdefault("postgresql", {})[label] = min(results.get("postgresql", {}).get(label, 1e9), seconds / n)
    print(f"append {args.events:,} realistic events in batches of 1000, best of 3; payloads serialised in the timing")
    print(f"SQLite: all WAL; diagevo synchronous=FULL, eventsourcing synchronous={_default_synchronous()} (library default)")
    print("PostgreSQL: both the server's synchronous_commit")
    print(f"{'backend':<12}{'writer':<30}{'events/s':>10}{'diagevo / it':>14}")
    for backend, rows in results.items():
        ours = rows.get("diagevo EventStore", results["sqlite"]["diagevo EventStore"])  # memory: against SQLite's
        for label, per_event in rows.items():
            ratio = "" if label == "diagevo EventStore" else f"{per_event / ours:.2f}x"
            print(f"{backend:<12}{label:<30}{1 / per_event:>10,.0f}{ratio:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
