"""The one mutator: apply an event to a memory, checking the log's invariants.

``evolve`` never decides anything (that is :mod:`diagevo.memory.deciders`); it only applies.
A log that breaks an invariant raises :class:`InvariantError` with the reason in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from diagevo.memory.state import Cause, CauseState, Memory, Node

Row = tuple[int, int, str, Mapping[str, Any]]  # (seq, round, type, data)


class InvariantError(ValueError):
    """The log breaks a rule of the memory (the message says which)."""


def _with_cause(mem: Memory, cause: Cause, state: CauseState, frequency: int) -> dict[str, Any]:
    causes = mem.causes.copy()
    causes[cause.id] = Cause(cause.id, cause.node, cause.description, state, frequency, cause.created_round)
    return {"causes": MappingProxyType(causes)}


def _cause(mem: Memory, cause_id: str) -> Cause:
    try:
        return mem.causes[cause_id]
    except KeyError:
        raise InvariantError(f"unknown cause {cause_id!r}") from None


def _node(mem: Memory, node_id: str) -> Node:
    try:
        return mem.nodes[node_id]
    except KeyError:
        raise InvariantError(f"unknown node {node_id!r}") from None


def _run_started(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    raise InvariantError(f"run {mem.run!r} started twice")


def _configured(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    configured = start(mem.run, d, mem.last_seq)
    return {"k": configured.k, "config": configured.config}


def _round_committed(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    F = mem.F
    return {
        "committed": rnd,
        "open_round": None,
        "committed_rounds": mem.committed_rounds | {rnd},
        "F1": mem.F1 if mem.F1 is not None or F == 0 else F,
    }


def _promoted(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    cause = _cause(mem, d["cause_id"])
    if not cause.active:
        raise InvariantError(f"cause {cause.id} promoted but it is not Active")
    return _with_cause(mem, cause, CauseState.MASTERED, 0)


def _reactivated(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    cause = _cause(mem, d["cause_id"])
    if cause.active:
        raise InvariantError(f"cause {cause.id} reactivated but it is not Mastered")
    return _with_cause(mem, cause, CauseState.ACTIVE, 0)


def _attributed(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    cause = _cause(mem, d["cause_id"])
    if not cause.active:
        raise InvariantError(
            f"failure {d['failure_id']} attributed to Mastered cause {cause.id} without cause.reactivated"
        )
    return _with_cause(mem, cause, CauseState.ACTIVE, cause.frequency + 1)


def _node_created(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    if d["node_id"] in mem.nodes:
        raise InvariantError(f"node {d['node_id']!r} created twice")
    nodes = mem.nodes.copy()
    nodes[d["node_id"]] = Node(d["node_id"], d["label"])
    return {"nodes": MappingProxyType(nodes), "n_nodes_created": mem.n_nodes_created + 1}


def _cause_created(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    if d["cause_id"] in mem.causes:
        raise InvariantError(f"cause {d['cause_id']!r} created twice")
    _node(mem, d["node_id"])
    cause = Cause(d["cause_id"], d["node_id"], d["description"], CauseState.ACTIVE, 1, rnd)
    causes = mem.causes.copy()
    causes[cause.id] = cause
    return {"causes": MappingProxyType(causes), "n_causes_created": mem.n_causes_created + 1}


def _merged(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    survivor, absorbed = _node(mem, d["survivor"]), _node(mem, d["absorbed"])
    if survivor.id == absorbed.id:
        raise InvariantError(f"node {survivor.id} merged with itself")
    nodes = mem.nodes.copy()
    del nodes[absorbed.id]
    nodes[survivor.id] = Node(survivor.id, d["label"])
    causes = {
        cid: replace(c, node=survivor.id) if c.node == absorbed.id else c for cid, c in mem.causes.items()
    }
    return {"nodes": MappingProxyType(nodes), "causes": MappingProxyType(causes)}


def _nothing(mem: Memory, rnd: int, d: Mapping[str, Any]) -> dict[str, Any]:
    return {}


_APPLY: dict[str, Callable[[Memory, int, Mapping[str, Any]], dict[str, Any]]] = {
    "run.started": _run_started,
    "round.committed": _round_committed,
    "run.configured": _configured,
    "cause.promoted": _promoted,
    "cause.reactivated": _reactivated,
    "failure.attributed": _attributed,
    "node.created": _node_created,
    "cause.created": _cause_created,
    "nodes.merged": _merged,
}
# Evidence and bookkeeping: they open a round but change nothing.
MEMORY_TYPES = frozenset(_APPLY) - {"run.started"}


def start(run: str, data: Mapping[str, Any], seq: int = 0) -> Memory:
    """The memory right after ``run.started``."""
    config = dict(data.get("config", {}))
    k = config.get("k", config.get("memory", {}).get("k") if isinstance(config.get("memory"), dict) else None)
    if not isinstance(k, (int, float)) or k <= 0:
        raise InvariantError("run.started needs a positive k in its config")
    return Memory(run=run, k=float(k), seed=int(data.get("seed", 0)), config=MappingProxyType(config), last_seq=seq)


# Bookkeeping about a round that is over: a checkpoint evaluated, or chosen, after the fact.
RETROSPECTIVE_TYPES = frozenset({"eval.recorded", "checkpoint.selected", "run.forked"})


def evolve(mem: Memory, type: str, round: int, data: Mapping[str, Any]) -> Memory:
    """Apply one event. Rounds move forward one commit at a time; ``last_seq`` is set by ``fold``.
    Only retrospective bookkeeping may name a round that is already committed (round 0, the
    base model, included)."""
    if round != mem.committed + 1:
        if type in RETROSPECTIVE_TYPES and round <= mem.committed:
            return mem
        if round > mem.committed:
            raise InvariantError(f"round {round} starts before round {mem.committed + 1} was committed")
        if type == "round.committed" and round in mem.committed_rounds:
            raise InvariantError(f"round {round} committed twice")
        raise InvariantError(f"round {round} goes backwards: round {mem.committed} is already committed")
    apply = _APPLY.get(type)
    if apply is None:  # evidence and bookkeeping
        return mem if mem.open_round == round else replace(mem, open_round=round)
    changes = apply(mem, round, data)
    if type != "round.committed":
        changes["open_round"] = round
    return replace(mem, **changes)


def _start_or_evolve(mem: Memory | None, run: str, seq: int, rnd: int, etype: str, data: Mapping[str, Any]) -> Memory:
    if mem is not None:
        return evolve(mem, etype, rnd, data)
    if etype != "run.started":
        raise InvariantError(f"run {run!r} has {etype} before run.started")
    if rnd != 0:
        raise InvariantError("run.started must be in round 0")
    return start(run, data, seq)


def fold(rows: Iterable[Row], run: str, memory: Memory | None = None) -> Memory:
    """Fold ``(seq, round, type, data)`` rows of one run, starting from ``memory`` (a snapshot)
    or from the run's ``run.started``."""
    mem, seq = memory, memory.last_seq if memory else 0
    for seq, rnd, etype, data in rows:
        mem = _start_or_evolve(mem, run, seq, rnd, etype, data)
    if mem is None:
        raise InvariantError(f"run {run!r} has no events")
    return mem if mem.last_seq == seq else replace(mem, last_seq=seq)


def fold_until(rows: Iterable[Row], run: str, round: int, memory: Memory | None = None) -> Memory:
    """M_round: fold up to and including the ``round.committed`` of ``round``."""
    mem = memory
    if mem is not None and mem.committed >= round:
        if mem.committed == round:
            return mem
        raise InvariantError(f"the starting memory is past round {round}")
    for seq, rnd, etype, data in rows:
        mem = _start_or_evolve(mem, run, seq, rnd, etype, data)
        if etype == "round.committed" and rnd == round:
            return replace(mem, last_seq=seq)
    last = mem.committed if mem is not None else 0
    raise InvariantError(f"round {round} was never committed (last committed round: {last})")
