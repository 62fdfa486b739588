"""What a diagnostician decides, independent of who decides it.

The four semantic decisions of Appendix J (Prompts 1-4) form the :class:`Diagnostician`
protocol. The LLM client implements it over an OpenAI-compatible API; the simulator world
implements it by comparing its text trajectories. Code around it is shared: the routing
rules (:mod:`diagevo.diagnosis.routing`) and the round that asks and appends
(:mod:`diagevo.diagnosis.pipeline`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from diagevo.catalog import LLMCalled
from diagevo.catalog.failure import Failure
from diagevo.views.index import Embedder

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class KnownCause:
    """A cause as shown to the diagnostician: id, state (active/mastered), description."""

    id: str
    state: str
    description: str


@dataclass(frozen=True, slots=True)
class NodeView:
    """A skill node as shown to the diagnostician (Prompt 3 uses one representative cause,
    Prompt 4 all of them)."""

    id: str
    label: str
    causes: tuple[str, ...] = ()

    @property
    def representative(self) -> str:
        return self.causes[0] if self.causes else ""


class ExtractionInput(Failure):
    """What Prompt 1 reads: a failure (its ``question``, ``pseudo_label``, ``response``,
    ``reference``) with the causes its question was generated for as the memory holds them
    (``known``, filled in by the pipeline from ``known_causes``: :meth:`of`)."""

    known: tuple[KnownCause, ...] = ()

    @classmethod
    def of(cls, failure: Failure, known: tuple[KnownCause, ...]) -> ExtractionInput:
        """``failure`` with ``known``, its fields taken as they are (checked when it was built
        or stored)."""
        return cls.model_construct(**dict(failure), known=known)


@dataclass(frozen=True, slots=True)
class Extraction:
    matched_cause_id: str | None
    error_cause: str | None  # both None: a non-skill slip


@dataclass(frozen=True, slots=True)
class Dedup:
    duplicate: bool
    matched_cause_id: str | None


@dataclass(frozen=True, slots=True)
class Assignment:
    create_new_node: bool
    new_node_label: str | None
    assigned_node: str | None


@dataclass(frozen=True, slots=True)
class Consolidation:
    merge: bool
    merged_label: str | None


@dataclass(frozen=True, slots=True)
class Reply(Generic[T]):
    """A decision and how it was reached. ``value`` is None when no valid decision was obtained;
    ``error`` then says why in one line."""

    value: T | None
    raw: str = ""
    model: str = ""
    attempts: int = 1
    error: str | None = None
    calls: tuple[LLMCalled, ...] = ()  # one per HTTP attempt, as the log records it


@runtime_checkable  # a public function's argument is checked against it (diagevo.text.calls)
class Diagnostician(Protocol):
    """Prompts 1-4. Implementations must only return ids that were supplied to them; the
    pipeline checks again and treats an unknown id as a failed decision."""

    model_name: str
    """The name ``failure.diagnosed`` and ``llm.called`` record as the diagnosing model."""

    async def extract(self, item: ExtractionInput) -> Reply[Extraction]:
        """Prompt 1: the error cause of one failed response, against its reference. Either one
        of ``item.known`` (``matched_cause_id``), a new 10-20 word ``error_cause``, or both None
        (a non-skill slip)."""
        ...

    async def deduplicate(self, new_cause: str, candidates: Sequence[KnownCause]) -> Reply[Dedup]:
        """Prompt 2: whether ``new_cause`` says the same as one of ``candidates`` (the causes
        the embedding screen put at or above θ_dup), and which."""
        ...

    async def assign_node(self, new_cause: str, shortlist: Sequence[NodeView]) -> Reply[Assignment]:
        """Prompt 3: the skill node of a new cause among ``shortlist`` (the nearest nodes), or
        a new node with its label."""
        ...

    async def consolidate(self, a: NodeView, b: NodeView) -> Reply[Consolidation]:
        """Prompt 4: whether two similar nodes are one skill, and the merged node's label."""
        ...


__all__ = [
    "Assignment",
    "Consolidation",
    "Dedup",
    "Diagnostician",
    "Embedder",
    "Extraction",
    "ExtractionInput",
    "KnownCause",
    "NodeView",
    "Reply",
]
