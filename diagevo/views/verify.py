"""``diagevo memory verify``: the log's chain and texts, the memory's invariants over the whole
log, and every saved view state against the log it claims to summarise.

The saved states are also the log's witnesses: a prefix of a hash chain is itself a valid chain,
so a log whose last events were deleted (triggers dropped, as anyone holding the file can) still
verifies; a state that names an event the log no longer holds (or holds with another hash) tells.
"""

from __future__ import annotations

from diagevo.catalog import FailureDiagnosed, RoundCommitted
from diagevo.log import Recorder
from diagevo.memory.fold import InvariantError, commits
from diagevo.views import index, memory, stats

VIEWS = (memory.VIEW, stats.VIEW, index.VIEW)


def verify_run(store: Recorder, run: str) -> list[str]:
    """One line per problem (empty: the run is intact): the hash chain, the texts and id columns
    (``EventStore.verify_chain``), every invariant of the memory over the full
    log, snapshots equal to the fold, the stats equal to the log, no saved state the log does
    not vouch for."""
    problems = list(store.verify_chain(run))
    folded: dict[int, dict] = {}
    try:
        if any(": out of shape: " in p for p in problems):  # the fold would meet what it cannot read
            raise InvariantError("not folded: the events above are out of shape")
        for m in commits(store.rows(run), run):
            folded[m.committed] = m.to_json()
    except InvariantError as exc:
        problems.append(f"invariant: {exc}")
    problems += diagnosed_twice(store, run)
    for snap in store.view_states(memory.VIEW, run):
        if snap.part in folded and snap.state != folded[snap.part]:
            problems.append(f"snapshot of round {snap.part} differs from the fold of the log")
    if not any(p.startswith("invariant") for p in problems):
        saved = store.view_states(stats.VIEW, run, latest=True)
        if saved:
            cached = stats.RoundStats.from_state(saved[0])
            fresh = stats.accumulate(store, run, cached=False, upto_seq=saved[0].seq)
            if cached.to_json() != fresh.to_json():
                problems.append("the saved statistics differ from the log (a cache: `memory stats` would show them)")
    return problems + verify_anchors(store, run)


def diagnosed_twice(store: Recorder, run: str) -> list[str]:
    """A failure id diagnosed in two rounds (a log of an older diagevo, or edited by hand): its
    evidence is counted twice (F, the cause's state)."""
    rounds: dict[str, list[int]] = {}
    for row in store.rows(run, types=(FailureDiagnosed,)):
        rnd, fid = row.round, FailureDiagnosed.from_stored(row.data).failure_id
        if fid is not None and rnd not in rounds.setdefault(fid, []):
            rounds[fid].append(rnd)
    return [
        f"failure {fid!r} is diagnosed in rounds {', '.join(map(str, rs))}: one failure counted {len(rs)} times"
        for fid, rs in rounds.items()
        if len(rs) > 1
    ]


def verify_anchors(store: Recorder, run: str) -> list[str]:
    """Each saved view state names an event of the run's log, with the hash it had: a log whose
    tail was deleted (or replaced) fails here although its shortened hash chain is intact."""
    problems: list[str] = []
    last = store.last_seq(run)
    for name in VIEWS:
        for s in store.view_states(name, run, anchored=False):
            what = f"the snapshot of round {s.part}" if name == memory.VIEW else f"the saved state of view {name!r}"
            at = store.event_at(run, s.seq)
            if at is None:
                where = f"the run's log ends at seq {last}" if s.seq > last else "the run holds no event there"
                problems.append(f"log cut off: {what} summarises the log up to seq {s.seq}, but {where}")
            elif at.hash != s.hash:
                problems.append(f"log replaced: the event at seq {s.seq} is not the one {what} summarised")
            elif name == memory.VIEW and (at.round, at.type) != (s.part, RoundCommitted.name):
                problems.append(f"{what} names seq {s.seq}, which is not that round's {RoundCommitted.name}")
    return problems
