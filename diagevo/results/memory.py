"""M_t as data: ``memory replay``, ``memory show``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CauseRow:
    """One cause of a memory: its node, description, state (``active``/``mastered``) and f(e)."""

    cause_id: str
    node: str
    description: str
    state: str
    frequency: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.cause_id,
            "node": self.node,
            "description": self.description,
            "state": self.state,
            "frequency": self.frequency,
        }


@dataclass(frozen=True)
class NodeRow:
    """One skill node: its label and the ids of its causes."""

    node_id: str
    label: str
    causes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.node_id, "label": self.label, "causes": list(self.causes)}


@dataclass(frozen=True)
class MemoryView:
    """M_t as data (``memory replay --json``): its causes and nodes, F_t, F_1, k, and the
    schedule it leaves for the next round (ε_{t+1}, p_{t+1}(e) by cause id)."""

    run: str
    t: int
    F: int
    F1: int | None
    k: float
    epsilon_next: float
    p_next: Mapping[str, float]
    causes: tuple[CauseRow, ...]
    nodes: tuple[NodeRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "round": self.t,
            "F": self.F,
            "F1": self.F1,
            "k": self.k,
            "epsilon_next": self.epsilon_next,
            "p_next": dict(self.p_next),
            "causes": [c.to_dict() for c in self.causes],
            "nodes": [n.to_dict() for n in self.nodes],
        }


@dataclass(frozen=True)
class CurrentMemory(MemoryView):
    """The memory after the run's last event (``memory show --json``): a :class:`MemoryView`, the round
    still open, if any, and the diagevo versions that opened the run and committed M_t (None: not recorded)."""

    open_round: int | None = None
    diagevo: str | None = None
    committed_diagevo: str | None = None

    def to_dict(self) -> dict[str, Any]:
        versions = {"diagevo": self.diagevo, "committed_diagevo": self.committed_diagevo}
        return {**super().to_dict(), "open_round": self.open_round, **versions}
