"""The catalog of event types: one entry per type, read by every layer.

Each entry says what kind of event it is, whether the fold applies it, which long texts the log
keeps beside its chained data, which ids it names (the log's key columns), how the per-round
statistics count it, and which pydantic model validates its ``data``
(:mod:`diagevo.schemas`, loaded on first use so that a read builds no model).

Kinds:

- ``milestone``: where a run and its rounds stand (the round protocol's states);
- ``memory``: changes the memory M_t (the fold applies it);
- ``evidence``: what a round observed (questions, their scores, failures and their diagnoses);
- ``bookkeeping``: the loop's and the diagnostician's notes; it opens a round and changes nothing;
- ``retrospective``: about a round already committed (a checkpoint evaluated or chosen later).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

SCHEMA_VERSION = 1
"""The version of the event envelope every stored event carries."""

KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")
"""Data fields that name a cause, a failure or a question: each is also a column of ``events``,
filled at append time (a string value, else NULL), with a partial index on (run_id, field)."""

CAUSE_FIELDS = KEY_FIELDS[:4]
"""The key fields that name a cause."""


class Kind(StrEnum):
    MILESTONE = "milestone"
    MEMORY = "memory"
    EVIDENCE = "evidence"
    BOOKKEEPING = "bookkeeping"
    RETROSPECTIVE = "retrospective"


@dataclass(frozen=True)
class EventType:
    """One event type of the catalog."""

    name: str
    kind: Kind
    model_name: str  # its data model in diagevo.schemas
    folded: bool = False  # the fold applies it (it changes M_t, or starts or commits it)
    texts: tuple[str, ...] = ()  # long texts kept in the event's row, named in data by their sha256
    keys: tuple[str, ...] = ()  # the KEY_FIELDS its data names
    counted: str | None = None  # its column in the per-round statistics
    counted_if: str | None = None  # ...counted only when this boolean data field is true


CATALOG: dict[str, EventType] = {
    t.name: t
    for t in (
        EventType("run.started", Kind.MILESTONE, "RunStarted", folded=True),
        EventType("run.configured", Kind.MEMORY, "RunConfigured", folded=True),
        EventType("round.started", Kind.MILESTONE, "RoundStarted"),
        EventType(
            "question.generated",
            Kind.EVIDENCE,
            "QuestionGenerated",
            texts=("text",),
            keys=("question_id", "active_cause", "mastered_cause"),
            counted="questions",
        ),
        EventType(
            "question.scored",
            Kind.EVIDENCE,
            "QuestionScored",
            texts=("reference",),
            keys=("question_id",),
            counted="retained",
            counted_if="retained",
        ),
        EventType("promotions.decided", Kind.MILESTONE, "PromotionsDecided"),
        EventType(
            "cause.promoted", Kind.MEMORY, "CausePromoted", folded=True, keys=("cause_id",), counted="promotions"
        ),
        EventType(
            "failure.recorded",
            Kind.EVIDENCE,
            "FailureRecorded",
            texts=("response", "reference"),
            keys=("failure_id", "question_id"),
            counted="failures",
        ),
        EventType(
            "failure.diagnosed", Kind.EVIDENCE, "FailureDiagnosed", texts=("raw",), keys=("failure_id", "matched_cause")
        ),
        EventType(
            "diagnosis.failed",
            Kind.BOOKKEEPING,
            "DiagnosisFailed",
            texts=("raw",),
            keys=("failure_id",),
            counted="failed_diagnoses",
        ),
        EventType(
            "failure.attributed",
            Kind.MEMORY,
            "FailureAttributed",
            folded=True,
            keys=("failure_id", "cause_id"),
            counted="attributions",
        ),
        EventType(
            "cause.reactivated",
            Kind.MEMORY,
            "CauseReactivated",
            folded=True,
            keys=("cause_id", "failure_id"),
            counted="reactivations",
        ),
        EventType("node.created", Kind.MEMORY, "NodeCreated", folded=True),
        EventType(
            "cause.created",
            Kind.MEMORY,
            "CauseCreated",
            folded=True,
            keys=("cause_id", "failure_id"),
            counted="new_causes",
        ),
        EventType("nodes.merged", Kind.MEMORY, "NodesMerged", folded=True, counted="merges"),
        EventType("round.committed", Kind.MILESTONE, "RoundCommitted", folded=True),
        EventType("phase.completed", Kind.BOOKKEEPING, "PhaseCompleted"),
        EventType("checkpoint.written", Kind.BOOKKEEPING, "CheckpointWritten"),
        EventType("llm.called", Kind.BOOKKEEPING, "LLMCalled", texts=("raw",)),
        EventType("eval.recorded", Kind.RETROSPECTIVE, "EvalRecorded"),
        EventType("checkpoint.selected", Kind.RETROSPECTIVE, "CheckpointSelected"),
        EventType("run.forked", Kind.RETROSPECTIVE, "RunForked"),
        EventType("run.tagged", Kind.RETROSPECTIVE, "RunTagged"),
        EventType("run.noted", Kind.RETROSPECTIVE, "RunNoted"),
        EventType("metrics.recorded", Kind.BOOKKEEPING, "MetricsRecorded"),
        EventType("train.step", Kind.BOOKKEEPING, "TrainStep"),
        EventType("checkpoint.pruned", Kind.BOOKKEEPING, "CheckpointPruned"),
    )
}


def of_kind(*kinds: Kind) -> frozenset[str]:
    """The names of the types of these kinds."""
    return frozenset(t.name for t in CATALOG.values() if t.kind in kinds)


FOLDED = frozenset(t.name for t in CATALOG.values() if t.folded)
"""What the fold applies: the rows a replay of the memory reads."""

MILESTONES = of_kind(Kind.MILESTONE)
"""Where a run and its rounds stand: the rows the round protocol's state reads."""

RETROSPECTIVE = of_kind(Kind.RETROSPECTIVE)
"""Types that may name a round already committed."""

TEXT_FIELDS: dict[str, tuple[str, ...]] = {t.name: t.texts for t in CATALOG.values() if t.texts}
"""Type -> the fields whose text the log keeps beside the chained data."""

COUNTED: dict[str, str] = {t.name: t.counted for t in CATALOG.values() if t.counted}
"""Type -> its column in the per-round statistics."""


def config_k(config: Mapping[str, Any]) -> float | None:
    """The k of Eq. 1 a run's config carries (``config.k``, else ``config.memory.k``), or None
    when it holds no positive number there: the one place k is looked up in a stored config."""
    memory = config.get("memory")
    k = config.get("k", memory.get("k") if isinstance(memory, Mapping) else None)
    if not isinstance(k, (int, float)) or isinstance(k, bool) or k <= 0:
        return None
    return float(k)
