"""The catalog of event types, read by every layer: one class per type
(:mod:`diagevo.catalog.events`), each declaring its name, its kind, whether the fold applies it,
which long texts the log keeps beside its chained data, which ids it names (the log's key
columns) and how the per-round statistics count it (:class:`diagevo.catalog.event.Event`); what
is derived from those declarations is in :mod:`diagevo.catalog.registry`.

Everything is imported from here and loaded on first use: the classes need pydantic, and what
needs only the names (the CLI's help) reads :mod:`diagevo.catalog.names` without loading them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagevo.catalog.event import (
        CAUSE_FIELDS,
        KEY_FIELDS,
        Event,
        InvalidEvent,
        Kind,
        NewerEvent,
        version_problem,
    )
    from diagevo.catalog.events import (
        EVENT_CLASSES,
        CauseCreated,
        CausePromoted,
        CauseReactivated,
        CheckpointPruned,
        CheckpointSelected,
        CheckpointWritten,
        DiagnosisFailed,
        EvalRecorded,
        FailureAttributed,
        FailureDiagnosed,
        FailureRecorded,
        LLMCalled,
        MetricsRecorded,
        NodeCreated,
        NodesMerged,
        PhaseCompleted,
        PromotionsDecided,
        QuestionGenerated,
        QuestionScored,
        RoundCommitted,
        RoundStarted,
        RunConfigured,
        RunForked,
        RunNoted,
        RunStarted,
        RunTagged,
        TrainStep,
    )
    from diagevo.catalog.registry import (
        CATALOG,
        COUNTED,
        FOLDED,
        MEMORY_TYPES,
        MILESTONES,
        RETROSPECTIVE,
        SCHEMA_VERSION,
        TEXT_FIELDS,
        EventTypes,
        of_kind,
        type_names,
    )


def __getattr__(name: str) -> Any:
    """A name of the catalog, loaded (with every event class) on first use."""
    for module in _MODULES:  # not ``from . import``: that would ask here again
        value = getattr(import_module(module), name, _MISSING)
        if value is not _MISSING:
            globals()[name] = value
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_MODULES = ("diagevo.catalog.registry", "diagevo.catalog.events", "diagevo.catalog.event")
_MISSING = object()


__all__ = [
    "CATALOG",
    "CAUSE_FIELDS",
    "COUNTED",
    "CauseCreated",
    "CausePromoted",
    "CauseReactivated",
    "CheckpointPruned",
    "CheckpointSelected",
    "CheckpointWritten",
    "DiagnosisFailed",
    "EVENT_CLASSES",
    "EvalRecorded",
    "Event",
    "EventTypes",
    "FOLDED",
    "FailureAttributed",
    "FailureDiagnosed",
    "FailureRecorded",
    "InvalidEvent",
    "KEY_FIELDS",
    "Kind",
    "LLMCalled",
    "MEMORY_TYPES",
    "MILESTONES",
    "MetricsRecorded",
    "NodeCreated",
    "NewerEvent",
    "NodesMerged",
    "PhaseCompleted",
    "PromotionsDecided",
    "QuestionGenerated",
    "QuestionScored",
    "RETROSPECTIVE",
    "RoundCommitted",
    "RoundStarted",
    "RunConfigured",
    "RunForked",
    "RunNoted",
    "RunStarted",
    "RunTagged",
    "SCHEMA_VERSION",
    "TEXT_FIELDS",
    "TrainStep",
    "version_problem",
    "of_kind",
    "type_names",
]
