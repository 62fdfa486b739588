"""Event-store benchmark (a script, not a test).

(a) batched append throughput of ``Recorder.append`` against raw ``sqlite3`` executemany of the
    very same rows into an identical schema (same migration, same pragmas), in the same run;
(b) reading a 1,000,000-event log back with ``iter_rows``: wall time and peak memory, measured in
    a fresh process so that building the log does not count;
(c) what durability costs: the same appends with SQLite's default ``synchronous = FULL`` (a
    committed event survives a power loss) and with ``?synchronous=normal`` (it survives a crash
    of the process only), in batches of 1000 and in the small batches the training loop appends;
(d) where an append's time goes: the store's Python alone, and raw executemany of its rows into
    the full schema, without the read indexes, and without the artifact rows.

``build_log(url, n_events)`` builds a realistic log (question.generated / question.scored /
failure.recorded / failure.diagnosed with small texts, plus attributions, new nodes and causes,
promotions and reactivations, one ``round.committed`` per round) that the memory fold accepts;
other benchmarks reuse it.

    python benchmarks/bench_store.py [--events 1000000] [--append-events 100000] [--db URL]
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import random
import resource
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from diagevo.catalog import CATALOG
from diagevo.log import open_log
from diagevo.log.schema import upgrade
from diagevo.log.sql import EVENT_COLUMNS
from diagevo.memory.deciders import promotion_scores
from diagevo.schemas import EventIn, validate_event

WORDS = (
    "let the number of apples be x then twice that plus seven equals the total so we subtract "
    "seven and divide by two which gives the answer after checking units and the remainder"
).split()


def _text(rng: random.Random, tag: str, n_words: int) -> str:
    return f"[{tag}] " + " ".join(rng.choices(WORDS, k=n_words))


@dataclass
class _World:
    """Just enough memory state to emit a log that respects the fold's invariants."""

    rng: random.Random
    active: list[str] = field(default_factory=list)
    mastered: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    node_of: dict[str, str] = field(default_factory=dict)


THETA_UP = Fraction(7, 10)  # the paper's θ_up, which the log's config leaves at its default


def _round_events(w: _World, run: str, rnd: int, questions: int) -> Iterator[tuple[str, dict[str, Any]]]:
    rng = w.rng
    yield "round.started", {}
    # the trainer's bookkeeping: a checkpoint and a phase.completed per phase, promotions.decided
    yield "checkpoint.written", {"path": f"/runs/{run}/round{rnd:03d}-challenger", "phase": "challenger"}
    yield "phase.completed", {"phase": "challenger", "seconds": round(rng.uniform(50, 70), 3)}
    qids = []
    targets: dict[str, str | None] = {}
    mastering = {cid for cid in w.active if rng.random() < 0.1}  # causes whose questions the solver now answers
    for i in range(questions):
        qid = f"q{rnd}-{i}"
        qids.append(qid)
        active = rng.choice(w.active) if w.active and rng.random() < 0.7 else None
        targets[qid] = active
        mastered = rng.choice(w.mastered) if active and w.mastered and rng.random() < 0.3 else None
        mode = "stitched" if mastered else "targeted" if active else "free"
        node = w.node_of[active] if active else None
        yield "question.generated", {
            "question_id": qid, "mode": mode, "active_cause": active, "mastered_cause": mastered,
            "text": _text(rng, qid, 24), "node": node,
        }  # fmt: skip
    kept: list[str] = []  # the retained questions: the solver's failures are theirs
    scores: list[tuple[str | None, float]] = []
    for qid in qids:
        p1 = rng.uniform(0.75, 1) if targets[qid] in mastering else rng.random()
        scores.append((targets[qid], round(p1, 4)))
        if 0.25 <= p1 <= 0.75:
            kept.append(qid)
        yield "question.scored", {
            "question_id": qid, "n": 12, "p1": round(p1, 4), "p2": round(rng.random() * p1, 4),
            "pseudo_label": str(rng.randint(0, 999)), "retained": 0.25 <= p1 <= 0.75,
        }  # fmt: skip
    yield (
        "phase.completed",
        {
            "phase": "construct",
            "seconds": round(rng.uniform(20, 30), 3),
            "stats": {"questions": len(qids), "retained": len(kept)},
        },
    )
    promoted = []
    for cid, (acc, n) in promotion_scores(scores).items():  # Eq. 5-6 on the round's scores, θ_up = 0.7
        if acc >= THETA_UP:
            w.active.remove(cid)
            w.mastered.append(cid)
            promoted.append(cid)
            yield "cause.promoted", {"cause_id": cid, "acc": float(acc), "n_candidates": n}
    yield "promotions.decided", {"promoted": promoted, "candidates": len(promoted)}
    yield "checkpoint.written", {"path": f"/runs/{run}/round{rnd:03d}-solver", "phase": "solver"}
    yield (
        "phase.completed",
        {"phase": "solver", "seconds": round(rng.uniform(80, 100), 3), "stats": {"failures": len(qids) // 2}},
    )
    for j, qid in enumerate(rng.choices(kept, k=len(qids) // 2) if kept else ()):
        fid = f"f{rnd}-{j}"
        yield "failure.recorded", {
            "failure_id": fid, "question_id": qid,
            "response": _text(rng, fid + "/response", 36), "reference": _text(rng, fid + "/reference", 36),
        }  # fmt: skip
        if w.active or w.mastered:
            if rng.random() < 0.6:
                pool_active = rng.random() < 0.9 or not w.mastered
                cause = rng.choice(w.active) if pool_active and w.active else rng.choice(w.mastered or w.active)
                via = "recurrence" if rng.random() < 0.8 else "dedup"  # dedup: a new description, found to be it
                yield "failure.diagnosed", {
                    "failure_id": fid, "matched_cause": cause if via == "recurrence" else None,
                    "error_cause": None if via == "recurrence" else _text(rng, fid + "/cause", 14),
                    "model": "sim-diagnostician", "raw": _text(rng, fid + "/raw", 20),
                }  # fmt: skip
                if cause in w.mastered:
                    w.mastered.remove(cause)
                    w.active.append(cause)
                    yield "cause.reactivated", {"cause_id": cause, "failure_id": fid}
                yield "failure.attributed", {
                    "failure_id": fid, "cause_id": cause, "via": via, "similarity": round(rng.uniform(0.7, 1), 3),
                }  # fmt: skip
                continue
        if rng.random() < 0.01 or not w.active:  # a new cause, sometimes under a new node
            desc = _text(rng, "cause", 14)
            yield "failure.diagnosed", {
                "failure_id": fid, "matched_cause": None, "error_cause": desc,
                "model": "sim-diagnostician", "raw": _text(rng, fid + "/raw", 20),
            }  # fmt: skip
            if not w.nodes or rng.random() < 0.3:
                nid = f"n{len(w.nodes)}"
                w.nodes.append(nid)
                yield "node.created", {"node_id": nid, "label": f"skill {nid}"}
            cid = f"c{len(w.node_of)}"
            w.node_of[cid] = rng.choice(w.nodes)
            w.active.append(cid)
            yield "cause.created", {"cause_id": cid, "node_id": w.node_of[cid], "description": desc, "failure_id": fid}
    yield "phase.completed", {"phase": "diagnose", "seconds": round(rng.uniform(30, 40), 3), "dedup_truncated": 0}
    yield "round.committed", {}


def wire_event(type_name: str, run: str, round: int, event_id: str, **data: Any) -> EventIn:  # noqa: A002
    """An event as the interchange format spells it, validated as ingest validates a line (the
    benchmarks write logs of the wire format)."""
    return validate_event({"type": type_name, "run": run, "round": round, "event_id": event_id, "data": data})


def unvalidated(type_: str, run: str, round: int, event_id: str, data: dict[str, Any]) -> EventIn:  # noqa: A002
    """An event built without validation, its stored form ``data`` as given (defaults filled in by
    the caller): the benchmarks' generators, whose first round alone is checked against
    ``validate_event``, build millions."""
    cls = CATALOG[type_]
    return EventIn(run, round, event_id, cls.model_construct(**data), cls.class_version, data)


@cache
def _defaults(type_: str) -> dict[str, Any]:
    """Optional data fields with their defaults, as the log stores a validated event's (a field
    stored only when set is left out)."""
    cls = CATALOG[type_]
    defaults = {n: f.get_default(call_default_factory=True) for n, f in cls.model_fields.items() if not f.is_required()}
    return {n: v for n, v in defaults.items() if not (n in cls.stored_if_set and v is None)}


def realistic_events(run: str, n_events: int, *, seed: int = 0, questions: int = 3000) -> Iterator[EventIn]:
    """About ``n_events`` events (whole rounds) of one run; the first round is schema-validated."""
    w = _World(random.Random(seed))
    k = 0

    def make(rnd: int, type_: str, data: dict[str, Any]) -> EventIn:
        nonlocal k
        k += 1
        raw = {"type": type_, "run": run, "round": rnd, "event_id": f"{run}:{k}", "data": data}
        if rnd <= 1:  # validated at the class's version: the generator must produce what validate_event would
            raw["schema_version"] = CATALOG[type_].class_version
            return validate_event(raw)
        return unvalidated(type_, run, rnd, f"{run}:{k}", {**_defaults(type_), **data})

    yield make(0, "run.started", {"config": {"k": 0.5}, "seed": seed})
    rnd = 0
    while k < n_events:
        rnd += 1
        for type_, data in _round_events(w, run, rnd, questions):
            yield make(rnd, type_, data)


def _chunks(it: Iterator[EventIn], size: int) -> Iterator[list[EventIn]]:
    chunk: list[EventIn] = []
    for ev in it:
        chunk.append(ev)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def build_log(url: str, n_events: int = 1_000_000, *, run: str | None = None, seed: int = 0, batch: int = 5000) -> str:
    """Append a realistic log of about ``n_events`` events to ``url``; returns its run id."""
    run = run or f"bench-{seed}-{n_events}"
    with open_log(url) as store:
        for chunk in _chunks(realistic_events(run, n_events, seed=seed), batch):
            store.append(chunk)
    return run


# --- (a) append throughput ------------------------------------------------------------------


def _sqlite_path(url: str) -> str:
    return str(make_url(url).database)


def _bench_store_append(url: str, batches: list[list[EventIn]]) -> float:
    with open_log(url) as store:
        t0 = time.perf_counter()
        for b in batches:
            store.append(b)
        return time.perf_counter() - t0


def _stored_rows(url: str, batches: list[list[EventIn]]) -> list[tuple[list[tuple], list[tuple]]]:
    """The exact rows the store wrote, grouped by batch: (events rows in EVENT_COLUMNS order, [])."""
    conn = sqlite3.connect(_sqlite_path(url))
    events = conn.execute(f"SELECT {EVENT_COLUMNS} FROM events ORDER BY seq").fetchall()
    conn.close()
    out, i = [], 0
    for b in batches:
        out.append((events[i : i + len(b)], []))
        i += len(b)
    return out


def _bench_raw_sqlite(url: str, grouped: list[tuple[list[tuple], list[tuple]]]) -> float:
    upgrade(url)  # identical schema: same migration, indexes and triggers
    conn = sqlite3.connect(_sqlite_path(url), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")  # the store's default
    t0 = time.perf_counter()
    for rows, _ in grouped:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join('?' * len(rows[0]))})", rows)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def small_events(run: str, n_events: int) -> Iterator[EventIn]:
    """The bulk of a log: question.scored events, small data dicts, no texts."""
    for i in range(n_events):
        data = {**_defaults("question.scored"), "question_id": f"q{i}", "n": 12, "p1": 0.5 + (i % 7) / 20,
                "p2": 0.25, "pseudo_label": str(i % 997), "retained": i % 3 == 0}  # fmt: skip
        yield unvalidated("question.scored", run, 1 + i // 5000, f"{run}:{i}", data)


def bench_append(tmp: Path, events: list[EventIn], batch: int = 1000, repeats: int = 3) -> dict[str, float]:
    """Best of ``repeats`` for the store and for raw sqlite3, alternating (the machine is shared)."""
    batches = [events[i : i + batch] for i in range(0, len(events), batch)]
    best_store = best_raw = float("inf")
    for r in range(repeats):
        store_url = f"sqlite:///{tmp / f'store-{r}.db'}"
        raw_url = f"sqlite:///{tmp / f'raw-{r}.db'}"
        open_log(store_url).close()  # migration outside the timing
        best_store = min(best_store, _bench_store_append(store_url, batches))
        best_raw = min(best_raw, _bench_raw_sqlite(raw_url, _stored_rows(store_url, batches)))
        for f in tmp.glob(f"*-{r}.db*"):
            f.unlink()
    n = len(events)
    return {"events": n, "store_eps": n / best_store, "raw_eps": n / best_raw, "ratio": best_raw / best_store}


def bench_breakdown(tmp: Path, n: int, repeats: int = 3) -> None:
    """Print part (d): where an append's time goes, for the realistic mix. The store's own
    Python (serialising, texts out, key columns, then the chain and the rows under the lock)
    timed alone, and raw executemany of the store's rows into the full schema, into it without
    and the read indexes of migrations 0003/0004."""
    from diagevo.log.chain import Pending

    events = list(realistic_events("breakdown", n, seed=3))
    batches = [events[i : i + 1000] for i in range(0, len(events), 1000)]
    store_s = float("inf")
    for r in range(repeats):
        url = f"sqlite:///{tmp / f'breakdown-{r}.db'}"
        open_log(url).close()  # migration outside the timing
        store_s = min(store_s, _bench_store_append(url, batches))
    grouped = _stored_rows(url, batches)
    python_s = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for b in batches:
            prepared = Pending(b).all()
            prev = "0" * 64
            for p in prepared:  # the chain and the row, as Recorder._insert builds them
                prev = hashlib.sha256(prev.encode() + p[6]).hexdigest()
                (0, p[0], p[1], p[2], p[3], p[4], p[5], "", prev, prev, p[7], *p[8])
        python_s = min(python_s, time.perf_counter() - t0)

    def raw(label: str, drop_indexes: bool) -> float:
        best = float("inf")
        for r in range(repeats):
            path = tmp / f"raw-{label}-{r}.db"
            target = f"sqlite:///{path}"
            upgrade(target)
            conn = sqlite3.connect(path, isolation_level=None)
            if drop_indexes:
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'ix_%'"
                ).fetchall():
                    conn.execute(f"DROP INDEX {name}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            t0 = time.perf_counter()
            for rows, _ in grouped:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join('?' * len(rows[0]))})", rows)
                conn.execute("COMMIT")
            best = min(best, time.perf_counter() - t0)
            conn.close()
            for f in tmp.glob(f"raw-{label}-{r}.db*"):
                f.unlink()
        return best

    full = raw("full", False)
    lean = raw("lean", True)
    us = 1e6 / len(events)
    print(
        f"(d) where an append's time goes: {len(events):,} realistic events, batches of 1000, SQLite, best of {repeats}"
    )
    print(f"    {'the store, Recorder.append':<58}{store_s * us:>8.1f} µs/event")
    print(f"    {'its Python alone (serialise, texts, keys, chain, rows)':<58}{python_s * us:>8.1f}")
    print(f"    {'raw executemany of its rows, full schema':<58}{full * us:>8.1f}")
    print(f"    {'same without the read indexes (unique event_id only)':<58}{lean * us:>8.1f}")


# --- (b) reading a million events -----------------------------------------------------------


def _reset_peak_rss() -> None:
    """Start a fresh high-water mark: a spawned child otherwise inherits its parent's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _peak_rss_mib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure_iter_rows(url: str, run: str) -> dict[str, float]:
    """Run in a fresh process: time and peak memory of reading the whole run via iter_rows."""
    with open_log(url) as store:
        _reset_peak_rss()
        base = _rss_mib()
        t0 = time.perf_counter()
        n = 0
        for _ in store.rows(run):
            n += 1
        elapsed = time.perf_counter() - t0
        peak = _peak_rss_mib()
    return {"rows": n, "seconds": elapsed, "peak_rss_mib": peak, "rss_growth_mib": peak - base}


def in_fresh_process(fn: Any, *args: Any) -> Any:
    """Call ``fn(*args)`` in a spawned process, so its peak memory is its own."""
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def _pg_database(admin: str) -> tuple[str, str]:
    """A fresh database on the server ``admin`` (postgresql://user@host:port): (name, store URL)."""
    import uuid

    import psycopg

    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{admin}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return name, f"{admin.replace('postgresql://', 'postgresql+psycopg://')}/{name}"


def _drop_pg_database(admin: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{admin}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _pg_stored_rows(url: str, batches: list[list[EventIn]]) -> list[tuple[list[tuple], list[tuple]]]:
    """The exact rows the store wrote to PostgreSQL, by batch (EVENT_COLUMNS order)."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        events = conn.execute(f"SELECT {EVENT_COLUMNS} FROM events ORDER BY seq").fetchall()
    out, i = [], 0
    for b in batches:
        out.append((events[i : i + len(b)], []))
        i += len(b)
    return out


def _bench_raw_pg(url: str, grouped: list[tuple[list[tuple], list[tuple]]]) -> float:
    """The same rows by raw COPY, one transaction per batch; the database assigns seq and checks
    the chain (migration 0009), as it does for any insert."""
    import psycopg

    upgrade(url)  # identical schema: same migration, indexes and triggers
    columns = EVENT_COLUMNS.removeprefix("seq, ")
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        t0 = time.perf_counter()
        for rows, _ in grouped:
            with conn.transaction(), conn.cursor() as cur:
                with cur.copy(f"COPY events ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row[1:])
        return time.perf_counter() - t0


def bench_append_pg(admin: str, events: list[EventIn], batch: int = 1000, repeats: int = 3) -> dict[str, float]:
    """Best of ``repeats``: the store's append to PostgreSQL against raw COPY of its rows."""
    batches = [events[i : i + batch] for i in range(0, len(events), batch)]
    best_store = best_raw = float("inf")
    for _ in range(repeats):
        (s_name, s_url), (r_name, r_url) = _pg_database(admin), _pg_database(admin)
        try:
            open_log(s_url).close()  # migration outside the timing
            best_store = min(best_store, _bench_store_append(s_url, batches))
            best_raw = min(best_raw, _bench_raw_pg(r_url, _pg_stored_rows(s_url, batches)))
        finally:
            _drop_pg_database(admin, s_name)
            _drop_pg_database(admin, r_name)
    n = len(events)
    return {"events": n, "store_eps": n / best_store, "raw_eps": n / best_raw, "ratio": best_raw / best_store}


def bench_append_table(tmp: Path, n: int, pg: str = "") -> bool:
    """Print part (a); True when every ratio meets the 0.5x target."""
    workloads = {
        "small dicts (question.scored)": lambda: list(small_events("small", n)),
        "realistic mix with texts": lambda: list(realistic_events("mixed", n, seed=1)),
    }
    print("(a) append in batches of 1000, best of 3: SQLite file (WAL, synchronous=FULL) against raw sqlite3")
    print("    executemany of the same rows" + (", PostgreSQL against raw COPY of the same rows" if pg else ""))
    print(f"    {'backend':<12}{'workload':<32}{'events':>9}{'store ev/s':>13}{'raw ev/s':>13}{'ratio':>8}")
    ok = True
    for name, make in workloads.items():
        events = make()
        runs = [("sqlite", lambda events=events: bench_append(tmp, events))]
        if pg:
            runs.append(("postgresql", lambda events=events: bench_append_pg(pg, events)))
        for backend, fn in runs:
            a = fn()
            ok = ok and a["ratio"] >= 0.5
            print(
                "    "
                f"{backend:<12}{name:<32}{a['events']:>9,}{a['store_eps']:>13,.0f}{a['raw_eps']:>13,.0f}{a['ratio']:>8.2f}"
            )
    print("    ratio = store ev/s / raw ev/s; targets: ratio >= 0.5, >= 50,000 events/s")
    return ok


def bench_durability(tmp: Path, n: int, repeats: int = 3) -> None:
    """Print part (c): the store with synchronous=FULL (default) and NORMAL, alternating."""
    events = list(realistic_events("durable", n, seed=2))
    print("(c) durability: the store with synchronous=FULL (default) vs ?synchronous=normal, best of 3")
    print(f"    {'batches':<32}{'events':>9}{'FULL ev/s':>13}{'NORMAL ev/s':>13}{'cost':>8}")
    for size in (1000, 10):
        batches = [events[i : i + size] for i in range(0, len(events), size)]
        best = {"full": float("inf"), "normal": float("inf")}
        for r in range(repeats):
            for level in best:
                url = f"sqlite:///{tmp / f'sync-{level}-{r}.db'}?synchronous={level}"
                open_log(url).close()  # migration outside the timing
                best[level] = min(best[level], _bench_store_append(url, batches))
                for f in tmp.glob(f"sync-{level}-{r}.db*"):
                    f.unlink()
        full, normal = len(events) / best["full"], len(events) / best["normal"]
        print(f"    {f'of {size} events':<32}{len(events):>9,}{full:>13,.0f}{normal:>13,.0f}{normal / full:>7.2f}x")
    print("    cost: how much faster NORMAL appends; FULL is the default because the log is the source of truth")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="size of the log read back in (b)")
    ap.add_argument("--append-events", type=int, default=100_000, help="events appended in (a)")
    ap.add_argument("--db", help="database for (b), reused if it holds the log (default: a temporary SQLite file)")
    ap.add_argument("--skip-append", action="store_true", help="skip (a)")
    ap.add_argument("--pg", default="", help="PostgreSQL server for (a), e.g. postgresql://postgres@127.0.0.1:5432")
    ap.add_argument("--durability-events", type=int, default=20_000, help="events appended in (c)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench_store_") as d:
        tmp = Path(d)
        ok = args.skip_append or bench_append_table(tmp, args.append_events, args.pg)
        bench_durability(tmp, args.durability_events)
        bench_breakdown(tmp, args.durability_events)

        url = args.db or f"sqlite:///{tmp / 'million.db'}"
        run = f"bench-0-{args.events}"
        with open_log(url) as store:
            reuse = store.last_seq(run) > 0
        t0 = time.perf_counter()
        if not reuse:
            build_log(url, args.events, run=run)
        build_s = time.perf_counter() - t0
        b = in_fresh_process(measure_iter_rows, url, run)
        how = "reused" if reuse else f"built in {build_s:.1f} s ({b['rows'] / build_s:,.0f} events/s)"
        print(f"(b) log of {b['rows']:,} events {how}")
        print(f"    {'iter_rows, full run':<28}{b['seconds']:>12.2f} s   ({b['rows'] / b['seconds']:,.0f} rows/s)")
        peak, growth = b["peak_rss_mib"], b["rss_growth_mib"]
        print(f"    {'peak RSS of reader':<28}{peak:>12.0f} MiB (+{growth:.0f} while reading)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
