"""Projections over a stored log: M_t with snapshots as a cache, snapshot catch-up, verification.

This is the only place that joins the event store and the pure memory: ``memory/`` never reads
the database, the store never interprets events.
"""

from __future__ import annotations

from collections.abc import Iterator
from diagevo.config import redact_url
from diagevo.events.store import EventStore
from diagevo.memory.fold import MEMORY_TYPES, InvariantError, Row, commits, fold, fold_until, start
from diagevo.memory.state import Memory

# what the memory depends on (evidence and bookkeeping only open rounds)
FOLD_TYPES = frozenset(MEMORY_TYPES | {"run.started"})


def _rows(store: EventStore, run: str, after_seq: int = 0, *, all_types: bool = False) -> Iterator[Row]:
    return store.iter_rows(run, after_seq=after_seq, types=None if all_types else FOLD_TYPES)


def resolve_run(store: EventStore, run: str | None) -> str:
    """``run`` or the latest run in the store."""
    if run is not None:
        if run not in store.runs():
            raise InvariantError(f"no run {run!r} in {redact_url(store.url)}")
        return run
    latest = store.latest_run()
    if latest is None:
        raise InvariantError(f"no runs in {redact_url(store.url)}")
    return latest


def load_memory(store: EventStore, run: str, round: int | None = None) -> Memory:
    """M_round from the nearest snapshot at or before it plus the events after; with
    ``round=None``, the memory after the run's last event (an open round included).
    M_0 is the memory right after ``run.started``."""
    if round == 0:
        for seq, _, etype, data in _rows(store, run):
            if etype != "run.started":
                break
            return start(run, data, seq)
        raise InvariantError(f"run {run!r} does not begin with run.started")
    snap = store.latest_snapshot(run, upto_round=round)
    base = Memory.from_json(snap[2]) if snap else None
    if round is not None and base is not None and base.committed == round:
        return base
    after = base.last_seq if base else 0
    if round is None:
        return fold(_rows(store, run, after), run, base)
    return fold_until(_rows(store, run, after), run, round, base)


def refresh_snapshots(store: EventStore, run: str) -> int:
    """Write a snapshot for every committed round that has none yet; returns how many."""
    snap = store.latest_snapshot(run)
    mem = Memory.from_json(snap[2]) if snap else None
    written = 0
    for m in commits(_rows(store, run, mem.last_seq if mem else 0), run, mem):
        store.put_snapshot(run, m.committed, m.last_seq, m.to_json())
        written += 1
    return written


def committed_rounds(store: EventStore, run: str) -> list[int]:
    return [rnd for _, rnd, _, _ in store.iter_rows(run, types=("round.committed",))]


def verify_run(store: EventStore, run: str) -> list[str]:
    """Hash chain intact, every invariant holds over the full log, snapshots equal the fold."""
    problems = list(store.verify_chain(run))
    folded: dict[int, dict] = {}
    try:
        for m in commits(_rows(store, run, all_types=True), run):
            folded[m.committed] = m.to_json()
    except InvariantError as exc:
        problems.append(f"invariant: {exc}")
    for rnd, image in folded.items():
        snap = store.get_snapshot(run, rnd)
        if snap is not None and snap[1] != image:
            problems.append(f"snapshot of round {rnd} differs from the fold of the log")
    return problems
