"""The bookkeeping and retrospective event types: what the fold ignores (a phase finished, a
checkpoint written or pruned, a diagnostician call, a score, a fork's provenance, a tag, a note, a
GRPO step, a withdrawn batch). Apart from the memory's types (:mod:`diagevo.catalog.events`),
which list them in the catalog's order."""

from typing import Annotated, Any, Self

from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from diagevo.catalog.event import Event, Kind, StoredData, extra_into
from diagevo.files.confined import checkpoint_problem
from diagevo.text.parsing import check_id

PHASE_FIGURES = ("steps", "prompts_per_step", "completions_per_step", "completion_length", "care", "dedup_truncated")
"""The figures of a phase that diagevo reads (the GRPO cost a GPU check reports, the simulated
solver's care, what the diagnosis left out of deduplication): declared fields, so a reader names
them; a trainer's other figures stay in ``stats``."""


def lift_figures(data: StoredData) -> StoredData:
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
