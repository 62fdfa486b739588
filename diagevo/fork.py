"""What-if experiments from a stored run: ``fork`` a run at a committed round, ``diff`` two runs.

A fork's log is the source's log through round N's ``round.committed``, re-stamped with the new
run id (its own hash chain), followed by ``run.forked`` naming the source run, the round and the
source's hash there. ``diagevo train --run NEW --resume --set ...`` then continues it from round
N+1 (with round N's checkpoints, which the copied ``checkpoint.written`` events point at).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagevo.events.schemas import EventIn, new_event, validate_event
from diagevo.events.store import EventStore
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.replay import committed_rounds, load_memory, refresh_snapshots


class ForkError(ValueError):
    """A fork or diff that cannot be made as asked."""


def _new_id(event_id: str, source: str, new: str) -> str:
    prefix = f"{source}/"
    return new + "/" + event_id[len(prefix):] if event_id.startswith(prefix) else f"{new}/fork/{event_id}"


def fork_run(store: EventStore, source: str, round: int, new: str) -> dict[str, Any]:
    """Copy ``source`` through round ``round``'s commit into run ``new``; returns the provenance."""
    runs = store.runs()
    if source not in runs:
        raise ForkError(f"no run {source!r} to fork")
    if new in runs:
        raise ForkError(f"run {new!r} exists already: pick a new name")
    if not new.strip():
        raise ForkError("the new run needs a name")
    if round not in committed_rounds(store, source):
        raise ForkError(f"round {round} of run {source!r} is not committed: fork at a committed round")
    commit_seq = next(e.seq for e in store.read(source, types=("round.committed",)) if e.round == round)
    events: list[EventIn] = []
    last_hash = ""
    for e in store.read(source, upto_seq=commit_seq, texts=True):
        events.append(validate_event({"type": e.type, "run": new, "round": e.round,
                                      "event_id": _new_id(e.event_id, source, new), "data": e.data}))
        last_hash = e.hash
    provenance = {"source_run": source, "source_round": round, "source_hash": last_hash, "source_seq": commit_seq}
    events.append(new_event("run.forked", new, round, f"{new}/{round}/run.forked", **provenance))
    store.append(events)
    refresh_snapshots(store, new)
    return provenance | {"run": new, "events": len(events)}


def _cause_row(m: Memory, cid: str) -> dict[str, Any] | None:
    c = m.causes.get(cid)
    if c is None:
        return None
    return {"state": c.state.value, "frequency": c.frequency, "node": c.node}


def diff_runs(store: EventStore, a: str, b: str, round: int | None = None) -> dict[str, Any]:
    """Causes whose state or frequency differ, causes and nodes in one run only, and F_t and
    ε_{t+1} side by side, at ``round`` (default: each run's last committed round)."""
    memories: list[Memory] = []
    for run in (a, b):
        if run not in store.runs():
            raise ForkError(f"no run {run!r}")
        rounds = committed_rounds(store, run)
        if round is not None and round not in rounds:
            raise ForkError(f"round {round} of run {run!r} is not committed")
        memories.append(load_memory(store, run, round if round is not None else max(rounds, default=0)))
    ma, mb = memories
    causes = []
    only = {a: [], b: []}  # type: dict[str, list[str]]
    for cid in sorted(set(ma.causes) | set(mb.causes), key=lambda c: (len(c), c)):
        ra, rb = _cause_row(ma, cid), _cause_row(mb, cid)
        if ra is None or rb is None:
            only[a if rb is None else b].append(cid)
            continue
        if (ra["state"], ra["frequency"]) != (rb["state"], rb["frequency"]):
            desc = (ma.causes[cid].description, mb.causes[cid].description)
            causes.append({"cause_id": cid, a: ra, b: rb, "description": desc[0], "same_text": desc[0] == desc[1]})
    nodes_a = {n.id: n.label for n in ma.nodes.values()}
    nodes_b = {n.id: n.label for n in mb.nodes.values()}

    def schedule_row(m: Memory) -> Mapping[str, Any]:
        s = schedule(m)
        return {"round": m.committed, "F": s.F, "epsilon_next": s.epsilon, "k": m.k, "causes": len(m.causes),
                "active": len(m.active()), "mastered": len(m.mastered()), "nodes": len(m.nodes)}

    return {
        "runs": [a, b],
        "round": round,
        "schedule": {a: schedule_row(ma), b: schedule_row(mb)},
        "causes_differing": causes,
        "causes_only_in": only,
        "nodes_only_in": {a: sorted(set(nodes_a) - set(nodes_b)), b: sorted(set(nodes_b) - set(nodes_a))},
    }
