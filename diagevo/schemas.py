"""The event schemas: one pydantic model for the ``data`` of each event type of
:data:`diagevo.catalog.CATALOG`, and the envelope every event comes in (:class:`EventIn`, one
line of the JSONL interchange). An unknown ``type`` or ``data`` that does not fit its model is
rejected.

Untrusted text is stored bounded (:class:`diagevo.limits.LimitsConfig`): a long text field
(:data:`diagevo.catalog.TEXT_FIELDS`) beyond ``text_bytes`` UTF-8 bytes, or a short phrase
(:data:`PHRASE_FIELDS`) beyond ``phrase_bytes``, is cut there, and the event's data says so
under ``cut``: ``{field: {"bytes": length of the whole text, "sha256": its hash}}``."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from diagevo.catalog import CATALOG, KEY_FIELDS, TEXT_FIELDS
from diagevo.config import config_from_record
from diagevo.errors import BadInput
from diagevo.limits import LimitsConfig
from diagevo.parsing import MAX_ID_CHARS, check_id, find_not_utf8, one_line, quoted

GenerationMode = Literal["free", "targeted", "stitched"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Open(BaseModel):
    """Bookkeeping and summaries: declared fields are checked, extra fields are carried."""

    model_config = ConfigDict(extra="allow", frozen=True)


# --- core types -------------------------------------------------------------------------------


class _RunConfig(_Data):
    """A run's config (the hyperparameters, at least ``k``) and its seed."""

    config: dict[str, Any]
    seed: int = 0

    @field_validator("config")
    @classmethod
    def _a_run_config(cls, v: dict[str, Any]) -> dict[str, Any]:
        """At least k; every field known (the schema: :func:`diagevo.config.config_from_record`)."""
        config_from_record(v)
        return v


class RunStarted(_RunConfig):
    """A run begins: its config, its seed and the trainer that drives it (``diagevo train``,
    or the name an external trainer gives; absent in logs of older diagevo versions)."""

    trainer: str | None = None

    @field_validator("trainer")
    @classmethod
    def _a_name(cls, v: str | None) -> str | None:
        """A name on one line (shown by ``runs`` and ``report``)."""
        return None if v is None else check_id(v, "trainer", 200)


class RunConfigured(_RunConfig):
    """The run's config from here on (``diagevo train --resume --set ...``): k and the switches
    of the rounds that follow. Recorded before the round it applies to."""


class RoundStarted(_Data):
    """Round t is open: its questions, promotions and failures may be recorded."""


class QuestionGenerated(_Data):
    """A candidate question of Q^cur (or Q^chal), with its generation mode and the causes it
    was asked to target: evidence for P_t(e) of Eq. 5."""

    question_id: str
    mode: GenerationMode
    active_cause: str | None = None
    mastered_cause: str | None = None
    text: str = ""
    node: str | None = None  # skill node of the active cause at generation time

    @model_validator(mode="after")
    def _causes_fit_mode(self) -> QuestionGenerated:
        want = {"free": (False, False), "targeted": (True, False), "stitched": (True, True)}[self.mode]
        if (self.active_cause is not None, self.mastered_cause is not None) != want:
            raise ValueError(f"mode {self.mode!r} does not fit active_cause/mastered_cause")
        return self


class QuestionScored(_Data):
    """The votes on a question: p1, p2 over N construction responses, the pseudo-label and
    whether the double-confidence filter (Eq. 3) retained it; evidence for acc_t(e) of Eq. 6."""

    question_id: str
    n: int = Field(ge=1)
    p1: float = Field(ge=0.0, le=1.0)
    p2: float = Field(ge=0.0, le=1.0)
    pseudo_label: str | None = None
    retained: bool
    reference: str = ""  # the construction response kept for diagnosis (retained questions)


class CausePromoted(_Data):
    """An Active cause is Mastered (Eq. 5-6): its accuracy over its candidates reached theta_up.
    Its frequency becomes 0."""

    cause_id: str
    acc: float = Field(ge=0.0, le=1.0)
    n_candidates: int = Field(ge=1)


class FailureRecorded(_Data):
    """A failed solver response to a retained question, with the construction response that
    agrees with the pseudo-label (the reference the diagnostician compares it with)."""

    failure_id: str
    question_id: str
    response: str = ""
    reference: str = ""


class FailureDiagnosed(_Data):
    """The diagnostician's decision on a failure: a matched stored cause, a new error cause,
    or neither (a non-skill slip). Its raw reply is stored once, in the ``llm.called`` event of
    this failure's Prompt 1 whose ``attempt`` is ``call``; ``raw`` holds it only when no call
    recorded it."""

    failure_id: str
    matched_cause: str | None = None
    error_cause: str | None = None
    model: str = ""
    raw: str = ""
    call: int | None = Field(default=None, ge=1)  # the attempt of the llm.called holding the reply


class DiagnosisFailed(_Data):
    """The diagnostician could not produce a valid decision; the round goes on without it. Its
    last reply, if any, is in the ``llm.called`` of the same failure and stage whose ``attempt``
    is ``call`` (``raw`` holds it only when no call recorded it)."""

    failure_id: str | None = None
    stage: str
    reason: str
    model: str = ""
    raw: str = ""
    call: int | None = Field(default=None, ge=1)  # the attempt of the llm.called holding the reply


class FailureAttributed(_Data):
    """A failure is attributed to a cause (by recurrence or deduplication): f += 1. The cause
    must be Active (Eq. 7: a Mastered one is reactivated first)."""

    failure_id: str
    cause_id: str
    via: Literal["recurrence", "dedup"]
    similarity: float | None = None


class CauseReactivated(_Data):
    """A Mastered cause recurs and becomes Active again with frequency 0 (Eq. 7); the
    attribution that follows sets it to 1."""

    cause_id: str
    failure_id: str


class NodeCreated(_Data):
    """A new skill node, with its label."""

    node_id: str
    label: str


class CauseCreated(_Data):
    """A new error cause under a skill node, Active with frequency 1, from the failure that
    revealed it."""

    cause_id: str
    node_id: str
    description: str
    failure_id: str | None = None


class NodesMerged(_Data):
    """Two skill nodes are consolidated (Prompt 4): the absorbed node's causes move to the
    survivor, which takes the new label; states and frequencies are unchanged."""

    survivor: str
    absorbed: str
    label: str
    similarity: float | None = None


class RoundCommitted(_Open):
    """Round t is over: M_t is the memory here. Summary fields (metrics, timing) are carried."""


# --- bookkeeping types (ignored by the fold) --------------------------------------------------


class PhaseCompleted(_Open):
    """A phase of the training loop finished, with its figures (what a resume skips)."""

    phase: str


class CheckpointWritten(_Open):
    """Model weights were saved at ``path`` (what a resumed round loads)."""

    path: str


class TrainStep(_Open):
    """One GRPO optimizer step of a phase (``role`` challenger or solver): its step in the phase,
    its step over the run's phases of that role (``global_step``), and TRL's logged row
    (``metrics``, TRL's names: reward, reward_std, kl, entropy, clip_ratio/region_mean,
    completions/mean_length, learning_rate, grad_norm, loss ...)."""

    role: str
    step: int
    global_step: int
    metrics: dict[str, float]


class CheckpointPruned(_Open):
    """The checkpoint at ``path`` (written in round ``written_round`` after ``phase``) was
    deleted by ``train.keep_checkpoints``; ``bytes``: the space it held."""

    path: str
    phase: str
    written_round: int
    bytes: int = 0


class LLMCalled(_Open):
    """One diagnostician call: stage, model, latency, token counts and the raw reply."""

    stage: str
    model: str = ""
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    raw: str = ""


class EvalRecorded(_Open):
    """Held-out metrics of a round (the loop), or a benchmark score of a round's solver
    checkpoint (``diagevo eval --run``: ``benchmark``, ``n``, ``accuracy``, ``mean_at_k`` ...)."""


class CheckpointSelected(_Open):
    """The round whose solver checkpoint scored best on a validation file (``eval --select``)."""

    benchmark: str
    accuracy: float = Field(ge=0.0, le=1.0)
    scores: dict[str, float]  # round -> validation accuracy of every round compared


class PromotionsDecided(_Open):
    """Round t's promotions are decided (Eq. 5-6, once): the evidence is closed."""

    promoted: list[str]
    candidates: int = Field(ge=0)


class RunForked(_Open):
    """Provenance of a forked run: its log up to here is a copy of ``source_run`` through
    ``source_round``'s commit, whose hash there was ``source_hash``."""

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


class RunTagged(_Data):
    """Tags added to (or, with ``removed``, taken from) a run: labels to find runs by."""

    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=64), AfterValidator(_tag)]] = Field(
        min_length=1
    )
    removed: bool = False


class RunNoted(_Data):
    """A free-text note on a run, by whoever ran or read it."""

    note: str = Field(min_length=1)


class MetricsRecorded(_Data):
    """One rank's metrics of the open round (a data-parallel trainer: every rank records its
    own); the commit folds them into ``eval.recorded``, each weighted by ``weight``."""

    rank: int = Field(ge=0)
    weight: float = Field(gt=0.0, allow_inf_nan=False)
    metrics: dict[str, float]


class EventIn(BaseModel):
    """An event as produced (and as one line of the JSONL interchange format)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    run: str = Field(min_length=1)
    round: int = Field(ge=0, le=2**31 - 1)  # an INTEGER column on both backends
    event_id: str = Field(min_length=1)
    data: dict[str, Any] = Field(default_factory=dict)

    @field_validator("type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        if v not in CATALOG:
            raise ValueError(f"unknown event type {quoted(v)}")
        return v

    # ids are columns: no NUL (PostgreSQL refuses it, SQLite would store it) nor other controls
    @field_validator("run")
    @classmethod
    def _run_id(cls, v: str) -> str:
        return check_id(v, "run id")

    @field_validator("event_id")
    @classmethod
    def _event_id(cls, v: str) -> str:
        return check_id(v, "event id", 4 * MAX_ID_CHARS)


class InvalidEvent(BadInput):
    """An event whose envelope or data does not fit the catalog."""


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) if len(str(p)) <= 40 else quoted(p, 40) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return one_line(f"{loc}: {msg}" if loc else msg)


def validate_event(raw: dict[str, Any]) -> EventIn:
    """Validate envelope and data; the returned event's data is normalised by its model."""
    if isinstance(raw, dict):  # in diagevo's words, before pydantic's
        not_utf8 = find_not_utf8(raw, "")
        if not_utf8 is not None:
            where = f"{raw.get('type')}: " if isinstance(raw.get("type"), str) and raw["type"] in CATALOG else ""
            raise InvalidEvent(where + str(not_utf8))
    try:
        ev = EventIn.model_validate(raw)
    except ValidationError as exc:
        raise InvalidEvent(_first_error(exc)) from None
    model = model_of(ev.type)
    payload = ev.data
    cut: dict[str, Any] = {}
    if "cut" in payload:
        payload = dict(payload)
        cut = _check_cut(ev.type, payload.pop("cut"))
    try:
        data = model.model_validate(payload)
    except ValidationError as exc:
        raise InvalidEvent(f"{ev.type}: data.{_first_error(exc)}") from None
    dumped = data.model_dump(mode="json", exclude_none=False)
    if ev.type == "run.started" and dumped.get("trainer") is None:
        del dumped["trainer"]  # a log of an older diagevo keeps its events as they were
    _check_columns(ev.type, dumped)
    _drop_unset(dumped)
    _cut(ev.type, dumped, cut)
    return ev.model_copy(update={"data": dumped})


def _check_columns(type: str, data: dict[str, Any]) -> None:
    """Values the store copies out of ``data`` into columns or artifacts: ids without control
    characters, texts without NUL (refused by PostgreSQL, so refused on every backend)."""
    if not _KEYS.isdisjoint(data):
        for f in KEY_FIELDS:
            v = data.get(f)
            if v and isinstance(v, str):
                try:
                    check_id(v, f)
                except ValueError as exc:
                    raise InvalidEvent(f"{type}: data.{exc}") from None
    for f in TEXT_FIELDS.get(type, ()):
        v = data.get(f)
        if isinstance(v, str) and "\x00" in v:
            raise InvalidEvent(f"{type}: data.{f} contains a NUL character (U+0000)")


_KEYS = frozenset(KEY_FIELDS)
_NEWER_OPTIONAL = ("call",)

PHRASE_FIELDS: dict[str, tuple[str, ...]] = {
    "question.scored": ("pseudo_label",),
    "failure.diagnosed": ("error_cause", "model"),
    "diagnosis.failed": ("reason", "model", "stage"),
    "llm.called": ("model", "stage", "error", "violation"),
    "node.created": ("label",),
    "cause.created": ("description",),
    "nodes.merged": ("label",),
    "run.noted": ("note",),
}
"""Type -> its short untrusted phrases, stored up to ``limits.phrase_bytes`` UTF-8 bytes (its
long texts, :data:`diagevo.catalog.TEXT_FIELDS`, up to ``limits.text_bytes``)."""

_DEFAULT_LIMITS = LimitsConfig()
_LIMITS: ContextVar[LimitsConfig | None] = ContextVar("diagevo_text_limits", default=None)
_SHA256 = re.compile(r"[0-9a-f]{64}")


@contextmanager
def text_limits(limits: LimitsConfig) -> Iterator[None]:
    """The limits the events validated inside the block are stored under (a run's ``[limits]``)."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def current_limits() -> LimitsConfig:
    """The limits in effect (:func:`text_limits`; the defaults outside any)."""
    return _LIMITS.get() or _DEFAULT_LIMITS


def cut_text(text: str, limit: int) -> tuple[str, dict[str, Any] | None]:
    """``text`` cut to at most ``limit`` UTF-8 bytes (at a character boundary) and, when it was
    cut, the whole text's ``{"bytes", "sha256"}``; else ``(text, None)``."""
    if len(text) * 4 <= limit:
        return text, None
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return text, None
    kept = raw[:limit].decode("utf-8", "ignore")
    return kept, {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def _cuttable(type: str) -> tuple[str, ...]:
    return (*TEXT_FIELDS.get(type, ()), *PHRASE_FIELDS.get(type, ()))


def _check_cut(type: str, value: Any) -> dict[str, Any]:
    """A ``cut`` map as an event of ``type`` may carry (an event already stored, handed in again)."""
    fields = _cuttable(type)
    if not isinstance(value, dict):
        raise InvalidEvent(f"{type}: data.cut: must be an object")
    for f, entry in value.items():
        if f not in fields:
            raise InvalidEvent(f"{type}: data.cut: {quoted(f, 40)} is not a text of this type")
        ok = (
            isinstance(entry, dict)
            and set(entry) == {"bytes", "sha256"}
            and isinstance(entry["bytes"], int)
            and not isinstance(entry["bytes"], bool)
            and entry["bytes"] >= 0
            and isinstance(entry["sha256"], str)
            and _SHA256.fullmatch(entry["sha256"]) is not None
        )
        if not ok:
            raise InvalidEvent(f"{type}: data.cut.{f}: must be {{bytes: length, sha256: 64 hex digits}}")
    return dict(value)


def _drop_unset(data: dict[str, Any]) -> None:
    """Fields newer than the log's first version are absent unless set: the events of earlier
    versions keep their bytes."""
    for f in _NEWER_OPTIONAL:
        if f in data and data[f] is None:
            del data[f]


def _cut(type: str, data: dict[str, Any], cut: dict[str, Any]) -> None:
    """Cut ``data``'s texts to the limits in effect (in place), recording what was cut."""
    limits = current_limits()
    for fields, limit in (
        (TEXT_FIELDS.get(type, ()), limits.text_bytes),
        (PHRASE_FIELDS.get(type, ()), limits.phrase_bytes),
    ):
        for f in fields:
            v = data.get(f)
            if isinstance(v, str):
                kept, whole = cut_text(v, limit)
                if whole is not None:
                    data[f] = kept
                    cut[f] = whole
    if cut:
        data["cut"] = dict(sorted(cut.items()))


def new_event(type: str, run: str, round: int, event_id: str, **data: Any) -> EventIn:
    """Build and validate an event in one call (what producers use)."""
    return validate_event({"type": type, "run": run, "round": round, "event_id": event_id, "data": data})


def model_of(etype: str) -> type[BaseModel]:
    """The data model the catalog names for an event type."""
    return globals()[CATALOG[etype].model_name]  # type: ignore[no-any-return]
