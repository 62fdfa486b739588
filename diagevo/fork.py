"""What-if experiments from a stored run: ``fork`` a run at a committed round, ``diff`` two runs.

A fork's log is the source's log through round N's ``round.committed``, re-stamped with the new
run id (its own hash chain), followed by ``run.forked`` naming the source run, the round and the
source's hash there. ``diagevo train --run NEW --resume --set ...`` then continues it from round
N+1 (with round N's checkpoints, which the copied ``checkpoint.written`` events point at).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from diagevo.catalog import (
    CauseCreated,
    NodeCreated,
    RoundCommitted,
    RunConfigured,
    RunForked,
    RunStarted,
    of_type,
)
from diagevo.catalog.ids import event_id, source_event_id
from diagevo.config.sections import config_from_record
from diagevo.errors import BadInput, NotFound
from diagevo.interchange import copied_or_left
from diagevo.log import EventReader, Recorder
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.results.runs import CauseDiffers, CauseSide, Fork, LeftBehind, RunDiff, SameIdDiffers, ScheduleRow
from diagevo.schemas import EventIn, new_event
from diagevo.text.calls import validated
from diagevo.text.words import did_you_mean
from diagevo.views.admission import admission
from diagevo.views.caches import refresh as refresh_snapshots
from diagevo.views.checkpoints import checkpoint_log
from diagevo.views.forks import fork_marker, whatif_refusal
from diagevo.views.memory import committed_rounds, load_memory
from diagevo.views.queries import pruned_note
from diagevo.views.stats import round_stats


class ForkError(BadInput):
    """A fork or diff that cannot be made as asked."""


@validated
def fork_run(store: Recorder, source: str, at_round: int, new: str, overrides: Sequence[str] = ()) -> Fork:
    """Copy ``source`` through round ``at_round``'s commit into run ``new``; returns the provenance.
    ``overrides`` (``section.field=value``, as ``--set`` takes them) change the fork's config from
    its first round of its own on (a ``run.configured`` appended with the copy)."""
    if not store.has_run(source):
        raise ForkError(f"no run {source!r} to fork{did_you_mean(source, store.runs())}")
    if store.has_run(new):
        raise ForkError(f"run {new!r} exists already: pick a new name")
    if not new.strip():
        raise ForkError("the new run needs a name")
    if at_round not in committed_rounds(store, source):
        raise ForkError(f"round {at_round} of run {source!r} is not committed: fork at a committed round")
    refused = whatif_refusal(source, fork_marker(store, source), "no fork of it trains on")
    if refused is not None:
        raise ForkError(refused[0], refused[1], about=source)
    commit = next(e for e in store.read(source, types=(RoundCommitted,)) if e.round == at_round)
    commit_seq, last_hash = commit.seq, commit.hash
    # what the fork's first round would load (the checkpoint events the rule refuses left out)
    needed = checkpoint_log(store, source, upto_seq=commit_seq).latest(at_round)
    gone = checkpoint_log(store, source).gone(needed) if needed is not None else None
    if gone is not None:
        raise ForkError(f"cannot fork run {source!r} at round {at_round}: {pruned_note(gone)}")
    # the rows the rules refuse stay behind (a forged fact, a config no loader takes, a checkpoint
    # event the rule refuses), and so does a row the copy's class refuses
    kept = admission(store, source).admitted(store.read(source, upto_seq=commit_seq, texts=True))
    copies = [copied_or_left(e, source, new) for e in kept]
    events = [ev for ev in copies if isinstance(ev, EventIn)]
    left = tuple(ev for ev in copies if isinstance(ev, LeftBehind))
    forked = RunForked(source_run=source, source_round=at_round, source_hash=last_hash, source_seq=commit_seq)
    events.append(new_event(forked, run=new, at_round=at_round, event_id=event_id(new, at_round, RunForked.name)))
    changed = _configured(events, new, at_round + 1, list(overrides)) if overrides else None
    if changed is not None:
        events.append(changed)

    def decide() -> list[EventIn]:  # the new run is created once, under the append lock
        if store.has_run(new):
            raise ForkError(f"run {new!r} exists already: pick a new name")
        return events

    store.append_decided(decide)
    refresh_snapshots(store, new)
    return Fork(
        source_run=source,
        source_round=at_round,
        source_hash=last_hash,
        source_seq=commit_seq,
        run=new,
        events=len(events),
        configured=changed is not None,
        left_behind=left,
    )


def _configured(events: Sequence[EventIn], run: str, t: int, overrides: list[str]) -> EventIn | None:
    """``run.configured`` of round ``t``: the config in force at the end of ``events`` with
    ``overrides`` applied (None when they change nothing). The method's fields are checked
    here; a component's are carried, for the trainer that continues the fork to check."""
    saved = config_from_record(next(of_type((RunStarted, RunConfigured), reversed(events))).config)
    config = saved.overridden(overrides)
    if config.redacted() == saved.redacted():
        return None
    digest = hashlib.sha256(json.dumps(config.redacted(), sort_keys=True).encode()).hexdigest()[:16]
    eid = event_id(run, t, RunConfigured.name, digest)
    return new_event(RunConfigured(config=config.redacted(), seed=config.train.seed), run=run, at_round=t, event_id=eid)


def _cause_side(m: Memory, cid: str) -> CauseSide:
    c = m.causes[cid]
    return CauseSide(cid, c.state.value, c.frequency, c.node)


def _creations(
    store: EventReader, run: str, made: type[CauseCreated | NodeCreated] = CauseCreated, depth: int = 0
) -> dict[str, tuple[str, str]]:
    """``made`` event id -> (the cause or node id it made, identity) for every cause (or node)
    ``run`` created or inherited; a copied event's identity is that of its original in the source run."""
    events = list(store.read(run, types=(made, RunForked)))
    fork = next(((e.seq, f.source_run) for e in events if isinstance(f := e.event, RunForked)), None)
    inherited = _creations(store, fork[1], made, depth + 1) if fork is not None and depth < 64 else {}
    out: dict[str, tuple[str, str]] = {}
    for e in events:
        match e.event:
            case CauseCreated(cause_id=made_id) | NodeCreated(node_id=made_id):
                identity = f"{run}:{e.event_id}"
                if fork is not None and e.seq < fork[0]:  # copied by the fork
                    original = source_event_id(e.event_id, fork[1], run)
                    identity = inherited.get(original, ("", f"{fork[1]}:{original}"))[1]
                out[e.event_id] = (made_id, identity)
    return out


def identities(store: EventReader, run: str, made: type[CauseCreated | NodeCreated] = CauseCreated) -> dict[str, str]:
    """Cause id (or node id) -> the identity of the cause: the ``cause.created`` (``node.created``)
    event that made it, in the run where it was first appended (a fork inherits its source's causes
    up to the fork; causes created after it in two runs never share an identity, even when they
    share an id)."""
    return dict(_creations(store, run, made).values())


ROUND_FIGURES = ("heldout_acc", "pseudo_label_acc", "retained_label_acc")
"""The round's figures ``memory diff`` sets side by side, where the commits have them."""


@validated
def diff_runs(store: Recorder, a: str, b: str, at_round: int | None = None) -> RunDiff:
    """Causes whose state or frequency differ, causes and nodes in one run only, and F_t and
    ε_{t+1} side by side, at ``at_round`` (default: each run's last committed round).

    Causes are matched by identity (the event that created them), not by id: after a fork, the
    same id may name different causes in the two runs; those are listed in ``same_id_differs``
    and count as one cause only in each run. Skill nodes are matched the same way (their
    ``node.created`` event; ``same_node_id_differs``)."""
    memories: list[Memory] = []
    runs = store.runs()
    for run in (a, b):
        if run not in runs:
            raise NotFound(f"no run {run!r} in the database{did_you_mean(run, runs)}")
        rounds = committed_rounds(store, run)
        if at_round is not None and at_round not in rounds:
            raise ForkError(f"round {at_round} of run {run!r} is not committed")
        memories.append(load_memory(store, run, at_round if at_round is not None else max(rounds, default=0)))
    ma, mb = memories
    ida, idb = identities(store, a), identities(store, b)
    key_a = {cid: ida.get(cid, f"id:{cid}") for cid in ma.causes}  # a cause without its event: by id
    key_b = {cid: idb.get(cid, f"id:{cid}") for cid in mb.causes}
    by_key_b = {k: cid for cid, k in key_b.items()}
    order = lambda c: (len(c), c)  # noqa: E731  (C2 before C10)
    causes: list[CauseDiffers] = []
    only: dict[str, list[str]] = {a: [], b: []}
    matched_b: set[str] = set()
    for cid in sorted(ma.causes, key=order):
        other = by_key_b.get(key_a[cid])
        if other is None:
            only[a].append(cid)
            continue
        matched_b.add(other)
        ra, rb = _cause_side(ma, cid), _cause_side(mb, other)
        if (ra.state, ra.frequency) != (rb.state, rb.frequency):
            both = cid if cid == other else f"{cid}/{other}"
            causes.append(CauseDiffers(both, (ra, rb), ma.causes[cid].description))
    only[b] = sorted((cid for cid in mb.causes if cid not in matched_b), key=order)
    same_id = sorted((cid for cid in set(ma.causes) & set(mb.causes) if key_a[cid] != key_b[cid]), key=order)
    nia, nib = identities(store, a, NodeCreated), identities(store, b, NodeCreated)
    nodes_a = {nid: nia.get(nid, f"id:{nid}") for nid in ma.nodes}  # node id -> identity
    nodes_b = {nid: nib.get(nid, f"id:{nid}") for nid in mb.nodes}
    node_keys_a, node_keys_b = set(nodes_a.values()), set(nodes_b.values())

    def schedule_row(run: str, m: Memory) -> ScheduleRow:
        s = schedule(m)
        row = next((r for r in round_stats(store, run) if r.round == m.committed), None)
        return ScheduleRow(
            m.committed,
            s.F,
            s.epsilon,
            m.k,
            len(m.causes),
            len(m.active()),
            len(m.mastered()),
            len(m.nodes),
            **{name: row.number(name) if row is not None else None for name in ROUND_FIGURES},
        )

    return RunDiff(
        runs=(a, b),
        t=at_round,
        schedule=(schedule_row(a, ma), schedule_row(b, mb)),
        causes_differing=causes,
        causes_only_in=only,
        same_id_differs=[
            SameIdDiffers(cid, (ma.causes[cid].description, mb.causes[cid].description)) for cid in same_id
        ],
        nodes_only_in={
            a: sorted((n for n, k in nodes_a.items() if k not in node_keys_b), key=order),
            b: sorted((n for n, k in nodes_b.items() if k not in node_keys_a), key=order),
        },
        same_node_id_differs=sorted((n for n in set(nodes_a) & set(nodes_b) if nodes_a[n] != nodes_b[n]), key=order),
    )
