"""The memory M_t of a run, folded from its log, with a snapshot of each committed round saved as
a cache (the view ``memory``, one state per round).

A snapshot is read only where the log vouches for it (the recorder's anchor check) and is always
equal to the fold: :func:`diagevo.views.verify.verify_run` compares them. Every fold here passes
over a row the fold refuses or no reader can take, kept with the memory (:attr:`Memory.refused`, a
snapshot's too), which the run's admission names (:mod:`diagevo.views.admission`): no stored row
stops a reader of the memory. Replay never calls a model; this is the only place that joins the
log and the pure memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import cast

from diagevo.catalog import MILESTONES, Event, RoundCommitted, RunConfigured, RunStarted
from diagevo.errors import Call, NotFound
from diagevo.log import EventReader, LogOperator, Recorder, ViewState
from diagevo.log.recorder import StoredEvent, every_row
from diagevo.memory.fold import InvariantError, NotCommitted, Read, commits, fold, fold_until, start, taken
from diagevo.memory.state import Memory, MemoryImage
from diagevo.text.calls import validated
from diagevo.text.urls import redact_url
from diagevo.text.words import did_you_mean
from diagevo.views.forks import latest_run
from diagevo.views.withdrawn import Withdrawn

VIEW = "memory"
"""The name of the memory's saved states (one per committed round: the round is the part)."""


def fold_rows(store: EventReader, run: str, after_seq: int = 0) -> Iterator[Read]:
    """The rows the memory is folded from, after ``after_seq``: those of every type, so that the
    memory's refusals are the fold's over the whole log (a row of evidence in a round the fold has
    not opened is refused as a commit is), as the audit of ``memory verify`` folds it, a row no
    reader can take among them (:func:`~diagevo.log.recorder.every_row`)."""
    return every_row(store, run, after_seq)


class NoSuchRun(InvariantError, NotFound):
    """A run the log does not hold (an ``InvariantError`` too, as it always was)."""


def unknown_run(store: EventReader, run: str) -> NoSuchRun:
    """``no run 'huer' in URL (did you mean 'heur'?)``, with how to list the runs: for a Python
    caller ``store.runs()``, on the command line ``diagevo runs``."""
    runs = store.runs()
    return NoSuchRun(
        f"no run {run!r} in {redact_url(store.url)}{did_you_mean(run, runs)}: the runs are listed by",
        Call("runs", "store.runs()"),
        value=run,
        allowed=tuple(runs),
    )


def resolve_run(store: Recorder, run: str | None) -> str:
    """``run``, or the latest run in the log, not a what-if (:func:`~diagevo.views.forks.latest_run`;
    :class:`NoSuchRun` for one it does not hold)."""
    if run is not None:
        if not store.has_run(run):
            raise unknown_run(store, run)
        return run
    latest = latest_run(store)
    if latest is None:
        raise NoSuchRun(
            f"no runs in {redact_url(store.url)}: start one with",
            Call("train", "diagevo.start_run(store, run, config)"),
            then=", or run your own trainer through the round protocol",
        )
    return latest


def _snapshot(store: LogOperator, run: str, upto_round: int | None = None) -> Memory | None:
    found = store.view_states(VIEW, run, upto=upto_round, latest=True)
    return Memory.from_json(cast(MemoryImage, found[0].state)) if found else None  # a state of this view


@validated
def load_memory(store: Recorder, run: str, at_round: int | None = None, *, since: Memory | None = None) -> Memory:
    """M_t (``at_round`` = t) from the nearest snapshot at or before it plus the events after; with
    ``at_round=None``, the memory after the run's last event (an open round included). M_0 is the
    memory right after ``run.started``. ``since``, a memory of this run the caller holds already
    (M_{t-1} in round t), is the base the fold starts from instead."""
    if since is not None and at_round is None:
        return fold(fold_rows(store, run, since.last_seq), run, since)
    if not store.has_run(run):
        raise unknown_run(store, run)
    if at_round == 0:
        for row in store.rows(run, limit=1):
            event = row.event
            if not isinstance(event, RunStarted):
                break
            return start(run, event, row.seq)
        raise InvariantError(f"run {run!r} does not begin with {RunStarted.name}")
    base = _snapshot(store, run, at_round)
    if at_round is not None and base is not None and base.committed == at_round:
        return base
    after = base.last_seq if base else 0
    if at_round is None:
        return fold(fold_rows(store, run, after), run, base)
    return fold_until(fold_rows(store, run, after), run, at_round, base)


def taken_rows(store: Recorder, run: str, after_round: int = 0, upto_seq: int | None = None) -> Iterator[StoredEvent]:
    """The run's rows of every type after round ``after_round``'s commit (0: from its start) that
    the fold takes (:func:`~diagevo.memory.fold.taken`): what a count of the log counts. A row the
    fold refuses is passed over, as every reader of the memory passes it over (the run's admission
    names it)."""
    base = load_memory(store, run, after_round) if after_round else None
    rows = taken(every_row(store, run, base.last_seq if base is not None else 0, upto_seq), run, base)
    yield from Withdrawn.of(store, run).lawful(rows)  # a withdrawal the rule refuses counts nothing


BEARINGS: tuple[type[Event], ...] = (*MILESTONES, RunConfigured)
"""The rows whose admission depends on one another alone (the order of rounds, a positive k):
where the run and its rounds stand."""


def bearings(store: EventReader, run: str) -> list[StoredEvent]:
    """The run's milestones and configs the fold takes, in log order (a commit of a round that
    never ran, a config written into a committed round: refused, left out): decided from those
    rows alone, a few per round, without folding the causes (:mod:`diagevo.views.admission`)."""
    return list(taken(store.rows(run, types=BEARINGS), run))


def committed_rounds(store: EventReader, run: str) -> list[int]:
    """The run's committed rounds: the commits the fold takes (:func:`bearings`); none for a run
    the log does not hold or that never started."""
    committed = RoundCommitted.name
    return [row.round for row in bearings(store, run) if row.type == committed]


def diagevo_versions(rows: Iterable[StoredEvent]) -> tuple[str | None, dict[int, str]]:
    """The diagevo version that opened a run and, by committed round, the one that committed it,
    of its milestones ``rows``, where the row records one as text (an older diagevo's does not)."""
    opened: str | None = None
    by_round: dict[int, str] = {}
    for row in rows:
        match row.event:
            case RunStarted(diagevo=str() as wrote):
                opened = wrote
            case RoundCommitted(diagevo=str() as wrote):
                by_round[row.round] = wrote
    return opened, by_round


def commit_memories(store: Recorder, run: str, after_round: int = 0) -> Iterator[Memory]:
    """M_t of every committed round after ``after_round``, in order: from the snapshots, folding
    only the stretches of the log that no snapshot covers (a read-only pass: nothing is written)."""
    rounds = [rnd for rnd in committed_rounds(store, run) if rnd > after_round]
    if not rounds:
        return
    snaps = {s.part: s.state for s in store.view_states(VIEW, run) if s.part > after_round}
    mem: Memory | None = None
    for rnd in rounds:
        state = snaps.get(rnd)
        try:
            if state is not None:
                mem = Memory.from_json(cast(MemoryImage, state))
            elif mem is None:
                mem = load_memory(store, run, rnd)  # from the nearest snapshot before it
            else:
                mem = fold_until(fold_rows(store, run, mem.last_seq), run, rnd, mem)
        except NotCommitted:
            continue  # a commit the fold passed over: no memory of that round
        yield mem


def save_snapshots(store: Recorder, run: str) -> int:
    """Save a snapshot of every committed round that has none yet; returns how many (a cache:
    see :func:`diagevo.views.caches.refresh`)."""
    mem = _snapshot(store, run)
    fresh = list(commits(fold_rows(store, run, mem.last_seq if mem else 0), run, mem))
    if not fresh:
        return 0
    hashes = {e.seq: e.hash for e in store.read(run, types=(RoundCommitted,), after_seq=fresh[0].last_seq - 1)}
    store.put_view_states(
        [
            ViewState(VIEW, run, m.committed, m.last_seq, hashes[m.last_seq], dict(m.to_json()))
            for m in fresh
            if m.last_seq in hashes
        ]
    )
    return len(fresh)
