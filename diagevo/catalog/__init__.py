"""The catalog of event types, read by every layer: one class per type
(:mod:`diagevo.catalog.events`), each declaring its name, its kind, whether the fold applies it,
which long texts the log keeps beside its chained data, which ids it names (the log's key
columns) and how the per-round statistics count it (:class:`diagevo.catalog.event.Event`); what
is derived from those declarations is in :mod:`diagevo.catalog.registry`. Beside the events, the
ids every producer derives (:mod:`diagevo.catalog.ids`, ``failure_id`` among them); the failure
record a trainer hands the diagnosis is :mod:`diagevo.catalog.failure`, imported where it is used
(a real pydantic model: the commands that only read the log do without it).

Everything is imported from here, loaded with the package: every command that reads the log
builds the event classes, and ``diagevo --help`` loads no command's module (none imports this).
"""

# ruff: noqa: F401  (the imports below are the catalog's names)
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
    BatchWithdrawn,
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
from diagevo.catalog.ids import failure_id
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
    stored_event,
    type_names,
)
from diagevo.catalog.stored import Stamp, StoredEvent, Typed, UnreadableRow, of_type
