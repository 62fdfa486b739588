"""The event types: one class per type, each the pydantic model of its ``data`` and the
declaration of its catalog facts (the base class ``Event`` of ``diagevo.catalog.event``). The order here is the
catalog's (the reference page, the PostgreSQL registry rows, ``memory events --type``).

The facts are assigned, not annotated (``name = "run.started"``): ``Event`` declares them as class
variables, and each annotation would be evaluated again for every class a read command loads."""

from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from diagevo.catalog.event import Event, Kind, absent_is_none, extra_into
from diagevo.files.confined import checkpoint_problem
from diagevo.text.parsing import check_id

GenerationMode = Literal["free", "targeted", "stitched"]
Similarity = Annotated[float, Field(ge=-1.0, le=1.0, strict=True, allow_inf_nan=False)]
"""The cosine of two unit vectors (rounded to 1e-6 where it is computed), a number as written."""


# --- milestones and the memory -----------------------------------------------------------------


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
    """A run begins: its config, its seed and the trainer that drives it (``diagevo train``,
    or the name an external trainer gives; absent in logs of older diagevo versions)."""

    name = "run.started"
    kind = Kind.MILESTONE
    folded = True
    class_version = 2  # 2: trainer
    stored_if_set = ("trainer",)
    upcast_v1_v2 = staticmethod(absent_is_none("trainer"))

    trainer: str | None = None

    @field_validator("trainer")
    @classmethod
    def _a_name(cls, v: str | None) -> str | None:
        """A name on one line (shown by ``runs`` and ``report``)."""
        return None if v is None else check_id(v, "trainer", 200)


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
    phrases = ("pseudo_label",)
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
    class_version = 2  # 2: closed, the trainer's other figures in summary
    closed_since = 2
    free_form = "summary"
    upcast_v1_v2 = extra_into()

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
    timing: dict[str, Any] | None = None  # seconds by phase
    summary: dict[str, Any] | None = None  # the trainer's other figures, free-form


# --- bookkeeping and retrospective types (ignored by the fold) ----------------------------------


PHASE_FIGURES = ("steps", "prompts_per_step", "completions_per_step", "completion_length", "care", "dedup_truncated")
"""The figures of a phase that diagevo reads (the GRPO cost a GPU check reports, the simulated
solver's care, what the diagnosis left out of deduplication): declared fields, so a reader names
them; a trainer's other figures stay in ``stats``."""


def lift_figures(data: dict[str, Any]) -> dict[str, Any]:
    """A phase's declared figures out of ``stats`` (where a trainer hands them, and where version
    2 stored them) into their fields: the one rule for a new event and a stored one."""
    stats = data.get("stats")
    if isinstance(stats, dict) and any(k in stats for k in PHASE_FIGURES):
        rest = dict(stats)
        for k in PHASE_FIGURES:
            if k in rest and data.get(k) is None:
                data[k] = rest.pop(k)
        data["stats"] = rest or None
    return data


class PhaseCompleted(Event):
    """A phase of the training loop finished (what a resume skips), its seconds, the figures
    diagevo reads (:data:`PHASE_FIGURES`) and the trainer's others (``stats``, free-form)."""

    name = "phase.completed"
    kind = Kind.BOOKKEEPING
    class_version = 3  # 2: closed, the figures in stats; 3: the figures read are fields
    closed_since = 2
    free_form = "stats"
    upcast_v1_v2 = extra_into()
    upcast_v2_v3 = staticmethod(lift_figures)
    stored_if_set = ("seconds", "stats", *PHASE_FIGURES)

    phase: str
    seconds: float | None = None
    # numbers as the trainers write them (``6.0`` steps, ``0`` truncated): a stored figure reads back as written
    steps: int | float | None = None  # GRPO optimizer steps
    prompts_per_step: int | float | None = None
    completions_per_step: int | float | None = None
    completion_length: int | float | None = None  # mean tokens of a completion
    care: int | float | None = None  # the simulated solver's
    dedup_truncated: int | float | None = None  # failures the diagnosis left out of deduplication
    stats: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _figures_declared(cls, data: Any) -> Any:
        return lift_figures(dict(data)) if isinstance(data, dict) else data


class CheckpointWritten(Event):
    """Model weights were saved at ``path``, a name in the run's folder (``round003-solver``):
    what a resumed round loads, from that folder or its fork source's and nowhere else. A log
    written before paths were stored relative holds absolute paths, read by their last part."""

    name = "checkpoint.written"
    kind = Kind.BOOKKEEPING
    stored_if_set = ("phase", "bytes")

    path: str
    phase: str | None = None
    bytes: int | None = None

    @field_validator("path")
    @classmethod
    def _a_checkpoint_name(cls, v: str) -> str:
        """A name the training loop gives (:func:`diagevo.files.confined.checkpoint_name`)."""
        problem = checkpoint_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v


class LLMCalled(Event):
    """One diagnostician call (an HTTP ``attempt``): stage, model, latency, token counts, the raw
    reply, the transport's ``error`` or what made the reply unusable (``violation``), and what it
    was about (a failure, or the two nodes of a consolidation)."""

    name = "llm.called"
    kind = Kind.BOOKKEEPING
    texts = ("raw",)
    phrases = ("model", "stage", "error", "violation")
    keys = ("failure_id",)
    stored_if_set = ("attempt", "error", "violation", "failure_id", "nodes")

    stage: str
    model: str = ""
    latency_s: float = Field(default=0.0, ge=0.0, strict=True, allow_inf_nan=False)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    raw: str = ""
    attempt: int | None = None
    error: str | None = None
    violation: str | None = None
    failure_id: str | None = None
    nodes: list[str] | None = None


class EvalRecorded(Event):
    """Held-out metrics of a round (the loop: ``metrics``), a benchmark score of a round's solver
    checkpoint (``diagevo eval --run``: ``benchmark``, ``n``, ``accuracy``, ``mean_at_k`` ...),
    or a measure of the simulator's dynamics (``measure``, its ``reference`` run, ``metrics``)."""

    name = "eval.recorded"
    kind = Kind.RETROSPECTIVE
    class_version = 2  # 2: closed, the metrics in metrics, a benchmark's kind in benchmark_kind
    closed_since = 2
    free_form = "metrics"
    upcast_v1_v2 = extra_into(kind="benchmark_kind")  # kind: the class's own

    benchmark: str | None = None
    benchmark_kind: str | None = None
    n: int | None = None
    correct: int | None = None
    accuracy: float | None = None
    unparsed: int | None = None
    k: int | None = None
    mean_at_k: float | None = None
    model: str | None = None
    engine: str | None = None
    file: str | None = None
    file_sha256: str | None = None
    seconds: float | None = None
    settings: str | None = None
    measure: str | None = None
    reference: str | None = None
    metrics: dict[str, Any] | None = None


class CheckpointSelected(Event):
    """The round whose solver checkpoint scored best on a validation file (``eval --select``)."""

    name = "checkpoint.selected"
    kind = Kind.RETROSPECTIVE
    stored_if_set = ("n", "model", "file", "file_sha256")

    benchmark: str
    accuracy: float = Field(ge=0.0, le=1.0)

    scores: dict[str, float]  # round -> validation accuracy of every round compared
    n: int | None = None
    model: str | None = None
    file: str | None = None
    file_sha256: str | None = None


class RunForked(Event):
    """Provenance of a forked run: its log up to here is a copy of ``source_run`` through
    ``source_round``'s commit, whose hash there was ``source_hash``."""

    name = "run.forked"
    kind = Kind.RETROSPECTIVE

    source_run: str
    source_round: int = Field(ge=0)
    source_hash: str
    source_seq: int = Field(ge=0)
    whatif: dict[str, Any] | None = None
    """A what-if (:mod:`diagevo.whatif`): the settings changed and what a what-if is. Its log is
    then the source's with the memory's model-free decisions made again under them."""


def _tag(value: str) -> str:
    """A tag is a label on one line: no newline, tab or other control character."""
    return check_id(value, "tag", 64)


class RunTagged(Event):
    """Tags added to (or, with ``removed``, taken from) a run: labels to find runs by."""

    name = "run.tagged"
    kind = Kind.RETROSPECTIVE

    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=64), AfterValidator(_tag)]] = Field(
        min_length=1
    )
    removed: bool = False


class RunNoted(Event):
    """A free-text note on a run, by whoever ran or read it."""

    name = "run.noted"
    kind = Kind.RETROSPECTIVE
    phrases = ("note",)

    note: str = Field(min_length=1)


class MetricsRecorded(Event):
    """One rank's metrics of the open round (a data-parallel trainer: every rank records its
    own); the commit folds them into ``eval.recorded``, each weighted by ``weight``."""

    name = "metrics.recorded"
    kind = Kind.BOOKKEEPING

    rank: int = Field(ge=0)
    weight: float = Field(gt=0.0, allow_inf_nan=False)
    metrics: dict[str, float]


class TrainStep(Event):
    """One GRPO optimizer step of a phase (``role`` challenger or solver): its step in the phase,
    its step over the run's phases of that role (``global_step``), and TRL's logged row
    (``metrics``, TRL's names: reward, reward_std, kl, entropy, clip_ratio/region_mean,
    completions/mean_length, learning_rate, grad_norm, loss ...)."""

    name = "train.step"
    kind = Kind.BOOKKEEPING

    role: str
    step: int
    global_step: int
    metrics: dict[str, float]


class CheckpointPruned(Event):
    """The checkpoint at ``path`` (written in round ``written_round`` after ``phase``) was
    deleted by ``train.keep_checkpoints``; ``bytes``: the space it held."""

    name = "checkpoint.pruned"
    kind = Kind.BOOKKEEPING

    path: str
    phase: str
    written_round: int
    bytes: int = 0


class BatchWithdrawn(Event):
    """A batch of the open round's recorded questions or failures taken back before the commit
    (``diagevo round withdraw``): the events appended from ``first_seq`` to ``last_seq``, whose
    question or failure ids it names. Every reader of the round's questions and failures (the
    promotions, the diagnosis, the commit's counts, the export, the counting rules) reads the
    round from here on as if the batch had never been recorded, so a wrong file recorded costs a
    command, not a fork; the ids may be recorded again. ``counts``: the per-round statistics'
    columns the batch had added (``questions``, ``retained``, ``failures``), taken off the round's."""

    name = "batch.withdrawn"
    kind = Kind.EVIDENCE
    phrases = ("reason",)

    first_seq: int = Field(ge=1, strict=True)
    last_seq: int = Field(ge=1, strict=True)
    questions: list[str] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    reason: str = ""

    @model_validator(mode="after")
    def _one_batch(self) -> Self:
        if self.last_seq < self.first_seq:
            raise ValueError(f"last_seq {self.last_seq} is before first_seq {self.first_seq}")
        if bool(self.questions) == bool(self.failures):
            raise ValueError("a withdrawn batch names its questions or its failures (one of the two)")
        return self


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
