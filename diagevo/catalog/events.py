"""The event types: one class per type, each the pydantic model of its ``data`` and the
declaration of its catalog facts (the base class ``Event`` of ``diagevo.catalog.event``). The order here is the
catalog's (the reference page, the PostgreSQL registry rows, ``memory events --type``).

The facts are assigned, not annotated (``name = "run.started"``): ``Event`` declares them as class
variables, and each annotation would be evaluated again for every class a read command loads."""

from typing import Annotated, Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from diagevo.catalog.bookkeeping import (
    BatchWithdrawn,
    CheckpointPruned,
    CheckpointSelected,
    CheckpointWritten,
    EvalRecorded,
    LLMCalled,
    MetricsRecorded,
    PhaseCompleted,
    RunForked,
    RunNoted,
    RunTagged,
    TrainStep,
)
from diagevo.catalog.event import Event, Kind, absent_is_none, extra_into
from diagevo.results import Json
from diagevo.text.parsing import check_id

GenerationMode = Literal["free", "targeted", "stitched"]
Similarity = Annotated[float, Field(ge=-1.0, le=1.0, strict=True, allow_inf_nan=False)]
"""The cosine of two unit vectors (rounded to 1e-6 where it is computed), a number as written."""


# --- milestones and the memory -----------------------------------------------------------------


def _one_line(v: str | None, info: ValidationInfo) -> str | None:
    """A trainer's name or a diagevo version on one line (``runs``, ``memory show`` and ``report`` show it)."""
    return None if v is None else check_id(v, str(info.field_name), 200)


class _RunConfig(Event):
    """A run's config (the hyperparameters, at least ``k``) and its seed."""

    config: dict[str, Any]
    seed: int = Field(default=0, ge=0, strict=True)  # numpy's generators take no negative seed

    @field_validator("config")
    @classmethod
    def _a_run_config(cls, v: dict[str, Any]) -> dict[str, Any]:
        """At least k; every field known (the schema: :func:`diagevo.config.sections.config_from_record`,
        loaded when an event is validated: a read needs no config schema)."""
        from diagevo.config.sections import config_from_record

        config_from_record(v)
        return v


class RunStarted(_RunConfig):
    """A run begins: its config, its seed, the trainer that drives it (``diagevo train``, or the name
    an external trainer gives) and the diagevo version that opened it (each absent in older logs)."""

    name = "run.started"
    kind = Kind.MILESTONE
    folded = True
    class_version = 3  # 2: trainer; 3: diagevo
    stored_if_set = ("trainer", "diagevo")
    upcast_v1_v2 = staticmethod(absent_is_none("trainer"))
    upcast_v2_v3 = staticmethod(absent_is_none("diagevo"))

    trainer: str | None = None
    diagevo: str | None = None

    _names = field_validator("trainer", "diagevo")(_one_line)


class RunConfigured(_RunConfig):
    """The run's config from here on (``diagevo train --resume --set ...``): k and the switches
    of the rounds that follow. Recorded before the round it applies to."""

    name = "run.configured"
    kind = Kind.MEMORY
    folded = True


class RoundStarted(Event):
    """Round t is open: its questions, promotions and failures may be recorded."""

    name = "round.started"
    kind = Kind.MILESTONE


class QuestionGenerated(Event):
    """A candidate question of Q^cur (or Q^chal), with its generation mode and the causes it
    was asked to target: evidence for P_t(e) of Eq. 5."""

    name = "question.generated"
    kind = Kind.EVIDENCE
    texts = ("text",)
    keys = ("question_id", "active_cause", "mastered_cause")
    counted = "questions"

    question_id: str
    mode: GenerationMode
    active_cause: str | None = None
    mastered_cause: str | None = None
    text: str = ""
    node: str | None = None  # skill node of the active cause at generation time

    @model_validator(mode="after")
    def _causes_fit_mode(self) -> Self:
        want = {"free": (False, False), "targeted": (True, False), "stitched": (True, True)}[self.mode]
        if (self.active_cause is not None, self.mastered_cause is not None) != want:
            raise ValueError(f"mode {self.mode!r} does not fit active_cause/mastered_cause")
        return self


class QuestionScored(Event):
    """The votes on a question: p1, p2 over N construction responses, the pseudo-label and
    whether the double-confidence filter (Eq. 3) retained it; evidence for acc_t(e) of Eq. 6."""

    name = "question.scored"
    kind = Kind.EVIDENCE
    texts = ("reference",)
    phrases = ("pseudo_label", "majority_label")
    stored_if_set = ("majority_label", "check_score", "variant_labels")
    keys = ("question_id",)
    counted = "retained"
    counted_if = "retained"

    question_id: str
    n: int = Field(ge=1)
    p1: float = Field(ge=0.0, le=1.0)
    p2: float = Field(ge=0.0, le=1.0)
    pseudo_label: str | None = None
    retained: bool
    reference: str = ""  # the construction response kept for diagnosis (retained questions)
    # the shared-error check's verdict (filter.shared_error_check = "variants"), where it ran: the
    # plain majority where the check labelled with another answer, the label's harmonic mean of vote
    # shares over the wordings (0: no answer under every wording, not retained), each rewording's majority
    majority_label: str | None = None
    check_score: float | None = Field(default=None, ge=0.0, le=1.0)
    variant_labels: list[str | None] | None = None


class PromotionsDecided(Event):
    """Round t's promotions are decided (Eq. 5-6, once): the evidence is closed."""

    name = "promotions.decided"
    kind = Kind.MILESTONE

    promoted: list[str]
    candidates: int = Field(ge=0)


class CausePromoted(Event):
    """An Active cause is Mastered (Eq. 5-6): its accuracy over its candidates reached theta_up.
    Its frequency becomes 0."""

    name = "cause.promoted"
    kind = Kind.MEMORY
    folded = True
    keys = ("cause_id",)
    counted = "promotions"

    cause_id: str
    acc: float = Field(ge=0.0, le=1.0)
    n_candidates: int = Field(ge=1)


class FailureRecorded(Event):
    """A failed solver response to a retained question, with the construction response that
    agrees with the pseudo-label (the reference the diagnostician compares it with)."""

    name = "failure.recorded"
    kind = Kind.EVIDENCE
    texts = ("response", "reference")
    keys = ("failure_id", "question_id")
    counted = "failures"

    failure_id: str
    question_id: str
    response: str = ""
    reference: str = ""


class FailureDiagnosed(Event):
    """The diagnostician's decision on a failure: a matched stored cause, a new error cause,
    or neither (a non-skill slip). Its raw reply is stored once, in the ``llm.called`` event of
    this failure's Prompt 1 whose ``attempt`` is ``call``; ``raw`` holds it only when no call
    recorded it."""

    name = "failure.diagnosed"
    kind = Kind.EVIDENCE
    texts = ("raw",)
    phrases = ("error_cause", "model")
    keys = ("failure_id", "matched_cause")
    class_version = 2  # 2: call
    stored_if_set = ("call",)
    upcast_v1_v2 = staticmethod(absent_is_none("call"))

    failure_id: str
    matched_cause: str | None = None
    error_cause: str | None = None
    model: str = ""
    raw: str = ""
    call: int | None = Field(default=None, ge=1)  # the attempt of the llm.called holding the reply


class DiagnosisFailed(Event):
    """The diagnostician could not produce a valid decision; the round goes on without it. Its
    last reply, if any, is in the ``llm.called`` of the same failure and stage whose ``attempt``
    is ``call`` (``raw`` holds it only when no call recorded it)."""

    name = "diagnosis.failed"
    kind = Kind.BOOKKEEPING
    texts = ("raw",)
    phrases = ("reason", "model", "stage")
    keys = ("failure_id",)
    counted = "failed_diagnoses"
    class_version = 2  # 2: call
    stored_if_set = ("call",)
    upcast_v1_v2 = staticmethod(absent_is_none("call"))

    failure_id: str | None = None
    stage: str
    reason: str
    model: str = ""
    raw: str = ""
    call: int | None = Field(default=None, ge=1)  # the attempt of the llm.called holding the reply


class FailureAttributed(Event):
    """A failure is attributed to a cause (by recurrence or deduplication): f += 1. The cause
    must be Active (Eq. 7: a Mastered one is reactivated first)."""

    name = "failure.attributed"
    kind = Kind.MEMORY
    folded = True
    keys = ("failure_id", "cause_id")
    counted = "attributions"

    failure_id: str
    cause_id: str
    via: Literal["recurrence", "dedup"]
    similarity: Similarity | None = None


class CauseReactivated(Event):
    """A Mastered cause recurs and becomes Active again with frequency 0 (Eq. 7); the
    attribution that follows sets it to 1."""

    name = "cause.reactivated"
    kind = Kind.MEMORY
    folded = True
    keys = ("cause_id", "failure_id")
    counted = "reactivations"

    cause_id: str
    failure_id: str


class NodeCreated(Event):
    """A new skill node, with its label."""

    name = "node.created"
    kind = Kind.MEMORY
    folded = True
    phrases = ("label",)

    node_id: str
    label: str


class CauseCreated(Event):
    """A new error cause under a skill node, Active with frequency 1, from the failure that
    revealed it."""

    name = "cause.created"
    kind = Kind.MEMORY
    folded = True
    phrases = ("description",)
    keys = ("cause_id", "failure_id")
    counted = "new_causes"

    cause_id: str
    node_id: str
    description: str
    failure_id: str | None = None


class NodesMerged(Event):
    """Two skill nodes are consolidated (Prompt 4): the absorbed node's causes move to the
    survivor, which takes the new label; states and frequencies are unchanged."""

    name = "nodes.merged"
    kind = Kind.MEMORY
    folded = True
    phrases = ("label",)
    counted = "merges"

    survivor: str
    absorbed: str
    label: str
    similarity: Similarity | None = None

    def reparent(self, node: str) -> str:
        """The merge rule: where a cause under ``node`` lies after this merge (the absorbed
        node's causes move to the survivor; states and frequencies are unchanged)."""
        return self.survivor if node == self.absorbed else node


class RoundCommitted(Event):
    """Round t is over: M_t is the memory here. Its summary: what the commit counts from the log
    (each counted column of the catalog, F_t, epsilon_{t+1}, the ranks), the trainer's figures
    readers read (``report``, ``memory whatif``, the ablation) and its others (``summary``)."""

    name = "round.committed"
    kind = Kind.MILESTONE
    folded = True
    class_version = 3  # 2: closed, the trainer's other figures in summary; 3: diagevo, the version that wrote it
    closed_since = 2
    free_form = "summary"
    upcast_v1_v2 = extra_into()
    upcast_v2_v3 = staticmethod(absent_is_none("diagevo"))

    questions: int | None = None
    retained: int | None = None
    promotions: int | None = None
    failures: int | None = None
    failed_diagnoses: int | None = None
    attributions: int | None = None
    reactivations: int | None = None
    new_causes: int | None = None
    merges: int | None = None
    F: int | None = None
    epsilon_next: float | None = None
    ranks: int | None = None
    failed_diagnoses_allowed: int | None = None
    dedup_truncated: int | None = None
    heldout_acc: float | None = None
    pseudo_label_acc: float | None = None
    val_acc: float | None = None
    # where the world knows the truth: retained questions whose pseudo-label is right, and the
    # solver's positive rewards given to wrong answers (diagevo/train/labels.py), overall and by skill
    retained_label_acc: float | None = None
    retained_label_acc_by_skill: dict[str, float] | None = None
    wrong_reward_share: float | None = None
    wrong_reward_share_by_skill: dict[str, float] | None = None
    # seconds by phase, a trainer's: JSON here; the rule "round summary readable" decides they are numbers
    timing: dict[str, Json] | None = None
    summary: dict[str, Json] | None = None  # the trainer's other figures, free-form
    diagevo: str | None = None

    _version = field_validator("diagevo")(_one_line)


EVENT_CLASSES: tuple[type[Event], ...] = (
    RunStarted,
    RunConfigured,
    RoundStarted,
    QuestionGenerated,
    QuestionScored,
    PromotionsDecided,
    CausePromoted,
    FailureRecorded,
    FailureDiagnosed,
    DiagnosisFailed,
    FailureAttributed,
    CauseReactivated,
    NodeCreated,
    CauseCreated,
    NodesMerged,
    RoundCommitted,
    PhaseCompleted,
    CheckpointWritten,
    LLMCalled,
    EvalRecorded,
    CheckpointSelected,
    RunForked,
    RunTagged,
    RunNoted,
    MetricsRecorded,
    TrainStep,
    CheckpointPruned,
    BatchWithdrawn,
)
"""Every event type, in the catalog's order."""

for _figures in (RoundCommitted, EvalRecorded):  # every field a figure, absent while unset (as version 1 stored it)
    _figures.stored_if_set = tuple(_figures.__pydantic_fields__)
