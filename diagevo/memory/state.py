"""The error-cause memory M_t = (V_t, E_t, a_t) of Eq. 4, as immutable values.

A :class:`Memory` is only ever produced by folding events (:mod:`diagevo.memory.fold`); code that
wants to change it decides new events instead (:mod:`diagevo.memory.deciders`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NotRequired, TypedDict

EMPTY: MappingProxyType[str, Any] = MappingProxyType({})


class CauseState(StrEnum):
    ACTIVE = "active"
    MASTERED = "mastered"


def id_number(prefix: str, given: str) -> int:
    """The number of an id the memory gives (``C18`` -> 18; 0 for an id of another shape, or of
    more than nine digits): the fold keeps its counter at least this high, so a log one of whose
    creations was passed over (the counter one short of the highest id) never hands out an id
    twice."""
    digits = given[len(prefix) :] if given.startswith(prefix) else ""
    return int(digits) if 0 < len(digits) <= 9 and digits.isascii() and digits.isdigit() else 0


@dataclass(frozen=True, slots=True)
class Cause:
    id: str
    node: str
    description: str
    state: CauseState
    frequency: int
    created_round: int

    @property
    def active(self) -> bool:
        return self.state is CauseState.ACTIVE


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    label: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A stored row the fold refused and passed over: its seq, its type and the rule in words.
    Whoever writes a log may append a row the rules refuse (the database keeps the log whole, not
    its meaning); the memory keeps the refusals it decided with itself, so that every reader of
    the memory (and of a snapshot of it) sees the same rows refused, decided once."""

    seq: int
    type: str
    why: str


def node_order(node_id: str) -> tuple[int, int, str]:
    """The sort key of a skill node's id, as people count them: N2 before N10; an id of another
    shape (a log written by hand) after them, in text order. Only ASCII digits count:
    ``'N²'.isdigit()`` holds but ``int('²')`` fails."""
    digits = node_id[1:]
    numbered = digits.isascii() and digits.isdigit() and len(digits) < 19
    return (0, int(digits), "") if numbered else (1, 0, node_id)


class MemoryImage(TypedDict):
    """The plain-JSON image of a memory a snapshot stores (:meth:`Memory.to_json`): its scalars,
    its nodes as ``[id, label]`` and its causes as ``[id, node, description, state, frequency,
    created_round]``, lists rather than objects to keep a snapshot of many causes small."""

    run: str
    k: float
    seed: NotRequired[int]  # a snapshot older than the seed in it: 0
    config: NotRequired[dict[str, Any]]  # ... older than the config in it: none
    committed: int
    open_round: int | None
    F1: int | None
    n_causes_created: int
    n_nodes_created: int
    last_seq: int
    committed_rounds: list[int]
    nodes: list[list[str]]
    causes: list[list[Any]]
    refused: NotRequired[list[list[Any]]]  # [seq, type, why] of each row refused; absent: none


@dataclass(frozen=True, slots=True)
class Memory:
    """The memory of one run after some prefix of its log.

    ``committed`` is the last committed round (0 before the first commit); ``open_round`` is the
    round whose events follow that commit, if any. ``F1`` is the reference failure count of Eq. 1:
    F at the commit of round 1, or the first later non-zero F when round 1 ended with none.
    """

    run: str
    k: float
    seed: int = 0
    config: MappingProxyType[str, Any] = field(default_factory=lambda: EMPTY)
    committed: int = 0
    open_round: int | None = None
    F1: int | None = None
    causes: MappingProxyType[str, Cause] = field(default_factory=lambda: EMPTY)
    nodes: MappingProxyType[str, Node] = field(default_factory=lambda: EMPTY)
    n_causes_created: int = 0
    n_nodes_created: int = 0
    last_seq: int = 0
    committed_rounds: frozenset[int] = field(default_factory=frozenset)
    refused: tuple[Refusal, ...] = ()  # the rows of the run the fold refused, in seq order

    @property
    def F(self) -> int:
        """F_t: total active-episode frequency over Active causes."""
        return sum(c.frequency for c in self.causes.values() if c.active)

    def active(self) -> list[Cause]:
        return [c for c in self.causes.values() if c.active]

    def mastered(self) -> list[Cause]:
        return [c for c in self.causes.values() if not c.active]

    def members(self, node_id: str) -> list[Cause]:
        return [c for c in self.causes.values() if c.node == node_id]

    def nodes_in_order(self) -> list[Node]:
        """The skill nodes as people count them: N2 before N10, ids of another shape after them (``node_order``)."""
        return sorted(self.nodes.values(), key=lambda node: node_order(node.id))

    def next_cause_id(self) -> str:
        """The id the next cause gets: past every id of this shape the memory holds (``id_number``)."""
        return f"C{self.n_causes_created + 1}"

    def next_node_id(self) -> str:
        return f"N{self.n_nodes_created + 1}"

    def to_json(self) -> MemoryImage:
        """A plain-JSON image of the memory (what snapshots store; ``refused`` only where the fold
        refused a row, so that a snapshot saved before refusals were kept equals the fold)."""
        image: MemoryImage = {
            "run": self.run,
            "k": self.k,
            "seed": self.seed,
            "config": dict(self.config),
            "committed": self.committed,
            "open_round": self.open_round,
            "F1": self.F1,
            "n_causes_created": self.n_causes_created,
            "n_nodes_created": self.n_nodes_created,
            "last_seq": self.last_seq,
            "committed_rounds": sorted(self.committed_rounds),
            "nodes": [[n.id, n.label] for n in self.nodes.values()],
            "causes": [
                [c.id, c.node, c.description, c.state.value, c.frequency, c.created_round] for c in self.causes.values()
            ],
        }
        if self.refused:
            image["refused"] = [[r.seq, r.type, r.why] for r in self.refused]
        return image

    @classmethod
    def from_json(cls, data: MemoryImage) -> Memory:
        return cls(
            run=data["run"],
            k=data["k"],
            seed=data.get("seed", 0),
            config=MappingProxyType(dict(data.get("config", {}))),
            committed=data["committed"],
            open_round=data["open_round"],
            F1=data["F1"],
            n_causes_created=data["n_causes_created"],
            n_nodes_created=data["n_nodes_created"],
            last_seq=data["last_seq"],
            committed_rounds=frozenset(data["committed_rounds"]),
            nodes=MappingProxyType({i: Node(i, label) for i, label in data["nodes"]}),
            causes=MappingProxyType(
                {c[0]: Cause(c[0], c[1], c[2], CauseState(c[3]), c[4], c[5]) for c in data["causes"]}
            ),
            refused=tuple(Refusal(seq, type_, why) for seq, type_, why in data.get("refused", ())),
        )
