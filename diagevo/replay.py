"""Projections over a stored log: M_t with snapshots as a cache, snapshot catch-up, verification.

This is the only place that joins the event store and the pure memory: ``memory/`` never reads
the database, the store never interprets events.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from diagevo.events.store import EventStore, StoreError
from diagevo.urls import redact_url
from diagevo.memory.fold import MEMORY_TYPES, InvariantError, Row, commits, fold, fold_until, start
from diagevo.memory.state import Memory

log = logging.getLogger("diagevo.cache")

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


def load_memory(store: EventStore, run: str, round: int | None = None, *, since: Memory | None = None) -> Memory:
    """M_round from the nearest snapshot at or before it plus the events after; with
    ``round=None``, the memory after the run's last event (an open round included).
    M_0 is the memory right after ``run.started``. ``since``, a memory of this run the caller
    holds already (M_{t-1} in round t), is the base the fold starts from instead."""
    if since is not None and round is None:
        return fold(_rows(store, run, since.last_seq), run, since)
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
    """Write a snapshot for every committed round that has none yet; returns how many.

    Snapshots are a cache: this runs after the events committed, so a failed read or write here
    (a role without the privilege, a dropped connection, a full disk) is logged as a warning on
    the ``diagevo.cache`` logger and swallowed; any later reader folds the log instead."""
    written = 0
    try:
        snap = store.latest_snapshot(run)
        mem = Memory.from_json(snap[2]) if snap else None
        for m in commits(_rows(store, run, mem.last_seq if mem else 0), run, mem):
            store.put_snapshot(run, m.committed, m.last_seq, m.to_json())
            written += 1
        refresh_stats(store, run)
    except StoreError as exc:
        log.warning("snapshot of run %r not written (a cache: readers fold the log instead): %s", run, exc)
    return written


def committed_rounds(store: EventStore, run: str) -> list[int]:
    """Read through the (run_id, type, seq) index: as many rows as rounds."""
    return [rnd for _, rnd, _, _ in store.iter_rows(run, types=("round.committed",))]


def commit_memories(store: EventStore, run: str, after_round: int = 0) -> Iterator[Memory]:
    """M_t of every committed round after ``after_round``, in order: from the snapshots, folding
    only the stretches of the log that no snapshot covers (a read-only pass: nothing is written)."""
    rounds = [rnd for rnd in committed_rounds(store, run) if rnd > after_round]
    if after_round <= 0:
        snaps = {rnd: state for rnd, _, state in store.snapshots(run)}
    else:  # a few late rounds: their own snapshots, not every one
        snaps = {rnd: got[1] for rnd in rounds if (got := store.get_snapshot(run, rnd)) is not None}
    mem: Memory | None = None
    for rnd in rounds:
        state = snaps.get(rnd)
        if state is not None:
            mem = Memory.from_json(state)
        elif mem is None:
            mem = load_memory(store, run, rnd)  # from the nearest snapshot before it
        else:
            mem = fold_until(_rows(store, run, mem.last_seq), run, rnd, mem)
        yield mem


def cause_rows(store: EventStore, run: str, cause: str) -> list[Row]:
    """The events :func:`diagevo.memory.audit.cause_story` needs for one cause, texts inline,
    in seq order: the cause's own events, its failures with their diagnoses, their questions
    and the merges of nodes. Indexed reads only; the rest of the run is never read."""
    own = store.naming_rows(run, {"cause_id": [cause]})
    fids = [e.data["failure_id"] for e in own if isinstance(e.data.get("failure_id"), str)]
    failures = store.naming_rows(run, {"failure_id": fids}, types=("failure.recorded", "failure.diagnosed"), texts=True)
    qids = [e.data["question_id"] for e in failures if isinstance(e.data.get("question_id"), str)]
    questions = store.naming_rows(run, {"question_id": qids}, types=("question.generated", "question.scored"), texts=True)
    merges = list(store.iter_rows(run, types=("nodes.merged",)))
    events: dict[int, Row] = {e[0]: e for e in (*own, *failures, *questions, *merges)}
    return [events[seq] for seq in sorted(events)]


def verify_run(store: EventStore, run: str) -> list[str]:
    """Hash chain intact, texts equal to their keys, every invariant holds over the full log,
    snapshots equal the fold, the stats read model equals the log, no cache beyond its end."""
    problems = list(store.verify_chain(run))
    problems += store.verify_artifacts(run)
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
    stats_at = store.get_checkpoint(STATS, run)
    # a read model beyond the log's end is a cut-off log, which verify_anchors reports
    if stats_at and stats_at <= store.last_seq(run) and not any(p.startswith("invariant") for p in problems):
        if stored_round_stats(store, run) != stored_round_stats(store, run, cached=False):
            problems.append("the stats read model differs from the log (a cache: `memory stats` would show it)")
    return problems + verify_anchors(store, run)


def verify_anchors(store: EventStore, run: str) -> list[str]:
    """What the caches say the log held must still be there: each snapshot's seq is the run's
    ``round.committed`` of its round (with the hash it recorded), and no projection's
    checkpoint lies beyond the run's last event. A log whose tail was deleted (or replaced)
    fails here although its shortened hash chain is intact."""
    problems: list[str] = []
    last = store.last_seq(run)
    for rnd, seq, hash_ in store.snapshot_anchors(run):
        at = store.event_at(run, seq)
        if at is None:
            where = f"the run's log ends at seq {last}" if seq > last else "the run holds no event there"
            problems.append(f"log cut off: the snapshot of round {rnd} summarises the log up to seq {seq}, but {where}")
        elif at[:2] != (rnd, "round.committed"):
            problems.append(f"snapshot of round {rnd} names seq {seq}, which is not that round's round.committed")
        elif hash_ is not None and at[2] != hash_:
            problems.append(f"log replaced: the event at seq {seq} is not the one the snapshot of round {rnd} summarised")
    for name, seq in sorted(store.checkpoints(run).items()):
        if seq > last:
            problems.append(f"log cut off: projection {name!r} applied the log up to seq {seq}, but it ends at seq {last}")
    return problems


STATS = "stats"
"""The checkpoint of the stats read model: events per (round, type) up to its seq and the memory
sizes of the rounds committed by then, so that ``memory stats`` reads what came after, not the run."""


def _stats_cache(store: EventStore, run: str) -> tuple[int, dict[tuple[int, str], int], dict[int, dict]]:
    """(seq, counts, sizes) of the stats read model; (0, {}, {}) when there is none."""
    seq = store.get_checkpoint(STATS, run)
    info = store.checkpoint_info(STATS, run) if seq else {}
    counts = {(int(r), str(t)): int(n) for r, t, n in info.get("counts", [])}
    sizes = {int(r): row for r, row in info.get("sizes", {}).items()}
    return seq, counts, sizes


def _stats_model(
    store: EventStore, run: str, *, cached: bool = True, upto: int | None = None
) -> tuple[dict[tuple[int, str], int], dict[int, dict]]:
    """(counts, sizes) of the run up to seq ``upto`` (its end when None): the stats read model's
    (``cached``), moved on with the log after it."""
    from diagevo.memory.audit import memory_sizes

    seq, counts, sizes = _stats_cache(store, run) if cached else (0, {}, {})
    for key, n in store.type_counts(run, after_seq=seq, upto_seq=upto).items():
        counts[key] = counts.get(key, 0) + n
    for mem in commit_memories(store, run, after_round=max(sizes, default=0)):
        if upto is not None and mem.last_seq > upto:
            break
        sizes[mem.committed] = memory_sizes(mem)
    return counts, sizes


def refresh_stats(store: EventStore, run: str) -> None:
    """Move the stats read model to the run's last event (a cache, like the snapshots: the
    caller turns a StoreError into a warning). A committed round's counts and memory never
    change, since the log only grows; a later event of an earlier round is counted after it."""
    last = store.last_seq(run)
    if last <= store.get_checkpoint(STATS, run):
        return
    counts, sizes = _stats_model(store, run, upto=last)
    info = {"counts": [[r, t, n] for (r, t), n in sorted(counts.items())], "sizes": {str(r): v for r, v in sizes.items()}}
    store.set_checkpoint(STATS, run, last, info)


def stored_round_stats(store: EventStore, run: str, *, cached: bool = True) -> list[dict]:
    """:func:`diagevo.memory.audit.round_stats` without a pass over the log: memory sizes and the
    schedule from the commits' memories (snapshots), what each round did from the per-(round,
    type) counts of the index, held-out figures from the ``round.committed`` events and
    benchmark scores from ``eval.recorded``. ``cached``: start from the stats read model
    (:func:`refresh_stats`) and read only the log after it."""
    from diagevo.memory.audit import COUNTED

    counts, sizes = _stats_model(store, run, cached=cached)
    commits_data = {e.round: e.data for e in store.read(run, types=("round.committed",))}
    # the training loop's commits say how many questions the round retained; other logs are counted
    if all(isinstance(d.get("retained"), int) for d in commits_data.values()):
        retained = {rnd: d["retained"] for rnd, d in commits_data.items()}
    else:
        retained = store.retained_counts(run)
    scores: dict[int, dict] = {}
    for e in store.read(run, types=("eval.recorded",)):
        if "benchmark" in e.data:
            scores.setdefault(e.round, {})[f"bench/{e.data['benchmark']}"] = e.data.get("accuracy")
    out: list[dict] = []
    for sized in (sizes[rnd] for rnd in sorted(sizes)):
        rnd = sized["round"]
        row = dict(sized)
        for etype, name in COUNTED.items():
            if name == "questions":
                row["questions"] = counts.get((rnd, etype), 0)
                row["retained"] = retained.get(rnd, 0)
            else:
                row[name] = counts.get((rnd, etype), 0)
        d = commits_data.get(rnd, {})
        row.update({k: v for k, v in d.items() if isinstance(v, (int, float)) and k.startswith("heldout")})
        row.update(scores.get(rnd, {}))
        out.append(row)
    return out
