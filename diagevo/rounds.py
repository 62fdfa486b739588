"""The round protocol: the memory as a service for any trainer (diagevo's own loop included).

A trainer drives round t through these operations, in this order, and appends nothing else to
the memory:

1. :func:`start_run` (once; the config holds at least ``k``) and :func:`open_round`;
2. :func:`requests`: n generation requests drawn from the schedule projected from M_{t-1}
   (Eq. 1-2: free / targeted / stitched, cause and sibling texts, node, the rendered Appendix J
   challenger prompt), deterministic for (run, round, seed);
3. :func:`record`: the generated questions with the solver's N construction responses (or their
   extracted answers): votes, the Eq. 3 filter, ``question.generated`` / ``question.scored``;
   returns every candidate scored, the retained ones with pseudo-label and reference;
4. :func:`promote`: Eq. 5-6 from the round's evidence against M_{t-1}, decided once;
5. :func:`record_failures`, then :func:`diagevo.diagnosis.pipeline.diagnose` (or ``diagevo
   diagnose``): the failures, whose decisions come back through :meth:`Round.append_diagnosis`;
6. :func:`commit`: ``round.committed`` with the trainer's metrics.

Every event id derives from (run, round, item), so any step can be retried. Each write checks
the round's state and appends in one transaction under the store's append lock, so several
processes may record into one round at once, and a step out of order (recording into a
committed round, promoting twice, committing with undiagnosed failures) raises
:class:`ProtocolError` and stores nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal, NotRequired, TypedDict, cast

from diagevo import curriculum as cur
from diagevo.catalog import (
    CATALOG,
    FOLDED,
    MEMORY_TYPES,
    MILESTONES,
    RETROSPECTIVE,
    CauseCreated,
    CausePromoted,
    CauseReactivated,
    CheckpointPruned,
    CheckpointWritten,
    DiagnosisFailed,
    EvalRecorded,
    Event,
    EventTypes,
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
from diagevo.catalog import ids as keys
from diagevo.catalog.events import GenerationMode
from diagevo.config import MethodConfig, config_changes, config_from_record
from diagevo.errors import BadInput, Conflict, Hint, NotFound
from diagevo.log import AppendResult, EventRow, Recorder
from diagevo.memory.counting import COUNTED_TYPES
from diagevo.memory.deciders import decide_promotions, promotion_evidence
from diagevo.memory.fold import InvariantError, fold
from diagevo.memory.sampler import GenerationRequest, sample_requests
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.parsing import quoted
from diagevo.reals import real_number
from diagevo.redaction import redact_config
from diagevo.results import Committed, Json, Promotion
from diagevo.schemas import EventIn, InvalidEvent, new_event
from diagevo.urls import redact_url
from diagevo.views import runs as runs_view
from diagevo.views.caches import refresh
from diagevo.views.configs import CONFIG_TYPES, config_fault, unusable_config
from diagevo.views.counts import stored_tally
from diagevo.views.memory import load_memory
from diagevo.views.stats import COUNTED_COLUMNS, count_rounds
from diagevo.words import did_you_mean, plural

PURPOSES = {"curriculum": ("cur-requests", "q"), "challenger": ("chal-requests", "c")}


class ProtocolError(Conflict, BadInput):
    """A round operation out of order or with input that does not fit the round."""


class MemoryMoved(Conflict):
    """Another producer changed the memory since the decisions were taken: decide again."""


class UnknownRun(ProtocolError, NotFound):
    """A step for a run the log does not hold."""


def _event(run: str, t: int, key: str, event: Event) -> EventIn:
    return new_event(event, run=run, at_round=t, event_id=keys.event_id(run, t, key))  # the same on every retry


Reader = Callable[..., list[EventRow]]
"""What a decision reads: ``read(types, *, round=None, after_seq=0)`` -> the run's rows."""


def _appending(store: Recorder, run: str, decide: Callable[[Reader], Sequence[EventIn]]) -> AppendResult:
    """Append the events ``decide`` returns, having let it read ``run`` at the log's head, under
    the append lock: one decision, no writer in between."""

    def read(types: EventTypes | None, *, round: int | None = None, after_seq: int = 0) -> list[EventRow]:
        return list(store.rows(run, types=types, in_round=round, after_seq=after_seq))

    try:
        return store.append_decided(lambda: decide(read))
    except UnknownRun:
        raise _unknown_run(store, run) from None


def _unknown_run(store: Recorder, run: str) -> UnknownRun:
    """``no run 'huer' in URL (did you mean 'heur'?): start it ...``: the Python call for a
    Python caller, ``round start`` on the command line."""
    return UnknownRun(
        f"no run {run!r} in {redact_url(store.url)}{did_you_mean(run, store.runs())}: start it with {{command}}",
        hint=Hint(("round", "start", "--run", run), store.url, call=f"diagevo.start_run(store, {run!r}, config)"),
    )


# --- the run and its rounds ------------------------------------------------------------------


def run_config(store: Recorder, run: str) -> MethodConfig:
    """The config recorded in the run's ``run.started`` (defaults for what it leaves out), with
    the latest ``run.configured`` applied: the one place the run's config is read from the log."""
    cfg = stored_config(store, run)
    if cfg is None:
        raise _unknown_run(store, run)
    return cfg


def stored_config(store: Recorder, run: str) -> MethodConfig | None:
    """:func:`run_config`, or None for a run the log does not hold."""
    last = next(store.read(run, types=CONFIG_TYPES, limit=1, newest=True), None)
    if last is None:
        return None
    fault = config_fault(last)
    if fault is not None:  # a log stored before its config was checked, or a raw write
        raise unusable_config(store, run, last, fault)
    return config_from_record(last.data["config"])


def config_record(config: MethodConfig | Mapping[str, Json]) -> dict[str, Any]:
    """The config as ``run.started`` stores it: a config object redacted, the whole of it (``diagevo
    train``'s composed config, :class:`diagevo.train.config.Config`, with every component's part;
    k is ``memory.k``); an external trainer's config as given (it holds ``k`` or ``memory.k``)."""
    if isinstance(config, MethodConfig):
        return config.redacted()
    return redact_config(dict(config))


class RunExists(ProtocolError):
    """A new run was asked for under an id the log holds already."""


OUR_TRAINER = runs_view.OUR_TRAINER
"""The trainer ``run.started`` names for diagevo's own loop (only such a run resumes with ``train``)."""
EXTERNAL_TRAINER = "external trainer"
"""The trainer a run started through the round protocol declares when its trainer gives no name."""


Resume = Literal["allow", "must", "never"]
"""What :func:`start_run` does with a run the log holds already (as W&B's ``resume``)."""
RESUMES: tuple[Resume, ...] = ("allow", "must", "never")


class RunDiffers(ProtocolError):
    """A run started again with a config or seed other than the one it holds."""


def start_run(
    store: Recorder,
    run: str,
    config: MethodConfig | Mapping[str, Json],
    seed: int = 0,
    *,
    resume: Resume | None = None,
    trainer: str = EXTERNAL_TRAINER,
) -> bool:
    """Append ``run.started``, decided under the append lock; True when this call started the
    run. For a run the log holds already nothing is stored, and ``resume`` says what the caller
    meant (as W&B's): ``None``, a retry: the same config and seed is a no-op (False: every rank
    of a trainer may call this), another is refused with ``RunDiffers`` (a ``Conflict``) naming
    the fields that differ (the run keeps the config it started with); ``"allow"``: continue the
    run as it is, whatever ``config`` says (the config in force is the one the log holds);
    ``"must"``: the same, and a run the log does not hold is ``UnknownRun`` (a ``NotFound``);
    ``"never"``: the run must be new, else ``RunExists`` (a ``Conflict``: two processes creating
    one id both find out, one of them here).
    ``trainer`` names what drives the run (``runs`` and ``report`` show it; only a run of
    ``diagevo train`` resumes with it)."""
    if resume is not None and resume not in RESUMES:
        raise ProtocolError(f"resume must be one of {', '.join(map(repr, RESUMES))} or None, not {quoted(resume, 40)}")
    record = config_record(config)
    if not isinstance(config, MethodConfig):
        config_from_record(record)  # a ConfigError naming the field, a typo with the name it likely means
    try:
        ev = new_event(
            RunStarted(config=record, seed=seed, trainer=trainer),
            run=run,
            at_round=0,
            event_id=keys.event_id(run, 0, RunStarted.name),
        )
    except InvalidEvent as exc:
        raise ProtocolError(str(exc)) from None

    def decide() -> list[EventIn]:
        if not store.has_run(run):
            if resume == "must":
                raise UnknownRun(
                    f"no run {run!r} in {redact_url(store.url)} to resume{did_you_mean(run, store.runs())}"
                )
            return [ev]
        if resume == "never":
            raise RunExists(
                f"run {run!r} already exists in {redact_url(store.url)}: continue it with {{command}}, "
                "or name a new run",
                hint=Hint(
                    ("train", "--run", run, "--resume") if trainer == OUR_TRAINER else ("round", "start", "--run", run),
                    store.url,
                    call=f"diagevo.start_run(store, {run!r}, config, resume='allow')",
                ),
            )
        if resume is None:
            refuse_other_config(store, run, record, seed)
        return []

    return store.append_decided(decide).appended == 1


def refuse_other_config(store: Recorder, run: str, record: Mapping[str, Any], seed: int) -> None:
    """:class:`RunDiffers` when ``run`` holds a config or seed other than ``record`` and
    ``seed``, naming the fields that differ (how many rounds to train aside: a run may go on for
    more). Called from inside a decision, under the append lock."""
    stored = run_config(store, run)
    started = next(iter(store.read(run, types=(RunStarted,))), None)
    changes = config_changes(stored, config_from_record(record))
    stored_seed = started.data.get("seed", 0) if started is not None else 0
    if stored_seed != seed:
        changes.append(f"seed {stored_seed!r} (given {seed!r})")
    if changes:
        shown = "; ".join(changes[:3]) + (f"; and {plural(len(changes) - 3, 'more field')}" if len(changes) > 3 else "")
        raise RunDiffers(
            f"run {run!r} exists with another config: {shown}; continue it as it is with {{command}}, "
            "or name a new run",
            hint=Hint(
                ("round", "start", "--run", run, "--resume", "allow"),
                store.url,
                call=f"diagevo.start_run(store, {run!r}, config, resume='allow')",
            ),
        )


def run_trainer(store: Recorder, run: str) -> str | None:
    """The trainer the run's ``run.started`` names (a fork's: its source's); None for a log of
    an older diagevo, which did not record it."""
    for e in store.read(run, types=(RunStarted,)):
        name = RunStarted.from_stored(e.data).trainer
        return name if isinstance(name, str) else None
    return None


def configure_run(store: Recorder, run: str, config: MethodConfig) -> bool:
    """Record ``config`` as the run's config from its next round on (``run.configured``),
    decided under the append lock: refused while a round is under way (it keeps the config it
    started with); False when the config is the one in force."""
    record = config_record(config)
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]

    saved = stored_config(store, run)
    # how many rounds to train does not change how a round is run: it may change mid-round
    target_only = saved is not None and _without_target(saved) == _without_target(config)

    def decide(read: Reader) -> list[EventIn]:
        st = _state(run, read(MILESTONES), store.url)
        t = st.last_committed + 1
        if not target_only and any(True for _ in read(None, round=t)):
            raise ProtocolError(f"run {run!r} is in the middle of round {t}: finish it before changing its config")
        eid = keys.event_id(run, t, RunConfigured.name, digest)
        return [new_event(RunConfigured(config=record, seed=config.train.seed), run=run, at_round=t, event_id=eid)]

    if saved is not None and saved.redacted() == config.redacted():
        return False
    return _appending(store, run, decide).appended == 1


def configure_fork(store: Recorder, run: str, overrides: Sequence[str]) -> bool:
    """Apply ``overrides`` (``section.field=value``) to the config of a fork that has not yet
    run a round of its own (``round start --set``): a ``run.configured`` before its first
    round. Any other existing run keeps its config (:class:`ProtocolError`: fork it to change
    it). The method's fields are checked here; a component's are carried, for the trainer that
    reads them to check. False when the overrides change nothing."""
    from diagevo.sections import apply_overrides, checked

    forked = [e.round for e in store.read(run, types=(RunForked,))]
    st = round_state(store, run)
    if not forked or any(t > forked[-1] for t in st.started):
        own = "has rounds of its own" if forked else "exists"
        if st.last_committed < 1:  # nothing committed yet to fork at
            raise ProtocolError(f"run {run!r} {own}: its config is fixed (a fork at a committed round may change it)")
        sets = [word for field in overrides for word in ("--set", field)]
        fork = Hint(
            ("memory", "fork", "--run", run, "--round", str(st.last_committed), "--to", f"{run}-fork", *sets),
            store.url,
            call=f"diagevo.fork_run(store, {run!r}, {st.last_committed}, {run + '-fork'!r}, overrides)",
        )
        raise ProtocolError(f"run {run!r} {own}: its config is fixed; change it in a fork: {{command}}", hint=fork)
    saved = run_config(store, run)
    data = apply_overrides(saved.model_dump(mode="json"), list(overrides))
    return configure_run(store, run, checked(MethodConfig, data, overrides=list(overrides)))


def _without_target(config: MethodConfig) -> dict[str, Any]:
    record = config.redacted()
    record["train"] = {k: v for k, v in record["train"].items() if k != "rounds"}
    return record


def seeded(seed: int, t: int, phase: str) -> random.Random:
    """The random stream of a phase of round ``t``: the same on every retry and resume."""
    return random.Random(f"{seed}/{t}/{phase}")


@dataclass(frozen=True)
class RunState:
    """Where a run stands, read from its milestones."""

    run: str
    last_committed: int
    started: frozenset[int]
    promoted: frozenset[int]
    seed: int
    db: str = ""  # the store's URL, for the commands that messages suggest

    @property
    def open_round(self) -> int | None:
        t = self.last_committed + 1
        return t if t in self.started else None


def _state(run: str, rows: Iterable[EventRow], db: str = "") -> RunState:
    last, started, promoted, seed, exists = 0, set(), set(), 0, False
    for row in rows:
        match row.event:
            case RunStarted(seed=run_seed):
                exists, seed = True, int(run_seed)
            case RoundStarted():
                started.add(row.round)
            case RoundCommitted():
                last = max(last, row.round)
            case PromotionsDecided():
                promoted.add(row.round)
    if not exists:
        raise UnknownRun(f"no run {run!r}: start it first", hint=Hint(("round", "start", "--run", run), db))
    return RunState(run, last, frozenset(started), frozenset(promoted), seed, db)


@dataclass(frozen=True)
class RoundProgress:
    """How far round ``t`` has come: the run's milestones, the phases a trainer noted done
    (``phase.completed``, with their figures) and the last checkpoint written up to the round:
    what a resumed round skips and loads."""

    state: RunState
    t: int
    phases: Mapping[str, Mapping[str, Any]]
    checkpoint: str | None

    @property
    def promoted(self) -> bool:
        return self.t in self.state.promoted

    @property
    def committed(self) -> bool:
        return self.t <= self.state.last_committed

    def done(self, phase: str) -> bool:
        return phase in self.phases or (phase == "promote" and self.promoted) or self.committed


def round_progress(store: Recorder, run: str, t: int) -> RoundProgress:
    """Where round ``t`` of ``run`` stands (indexed reads of a few dozen events)."""
    state = round_state(store, run)
    phases = {e.data["phase"]: e.data for e in store.read(run, in_round=t, types=(PhaseCompleted,))}
    checkpoint = None
    for e in store.read(run, types=(CheckpointWritten,)):
        if e.round <= t:  # in seq order: the last one up to this round's own
            checkpoint = CheckpointWritten.from_stored(e.data).path
    return RoundProgress(state, t, phases, checkpoint)


def round_state(store: Recorder, run: str) -> RunState:
    """Where ``run`` stands (last committed round, open round, promotions decided), read from
    its milestone events only."""
    try:
        return _state(run, store.rows(run, types=MILESTONES), store.url)
    except UnknownRun:
        raise _unknown_run(store, run) from None


def require_open(st: RunState, t: int, doing: str) -> None:
    if t <= st.last_committed:
        raise ProtocolError(f"cannot {doing}: round {t} of run {st.run!r} is committed")
    if t != st.last_committed + 1:
        raise ProtocolError(
            f"cannot {doing}: round {t} is not next in run {st.run!r} (last committed: {st.last_committed})"
        )
    if t not in st.started:
        raise ProtocolError(
            f"cannot {doing}: round {t} of run {st.run!r} is not open",
            hint=Hint(("round", "start", "--run", st.run), st.db, call=f"diagevo.Round.open(store, {st.run!r})"),
        )


def current_round(store: Recorder, run: str) -> int:
    """The run's open round."""
    st = round_state(store, run)
    if st.open_round is None:
        raise ProtocolError(
            f"run {run!r} has no open round (last committed: {st.last_committed}); open one first",
            hint=Hint(("round", "start", "--run", run), store.url, call=f"diagevo.Round.open(store, {run!r})"),
        )
    return st.open_round


def open_round(store: Recorder, run: str, t: int | None = None) -> int:
    """Append ``round.started`` for the next round (``t`` defaults to it); opening the open
    round again is a no-op. Returns the round."""
    return _open(store, run, t)[0]


def _open(store: Recorder, run: str, t: int | None) -> tuple[int, bool]:
    """:func:`open_round`, and whether the round was open already (decided under the lock)."""
    chosen: list[tuple[int, bool]] = []

    def decide(read: Reader) -> list[EventIn]:
        st = _state(run, read(MILESTONES), store.url)
        nxt = st.last_committed + 1
        want = nxt if t is None else t
        if want <= st.last_committed:
            raise ProtocolError(f"round {want} of run {run!r} is committed already")
        if want != nxt:
            raise ProtocolError(f"round {want} cannot open in run {run!r}: round {nxt} comes first")
        chosen.append((want, want in st.started))
        return [] if want in st.started else [_event(run, want, RoundStarted.name, RoundStarted())]

    _appending(store, run, decide)
    return chosen[0]


def record_retrospective(store: Recorder, run: str, events: Sequence[EventIn]) -> int:
    """Append notes about rounds already committed (a checkpoint evaluated or chosen after the
    fact: ``eval.recorded``, ``checkpoint.selected``), decided under the append lock: each names
    a committed round of the run (0: the base model). Returns how many were new."""
    for ev in events:
        if ev.run != run:
            raise ProtocolError(f"a note of run {run!r} names run {ev.run!r}")
        if CATALOG[ev.type] not in RETROSPECTIVE:
            raise ProtocolError(f"{ev.type} is not a note about a committed round")

    def decide(read: Reader) -> Sequence[EventIn]:
        st = _state(run, read(MILESTONES), store.url)
        late = [ev.round for ev in events if ev.round > st.last_committed]
        if late:
            raise ProtocolError(
                f"round {late[0]} of run {run!r} is not committed (last committed: {st.last_committed})"
            )
        return events

    return _appending(store, run, decide).appended


def tag_run(store: Recorder, run: str, tags: Sequence[str], *, removed: bool = False) -> None:
    """Add ``tags`` to a run (or take them off), as a ``run.tagged`` event."""
    _annotate(store, run, RunTagged, lambda: RunTagged(tags=list(tags), removed=removed))


def note_run(store: Recorder, run: str, note: str) -> None:
    """Add a free-text note to a run, as a ``run.noted`` event."""
    _annotate(store, run, RunNoted, lambda: RunNoted(note=note))


def _annotate(store: Recorder, run: str, kind: type[Event], make: Callable[[], Event]) -> None:
    def decide(read: Reader) -> list[EventIn]:
        _state(run, read(MILESTONES), store.url)  # the run exists
        n = len(read((kind,)))  # the n-th of its kind: the same words twice are two events
        try:
            return [new_event(make(), run=run, at_round=0, event_id=keys.event_id(run, 0, kind.name, n))]
        except InvalidEvent as exc:
            raise ProtocolError(str(exc)) from None

    _appending(store, run, decide)


# --- generation requests ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Request(GenerationRequest):
    """One generation request: the schedule's draw (mode, causes and their texts, node) and the
    question id to record its question under; ``messages()`` is the Appendix J challenger prompt."""

    question_id: str

    def generation_request(self) -> GenerationRequest:
        """The draw alone, without the question id."""
        return GenerationRequest(**{f.name: getattr(self, f.name) for f in fields(GenerationRequest)})

    def messages(self) -> list[dict[str, str]]:
        """The challenger's chat prompt for this draw (Appendix J): ``[{"role": "system", ...},
        {"role": "user", ...}]``, ready for a chat template or an OpenAI-style request."""
        return cur.challenger_messages(self.generation_request())

    def to_json(self) -> dict[str, Json]:
        """The request as a line of ``diagevo round requests --jsonl``, its prompt included."""
        return {"question_id": self.question_id} | asdict(self.generation_request()) | {"messages": self.messages()}


# --- recording questions ---------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A generated question (the request's fields echoed back) with the solver's N construction
    responses, or their extracted answers."""

    question_id: str
    mode: str
    text: str
    active_cause: str | None = None
    mastered_cause: str | None = None
    node: str | None = None
    responses: tuple[str, ...] | None = None
    answers: tuple[str | None, ...] | None = None

    def __post_init__(self) -> None:
        """Refuse, naming the argument, what a question cannot be recorded with (a number for a
        text, a list of numbers for the answers); a list of responses or answers is kept as a tuple."""
        for name in ("question_id", "mode", "text"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ProtocolError(f"Candidate {name} must be a non-empty string, not {quoted(value, 40)}")
        for name in ("active_cause", "mastered_cause", "node"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ProtocolError(f"Candidate {name} must be a string or None, not {quoted(value, 40)}")
        for name in ("responses", "answers"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
                raise ProtocolError(f"Candidate {name} must be a sequence of strings, not {type(value).__name__}")
            items = tuple(value)
            for item in items:
                if item is not None and not isinstance(item, str):
                    raise ProtocolError(f"Candidate {name} must hold strings, not {quoted(item, 40)}")
            object.__setattr__(self, name, items)

    @classmethod
    def from_json(cls, obj: Mapping[str, object]) -> Candidate:
        """From one JSON object; the request's own fields (texts, messages) may be carried along."""
        if not isinstance(obj, Mapping):
            raise ProtocolError("a candidate is a JSON object")
        known = {"question_id", "mode", "text", "active_cause", "mastered_cause", "node", "responses", "answers"}
        carried = {"active_text", "mastered_text", "node_label", "messages", "question"}
        unknown = sorted(set(obj) - known - carried)
        if unknown:
            raise ProtocolError(f"unknown field {unknown[0]!r}")
        text = obj.get("text", obj.get("question"))
        required: dict[str, str] = {}
        for name, value in (("question_id", obj.get("question_id")), ("mode", obj.get("mode")), ("text", text)):
            if not isinstance(value, str) or not value.strip():
                raise ProtocolError(f"{name} must be a non-empty string")
            required[name] = value
        ids: dict[str, str | None] = {}
        for name in ("active_cause", "mastered_cause", "node"):
            value = obj.get(name)
            if value is not None and not isinstance(value, str):
                raise ProtocolError(f"{name} must be a string or null")
            ids[name] = value
        lists: dict[str, tuple[str | None, ...] | None] = {}
        for name in ("responses", "answers"):
            value = obj.get(name)
            if value is not None and (
                not isinstance(value, list) or not all(x is None or isinstance(x, str) for x in value)
            ):
                raise ProtocolError(f"{name} must be a list of strings")
            lists[name] = tuple(value) if value is not None else None
        return cls(
            question_id=required["question_id"],
            mode=required["mode"],
            text=required["text"],
            active_cause=ids["active_cause"],
            mastered_cause=ids["mastered_cause"],
            node=ids["node"],
            responses=lists["responses"],  # type: ignore[arg-type]  # None items: a response that is missing
            answers=lists["answers"],
        )


@dataclass(frozen=True)
class Scored:
    """A recorded candidate: votes, whether Eq. 3 keeps it, its pseudo-label and reference."""

    question_id: str
    text: str
    mode: str
    active_cause: str | None
    mastered_cause: str | None
    n: int
    p1: float
    p2: float
    pseudo_label: str | None
    retained: bool
    reference: str

    def to_json(self) -> dict[str, Json]:
        """The scored question as ``diagevo round record --json`` prints it."""
        return asdict(self)


class Recorded(list[Scored]):
    """What :meth:`Round.record` returns: every candidate scored, in order, and the question ids
    the round held already (a retry stores nothing for those)."""

    def __init__(self, scored: Iterable[Scored] = (), stored_before: Collection[str] = ()) -> None:
        super().__init__(scored)
        self.stored_before = frozenset(stored_before)

    @property
    def new(self) -> int:
        """How many of the questions this call stored."""
        return sum(1 for s in self if s.question_id not in self.stored_before)


def score(c: Candidate, cfg: MethodConfig) -> Scored:
    """Votes over the construction answers and the double-confidence filter (Eq. 3)."""
    if (c.responses is None) == (c.answers is None):
        raise ProtocolError(f"question {c.question_id}: give exactly one of responses and answers")
    answers = list(c.answers) if c.answers is not None else [cur.extract_answer(x) for x in c.responses or ()]
    if not answers:
        raise ProtocolError(f"question {c.question_id}: no construction responses")
    v = cur.votes(answers)
    retained = v.label is not None and cur.keep(v.p1, v.p2, cfg.filter)
    ref = v.reference if retained else None  # earliest response of the label's class
    reference = c.responses[ref] if ref is not None and c.responses is not None else ""
    return Scored(
        c.question_id,
        c.text,
        c.mode,
        c.active_cause,
        c.mastered_cause,
        len(answers),
        v.p1,
        v.p2,
        v.label,
        retained,
        reference,
    )


# --- failures --------------------------------------------------------------------------------

FAILURE_FIELDS = ("failure_id", "question_id", "response", "reference")
FAILURE_CONTEXT = ("question", "pseudo_label", "known_causes")
"""The other fields of a ``diagevo diagnose`` FAILURES.jsonl line: the round holds them already
(the question, its pseudo-label and the causes it was generated for), so a line of that file is
also a failure for :meth:`Round.record_failures`; they are checked for their type, not stored."""


class FailureRecord(TypedDict):
    """One failed optimization response of a retained question, as :meth:`Round.record_failures`
    takes it and as a line of ``diagevo diagnose FAILURES.jsonl`` holds it (one format for both).

    ``failure_id`` names this failure within the run (unique across rounds); ``question_id`` the
    retained question of the round it failed; ``response`` the policy's failing response;
    ``reference`` a construction response that agrees with the pseudo-label (``Scored.reference``).
    ``question``, ``pseudo_label`` and ``known_causes`` may be given (the CLI's file has them)."""

    failure_id: str
    question_id: str
    response: str
    reference: str
    question: NotRequired[str]
    pseudo_label: NotRequired[str]
    known_causes: NotRequired[Sequence[str]]


def _failure_record(f: Mapping[str, object]) -> dict[str, str]:
    """A failure as ``failure.recorded`` holds it: its four fields, each a string, only the
    ids and texts the diagnostician needs (a failure without response or reference is refused)."""
    if not isinstance(f, Mapping):
        raise ProtocolError(f"a failure is a mapping of {', '.join(FAILURE_FIELDS)}, not {type(f).__name__}")
    fid = f.get("failure_id")
    if not isinstance(fid, str) or not fid.strip():
        raise ProtocolError("failure_id must be a non-empty string")
    unknown = sorted(set(f) - set(FAILURE_FIELDS) - set(FAILURE_CONTEXT))
    if unknown:
        raise ProtocolError(f"failure {fid!r}: unknown field {unknown[0]!r}")
    record: dict[str, str] = {}
    for name in FAILURE_FIELDS[1:]:
        value = f.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ProtocolError(f"failure {fid!r}: {name} must be a non-empty string")
        record[name] = value
    for name in ("question", "pseudo_label"):
        if name in f and not isinstance(f[name], str):
            raise ProtocolError(f"failure {fid!r}: {name} must be a string")
    causes = f.get("known_causes", [])
    if not isinstance(causes, list | tuple) or not all(isinstance(c, str) for c in causes):
        raise ProtocolError(f"failure {fid!r}: known_causes must be a list of cause ids")
    return {"failure_id": fid, **record}


def refuse_other_content(store: Recorder, run: str, t: int, events: Sequence[EventIn]) -> None:
    """Refuse (:class:`ProtocolError`) when round ``t`` holds one of ``events``' ids with other
    data: a question id recorded again with another text, mode, cause or votes would leave the
    trainer holding a question the log does not (the same data again is a retry, skipped by the
    append). Called from inside a decision, under the append lock."""
    wanted = {ev.event_id: ev for ev in events}
    if not wanted:
        return
    for e in store.read(run, in_round=t, keys={"event_id": list(wanted)}, texts=True):
        ev = wanted.get(e.event_id)
        if ev is None or e.data == ev.data:
            continue
        field = next(n for n in [*ev.data, *e.data] if e.data.get(n) != ev.data.get(n))
        what = ev.data.get("question_id", e.event_id)
        raise ProtocolError(
            f"question {quoted(what, 80)} is recorded in round {t} of run {run!r} already with another {field} "
            "(give it a new id; recording the same question again is a no-op)"
        )


FAILURE_TYPES = (FailureRecorded, FailureDiagnosed, DiagnosisFailed)
_DIAGNOSES = frozenset({FailureDiagnosed.name, DiagnosisFailed.name})


def refuse_reused_failures(store: Recorder, run: str, t: int, given: Mapping[str, Mapping[str, Any] | None]) -> None:
    """Refuse failure ids the run holds in another round (recorded or diagnosed there), or in
    round ``t`` recorded with other content (``given[id]``: the record, None to skip that
    check). A failure id names one failure of the run: diagnosed twice it would be counted
    twice. Called from inside a decision, under the append lock."""
    if not given:
        return
    elsewhere: dict[str, tuple[str, int]] = {}  # failure -> what another round did with it (diagnosed first)
    for e in store.read(run, types=FAILURE_TYPES, keys={"failure_id": list(given)}, texts=True):
        fid = e.data.get("failure_id")
        if not isinstance(fid, str) or fid not in given:
            continue
        if e.round != t:
            what = "recorded" if e.type == FailureRecorded.name else "diagnosed"
            if what == "diagnosed" or fid not in elsewhere:
                elsewhere[fid] = (what, e.round)
            continue
        record = given[fid]
        if e.type == FailureRecorded.name and record is not None:
            stored = {name: e.data.get(name) for name in FAILURE_FIELDS}
            if stored != dict(record):
                field = next(n for n in FAILURE_FIELDS if stored[n] != record[n])
                raise ProtocolError(
                    f"failure {fid!r} is recorded in round {t} already with another {field} (give it a new id)"
                )
    for fid in given:
        if fid in elsewhere:
            what, other = elsewhere[fid]
            raise ProtocolError(
                f"failure {fid!r} was {what} in round {other} of run {run!r} already: a failure id names one "
                "failure of the run (give new failures new ids)"
            )


NOTE_TYPES: frozenset[type[Event]] = frozenset({PhaseCompleted, CheckpointWritten, CheckpointPruned, TrainStep})
"""What :meth:`Round.note` takes: the trainer's bookkeeping, which changes no count."""

_DIAGNOSTICIAN: set[type[Event]] = {FailureDiagnosed, DiagnosisFailed, LLMCalled}  # its decisions and notes
_DECIDERS: set[type[Event]] = {FailureAttributed, CauseReactivated, CauseCreated, NodeCreated, NodesMerged}
DIAGNOSIS_TYPES: frozenset[type[Event]] = frozenset(_DIAGNOSTICIAN | _DECIDERS)
"""What :meth:`Round.append_diagnosis` takes: the diagnostician's decisions and notes, and the
memory events its deciders return (never a promotion, a config or a milestone)."""


def _only(allowed: frozenset[type[Event]], name: str, what: str) -> None:
    """Refuse an event type (by its name) that ``allowed`` does not hold, naming those it does."""
    names = {cls.name for cls in allowed}
    if name not in names:
        raise ProtocolError(f"{what} cannot be {quoted(name, 60)} (it takes {', '.join(sorted(names))})")


def refuse_counted_twice(store: Recorder, run: str, events: Sequence[EventIn]) -> None:
    """Refuse events that would count evidence twice (:mod:`diagevo.memory.counting`) against
    what the run holds: a failure diagnosed or attributed again. Those the run holds already
    under the same id (a retry) are skipped, as the append skips them. Called under the lock."""
    fresh = [ev for ev in events if CATALOG[ev.type] in COUNTED_TYPES]
    held = store.existing_ids(run, [ev.event_id for ev in fresh])
    fresh = [ev for ev in fresh if ev.event_id not in held]
    failures = {f for ev in fresh if isinstance(f := ev.data.get("failure_id"), str)}
    tally = stored_tally(store, run, failures=failures)
    for ev in fresh:
        broken = tally.take(ev.round, CATALOG[ev.type], ev.data)
        if broken is not None:
            raise ProtocolError(f"{ev.type} refused: {broken[0]}: {broken[1]}")


# --- one round -------------------------------------------------------------------------------


class Round:
    """Round ``t`` of a run, the unit a trainer works in: the run's config and M_{t-1} are read
    from the log once, on first use, and every step of the round reuses them.

    The steps, in order: :meth:`requests` (any number of times), :meth:`record`, :meth:`promote`,
    :meth:`record_failures`, ``diagevo.diagnose(round)``, :meth:`commit`; :meth:`note` for the trainer's
    own bookkeeping. Each write re-checks the round's milestones under the store's append lock."""

    def __init__(self, store: Recorder, run: str, t: int) -> None:
        self.store = store
        """The event store the round reads and appends to."""
        self.run = run
        """The run's id."""
        self.t = t
        """The round's number t (1 for the first round; M_{t-1} is the memory it starts from)."""
        self._config: MethodConfig | None = None
        self._base: Memory | None = None
        self.reopened = False
        """True when :meth:`open` found the round open already (its steps so far stand)."""

    @classmethod
    def open(cls, store: Recorder, run: str, t: int | None = None) -> Round:
        """Open the next round (``t`` defaults to it). A round open already is returned as it
        stands, nothing appended (every rank of a trainer opens it, a retry does too), with
        :attr:`reopened` True and :attr:`next_step` saying what it takes next: a trainer that
        forgot to commit round 2 gets round 2 back, ``next_step == "commit"``."""
        t, was_open = _open(store, run, t)
        rnd = cls(store, run, t)
        rnd.reopened = was_open
        return rnd

    @classmethod
    def current(cls, store: Recorder, run: str) -> Round:
        """The run's open round."""
        return cls(store, run, current_round(store, run))

    @property
    def config(self) -> MethodConfig:
        """The run's config as it stands for this round (``run.configured`` before it applied):
        the method's, with what the components own carried (``config.part(name, cls)`` reads one)."""
        if self._config is None:
            self._config = run_config(self.store, self.run)
        return self._config

    @property
    def base(self) -> Memory:
        """M_{t-1}, the memory the round's schedule and decisions read (with the run's current
        ``k``: a ``run.configured`` after a fork may change it for the rounds that follow)."""
        if self._base is None:
            memory = load_memory(self.store, self.run, self.t - 1)
            k = self.config.memory.k
            self._base = memory if memory.k == k else replace(memory, k=k)
        return self._base

    @property
    def next_step(self) -> str:
        """What the round takes next, read from the log now: ``"record"`` (no question yet),
        ``"promote"`` (questions recorded: more may be), ``"diagnose"`` (promotions decided, a
        recorded failure not diagnosed), ``"commit"``, or ``"committed"``; ``"open"`` for a
        round not yet opened."""
        st, run, t = round_state(self.store, self.run), self.run, self.t
        if t <= st.last_committed:
            return "committed"
        if t not in st.started:
            return "open"
        if t not in st.promoted:
            return "promote" if self.store.count(run, in_round=t, types=(QuestionScored,)) else "record"
        recorded: set[str] = set()
        for _s, _r, typ, d in self.store.rows(run, in_round=t, types=FAILURE_TYPES):
            (recorded.add if typ == FailureRecorded.name else recorded.discard)(d.get("failure_id", ""))
        return "diagnose" if recorded else "commit"

    def event(self, key: str, event: Event) -> EventIn:
        """``event`` of this round, under the id ``key`` gives it (the same on every retry)."""
        return _event(self.run, self.t, key, event)

    # --- the steps ------------------------------------------------------------------------------
    def requests(self, n: int, *, purpose: str = "curriculum", seed: int | None = None) -> list[Request]:
        """``n`` requests from the schedule of M_{t-1}; the same for the same (run, round, seed,
        purpose). ``purpose`` is ``curriculum`` (Q^cur) or ``challenger`` (Q^chal)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ProtocolError(f"n must be a whole number of at least 0, not {quoted(n, 40)}")
        if purpose not in PURPOSES:
            raise ProtocolError(f"purpose must be one of {', '.join(PURPOSES)}, not {purpose!r}")
        st = round_state(self.store, self.run)
        require_open(st, self.t, "draw requests")
        cfg, memory, t = self.config.memory, self.base, self.t
        phase, prefix = PURPOSES[purpose]
        rng = seeded(st.seed if seed is None else seed, t, phase)
        drawn = sample_requests(
            memory,
            schedule(memory),
            n,
            rng,
            generation=cfg.generation,
            fixed_free_ratio=cfg.fixed_free_ratio,
            stitching=cfg.stitching,
        )
        return [Request(question_id=f"{prefix}{t}-{i:05d}", **asdict(r)) for i, r in enumerate(drawn)]

    def record(self, candidates: Sequence[Candidate]) -> Recorded:
        """Vote, filter and append ``question.generated`` + ``question.scored`` for each candidate
        (one transaction); returns them scored, with the ids the round held already
        (:class:`Recorded`). Recording a question id again is a no-op."""
        if isinstance(candidates, str | bytes | Mapping) or not isinstance(candidates, Iterable):
            raise ProtocolError(f"candidates must be a sequence of Candidate, not {type(candidates).__name__}")
        candidates = list(candidates)
        for c in candidates:
            if not isinstance(c, Candidate):
                raise ProtocolError(f"candidates must be Candidate objects, not {type(c).__name__}")
        run, t, cfg, memory = self.run, self.t, self.config, self.base
        seen: set[str] = set()
        scored: list[Scored] = []
        generated: list[EventIn] = []
        scores: list[EventIn] = []
        for c in candidates:
            if c.question_id in seen:
                raise ProtocolError(f"question {c.question_id} appears twice")
            seen.add(c.question_id)
            for cause in (c.active_cause, c.mastered_cause):
                if cause is not None and cause not in memory.causes:
                    raise ProtocolError(f"question {c.question_id}: unknown cause {cause!r} (not in M_{t - 1})")
            s = score(c, cfg)
            try:
                question = QuestionGenerated(
                    question_id=c.question_id,
                    mode=cast(GenerationMode, c.mode),  # checked here, refused as the candidate's
                    active_cause=c.active_cause,
                    mastered_cause=c.mastered_cause,
                    node=c.node,
                    text=c.text,
                )
                generated.append(self.event(f"gen/{c.question_id}", question))
            except InvalidEvent as exc:
                raise ProtocolError(f"question {c.question_id}: {exc}") from None
            votes = QuestionScored(
                question_id=c.question_id,
                n=s.n,
                p1=s.p1,
                p2=s.p2,
                pseudo_label=s.pseudo_label,
                retained=s.retained,
                reference=s.reference,
            )
            scores.append(self.event(f"score/{c.question_id}", votes))
            scored.append(s)
        stored: set[str] = set()

        def decide(read: Reader) -> list[EventIn]:
            st = _state(run, read(MILESTONES), self.store.url)
            require_open(st, t, "record questions")
            if t in st.promoted:
                raise ProtocolError(
                    f"cannot record questions into round {t} of run {run!r}: its promotions are decided (the "
                    f"evidence is closed); commit round {t} first, then open round {t + 1}",
                    hint=self._hint("commit", "rnd.commit(metrics)"),
                )
            refuse_other_content(self.store, run, t, [*generated, *scores])
            stored.clear()  # read under the append lock: what this append skips
            stored.update(d["question_id"] for _s, _r, _t, d in read((QuestionGenerated,), round=t))
            return generated + scores

        _appending(self.store, run, decide)
        return Recorded(scored, stored & seen)

    def promote(self) -> list[Promotion]:
        """Decide Eq. 5-6 once, from every candidate recorded in the round against M_{t-1};
        appends the promotions and ``promotions.decided``. Returns the promotions."""
        run, t, cfg, memory = self.run, self.t, self.config.memory, self.base
        decided: list[dict[str, Any]] = []

        def decide(read: Reader) -> list[EventIn]:
            st = _state(run, read(MILESTONES), self.store.url)
            require_open(st, t, "decide promotions")
            if t in st.promoted:
                raise ProtocolError(f"promotions of round {t} in run {run!r} are decided already")
            evidence = promotion_evidence(read((QuestionGenerated, QuestionScored), round=t))
            changes = decide_promotions(memory, evidence, cfg.theta_up, enabled=cfg.state_updates)
            promotions = [c for c in changes if isinstance(c, CausePromoted)]
            decided.extend(p.model_dump() for p in promotions)
            events = [self.event(f"promote/{p.cause_id}", p) for p in promotions]
            closed = PromotionsDecided(promoted=[p.cause_id for p in promotions], candidates=len(evidence))
            events.append(self.event("promotions", closed))
            return events

        _appending(self.store, run, decide)
        return [
            Promotion(
                cause_id=d["cause_id"],
                kind="promoted" if "acc" in d else "reactivated",
                acc=d.get("acc"),
                n_candidates=d.get("n_candidates"),
                failure_id=d.get("failure_id"),
            )
            for d in decided
        ]

    def record_failures(self, failures: Sequence[FailureRecord | Mapping[str, object]]) -> int:
        """Append ``failure.recorded`` for failed optimization responses of retained questions
        (:class:`FailureRecord`: ``failure_id``, ``question_id``, ``response``, ``reference``, the
        last two non-empty; a line of ``diagevo diagnose``'s FAILURES.jsonl is one as it is);
        returns how many were new. Recording the same failure again in this round is a no-op; a
        failure id the run holds in another round, or here with other content, is refused
        (``ProtocolError``, a :class:`~diagevo.errors.Conflict`) and nothing is stored."""
        run, t = self.run, self.t
        events: list[EventIn] = []
        given: dict[str, dict[str, Any]] = {}
        for f in failures:
            record = _failure_record(f)
            fid = record["failure_id"]
            if fid in given:
                if given[fid] != record:
                    raise ProtocolError(f"failure {fid!r} appears twice with different content")
                continue
            given[fid] = record
            try:
                events.append(self.event(f"fail/{fid}", FailureRecorded(**record)))
            except InvalidEvent as exc:
                raise ProtocolError(f"failure {fid!r}: {exc}") from None
        wanted: dict[str, str] = {}  # question -> its first failure
        for e in events:
            wanted.setdefault(e.data["question_id"], e.data["failure_id"])

        def decide(read: Reader) -> list[EventIn]:
            st = _state(run, read(MILESTONES), self.store.url)
            require_open(st, t, "record failures")
            refuse_reused_failures(self.store, run, t, given)
            retained = {d["question_id"] for _s, _r, _t, d in read((QuestionScored,), round=t) if d["retained"]}
            missing = sorted(set(wanted) - retained)
            if missing:
                q = missing[0]
                raise ProtocolError(f"failure {wanted[q]!r}: question {q!r} is not a retained question of round {t}")
            return events

        return _appending(self.store, run, decide).appended

    def memory(self) -> Memory:
        """The memory now: M_{t-1} and what the round has appended so far (folded from M_{t-1})."""
        return load_memory(self.store, self.run, since=self.base)

    def append_diagnosis(self, events: Sequence[EventIn], *, since_seq: int | None = None) -> AppendResult:
        """Append the diagnostician's decisions and notes of this round (``failure.diagnosed``,
        ``llm.called``, ``diagnosis.failed`` and the memory events decided), decided under the
        append lock: the round must be the run's next to commit. With ``since_seq``, the seq of
        the memory they were decided against, they are refused with :class:`MemoryMoved` when
        another producer has appended a memory event since (the caller decides again)."""
        run, t = self.run, self.t
        for ev in events:
            _only(DIAGNOSIS_TYPES, ev.type, "a diagnosis")
            if ev.run != run or ev.round != t:
                raise ProtocolError(f"a diagnosis of round {t} of run {run!r} names run {ev.run!r}, round {ev.round}")

        def decide(read: Reader) -> Sequence[EventIn]:
            st = _state(run, read(MILESTONES), self.store.url)
            if t != st.last_committed + 1:
                raise ProtocolError(
                    f"round {t} is not open in run {run!r}: its last committed round is {st.last_committed}"
                )
            decided = {fid: None for ev in events if ev.type in _DIAGNOSES and (fid := ev.data.get("failure_id"))}
            refuse_reused_failures(self.store, run, t, decided)  # a failure is diagnosed once in a run
            refuse_counted_twice(self.store, run, events)  # ...and counted once
            if since_seq is not None:
                foreign = read(MEMORY_TYPES, after_seq=since_seq)
                if foreign:
                    raise MemoryMoved(f"{plural(len(foreign), 'memory event')} by another producer")
            return events

        return _appending(self.store, run, decide)

    def record_metrics(self, metrics: Mapping[str, float], *, rank: int = 0, weight: float = 1.0) -> bool:
        """Record this rank's metrics of the round (``metrics.recorded``): every rank of a
        data-parallel trainer records its own, and :meth:`commit` folds them into the round's
        metrics, the mean of each weighted by ``weight`` (e.g. the rank's number of questions).
        Recording the same again is a no-op (False); other metrics for a rank that recorded
        already, or a round that is committed, are refused and nothing is stored."""
        run, t = self.run, self.t
        values = check_metrics(metrics)
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ProtocolError(f"rank must be a whole number of at least 0, not {rank!r}")
        try:
            weight = float(real_number(weight, f"weight of rank {rank}"))
        except BadInput as exc:
            raise ProtocolError(str(exc)) from None
        if weight <= 0:
            raise ProtocolError(f"weight of rank {rank} must be a finite number above 0, not {weight!r}")
        ev = self.event(f"metrics/rank{rank}", MetricsRecorded(rank=rank, weight=weight, metrics=values))

        def decide(read: Reader) -> list[EventIn]:
            require_open(_state(run, read(MILESTONES), self.store.url), t, f"record the metrics of rank {rank}")
            recorded = [d for _s, _r, _t, d in read((MetricsRecorded,), round=t)]
            for d in recorded:
                if d["rank"] == rank and (d["metrics"], d["weight"]) != (ev.data["metrics"], ev.data["weight"]):
                    raise ProtocolError(f"rank {rank} recorded other metrics in round {t} of run {run!r} already")
            rank_metrics([*(d for d in recorded if d["rank"] != rank), ev.data])  # a mean the commit can store
            return [ev]

        return _appending(self.store, run, decide).appended == 1

    def note(self, key: str, event: Event) -> None:
        """Append a trainer's bookkeeping event: a ``PhaseCompleted``, ``CheckpointWritten``,
        ``CheckpointPruned`` or ``TrainStep`` (what changes the memory or where the round stands
        has its own step)."""
        _only(NOTE_TYPES, event.name, "a note")
        self.notes([self.event(key, event)])

    def notes(self, events: Sequence[EventIn]) -> None:
        """Append a trainer's bookkeeping events of this round (the types :meth:`note` takes) in
        one transaction, while the round is open (decided under the append lock)."""
        run, t = self.run, self.t
        for ev in events:
            _only(NOTE_TYPES, ev.type, "a note")
            if ev.run != run or ev.round != t:
                raise ProtocolError(f"a note of round {t} of run {run!r} names run {ev.run!r}, round {ev.round}")

        def decide(read: Reader) -> Sequence[EventIn]:
            require_open(_state(run, read(MILESTONES), self.store.url), t, "note")
            return events

        _appending(self.store, run, decide)

    def progress(self) -> RoundProgress:
        """Where this round stands (see :class:`RoundProgress`)."""
        return round_progress(self.store, self.run, self.t)

    def commit(
        self,
        metrics: Mapping[str, float] | None = None,
        *,
        summary: Mapping[str, Json] | None = None,
        allow_undiagnosed: bool = False,
        allow_failed: bool = False,
    ) -> Committed:
        """Append ``eval.recorded`` (the metrics: those the ranks recorded with
        :meth:`record_metrics`, weighted, and ``metrics`` over them) and ``round.committed``: M_t
        is the memory here. The commit waits for no rank: the trainer's ranks meet first (a
        barrier of its own), and a rank's write after the commit is refused.
        Refused before promotions are decided and, unless ``allow_undiagnosed``, while a recorded
        failure has no diagnosis, and unless ``allow_failed``, while more of its failures' diagnoses
        failed than ``diagnosis.max_failed_share`` allows (or all did): their evidence would be
        lost from M_t. A commit so allowed says how many in ``failed_diagnoses_allowed``.
        ``summary``: the trainer's own figures to keep in ``round.committed`` (never a count the
        commit takes from the log: ``questions``, ``F`` ...). Returns what ``round.committed``
        recorded (counts, F_t, ε_{t+1}, ``summary``)."""
        run, t, base = self.run, self.t, self.base
        metrics = check_metrics(metrics or {})
        extra = check_summary(summary)
        committed: dict[str, Any] = {}

        def decide(read: Reader) -> list[EventIn]:
            st = _state(run, read(MILESTONES), self.store.url)
            require_open(st, t, "commit")
            if t not in st.promoted:
                raise ProtocolError(
                    f"cannot commit round {t}: its promotions are not decided",
                    hint=self._hint("promote", "rnd.promote()"),
                )
            rows = read(None, round=t)
            failures = {d["failure_id"] for _s, _r, typ, d in rows if typ == FailureRecorded.name}
            diagnosed = {d["failure_id"] for _s, _r, typ, d in rows if typ in _DIAGNOSES and d.get("failure_id")}
            pending = sorted(failures - diagnosed)
            if pending and not allow_undiagnosed:
                raise ProtocolError(
                    f"cannot commit round {t}: {plural(len(pending), 'recorded failure')} "
                    f"{'is' if len(pending) == 1 else 'are'} not diagnosed "
                    f"(first: {pending[0]}); diagnose them or allow undiagnosed failures"
                )
            failed = failed_diagnoses(rows)
            if self.config.diagnosis.too_many_failed(len(failed), len(failures | diagnosed)):
                if not allow_failed:
                    raise ProtocolError(
                        f"cannot commit round {t}: {len(failed)} of {plural(len(failures | diagnosed), 'failure')} "
                        f"failed to diagnose, more than diagnosis.max_failed_share "
                        f"{self.config.diagnosis.max_failed_share:g} allows (first: {failed[0]}); diagnose the "
                        "round again (only they are asked) or allow the failed diagnoses"
                    )
                committed["failed_diagnoses_allowed"] = len(failed)
            after = fold(read(FOLDED, after_seq=base.last_seq), run, base)
            sched = schedule(after)
            # the round's statistics as `memory stats` counts them, and the schedule it leaves
            committed.update(count_rounds(rows).get(t, {}))
            ranks = [d for _s, _r, typ, d in rows if typ == MetricsRecorded.name]
            round_metrics = {**rank_metrics(ranks), **metrics}  # the caller's own, over the ranks'
            if ranks:
                committed["ranks"] = len(ranks)
            committed.update(F=sched.F, epsilon_next=sched.epsilon)
            committed.update(extra)  # check_summary: none of it is a count
            events = [self.event("eval", EvalRecorded(**round_metrics))] if round_metrics else []
            return [*events, self.event(RoundCommitted.name, RoundCommitted(**committed))]

        try:
            _appending(self.store, run, decide)
        except InvariantError as exc:
            raise ProtocolError(f"cannot commit round {t}: {exc}") from None
        refresh(self.store, run)
        counts = {k: v for k, v in committed.items() if k not in ("ranks", "F", "epsilon_next") and k not in extra}
        return Committed(
            t=t,
            counts=counts,
            F=committed["F"],
            epsilon_next=committed["epsilon_next"],
            ranks=committed.get("ranks"),
            summary={k: committed[k] for k in extra},
        )

    def _hint(self, step: str, call: str | None = None) -> Hint:
        """The command that takes ``step`` for this round (``call``: the same in Python)."""
        return Hint(("round", step, "--run", self.run, "--round", str(self.t)), self.store.url, call=call)


def failed_diagnoses(rows: Sequence[tuple[int, int, str, Mapping[str, Any]]]) -> list[str]:
    """The failures of a round's ``rows`` whose diagnosis failed and that nothing decided since
    (a failed diagnosis is asked again by the next diagnose): sorted ids."""
    failed: set[str] = set()
    decided: set[str] = set()
    for _s, _r, typ, d in rows:
        fid = d.get("failure_id")
        if not isinstance(fid, str):
            continue
        if typ == DiagnosisFailed.name:
            failed.add(fid)
        elif typ == FailureAttributed.name or typ == CauseCreated.name:
            decided.add(fid)
        elif typ == FailureDiagnosed.name and d.get("matched_cause") is None and d.get("error_cause") is None:
            decided.add(fid)  # a non-skill slip
    return sorted(failed - decided)


def rank_metrics(recorded: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The round's metrics from the ranks' ``metrics.recorded``: for each name, the mean over
    the ranks that report it, weighted by their weights. Each weight is divided by the total
    first, so finite values never overflow on the way to their mean; a total weight that is not
    finite is refused (:class:`ProtocolError`), never stored as ``null``."""
    values: dict[str, list[tuple[float, float]]] = {}
    for d in sorted(recorded, key=lambda d: d["rank"]):  # the same sum in every process
        for name, value in d["metrics"].items():
            values.setdefault(name, []).append((float(d["weight"]), float(value)))
    means: dict[str, float] = {}
    for name, pairs in values.items():
        total = sum(w for w, _ in pairs)  # inf where it overflows (fsum would raise)
        mean = sum(w / total * v for w, v in pairs) if math.isfinite(total) else math.inf
        if not math.isfinite(mean):
            raise ProtocolError(f"metric {name!r}: the ranks' weighted mean is not a finite number (weights too large)")
        means[name] = mean
    return means


COUNTED_HERE = frozenset({*COUNTED_COLUMNS, "F", "epsilon_next", "ranks"})
"""What ``round.committed`` holds that :meth:`Round.commit` counts from the log itself."""


def check_summary(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """A trainer's own figures for ``round.committed``: named by strings other than what the
    commit counts from the log (a summary cannot say how many questions or failures a round had,
    nor F_t), :class:`ProtocolError` naming the first that is."""
    if summary is None:
        return {}
    if not isinstance(summary, Mapping):
        raise ProtocolError(f"summary must be a mapping of names to values, not {type(summary).__name__}")
    for name in summary:
        if not isinstance(name, str) or not name.strip():
            raise ProtocolError(f"summary name {quoted(name, 60)} must be a non-empty string")
        if name in COUNTED_HERE:
            raise ProtocolError(
                f"summary field {name!r} is counted from the log by the commit itself: leave it out of the summary"
            )
    return dict(summary)


def check_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The metrics of a commit: each named by a non-empty string, each a real number (a numpy or
    torch scalar is the number it holds), finite and small enough for a float
    (:class:`ProtocolError` naming the first that is not)."""
    if not isinstance(metrics, Mapping):
        raise ProtocolError(f"metrics must be a mapping of names to numbers, not {type(metrics).__name__}")
    out: dict[str, float] = {}
    for name, value in metrics.items():
        if not isinstance(name, str) or not name.strip():
            raise ProtocolError(f"metric name {quoted(name, 60)} must be a non-empty string")
        try:
            out[name] = real_number(value, f"metric {quoted(name, 60)}")
        except BadInput as exc:
            raise ProtocolError(str(exc)) from None
    return out


# --- the steps as functions of (store, run, round) -------------------------------------------
# Each builds a Round, so each reads the config and M_{t-1} afresh; a trainer that takes several
# steps of one round keeps a :class:`Round` instead.


def requests(
    store: Recorder, run: str, t: int, n: int, *, purpose: str = "curriculum", seed: int | None = None
) -> list[Request]:
    """:meth:`Round.requests` of round ``t``."""
    return Round(store, run, t).requests(n, purpose=purpose, seed=seed)


def record(store: Recorder, run: str, t: int, candidates: Sequence[Candidate]) -> Recorded:
    """:meth:`Round.record` of round ``t``."""
    return Round(store, run, t).record(candidates)


def promote(store: Recorder, run: str, t: int) -> list[Promotion]:
    """:meth:`Round.promote` of round ``t``."""
    return Round(store, run, t).promote()


def record_failures(store: Recorder, run: str, t: int, failures: Sequence[FailureRecord | Mapping[str, object]]) -> int:
    """:meth:`Round.record_failures` of round ``t``."""
    return Round(store, run, t).record_failures(failures)


def note(store: Recorder, run: str, t: int, key: str, event: Event) -> None:
    """:meth:`Round.note` of round ``t``."""
    Round(store, run, t).note(key, event)


def commit(
    store: Recorder,
    run: str,
    t: int,
    metrics: Mapping[str, float] | None = None,
    *,
    summary: Mapping[str, Json] | None = None,
    allow_undiagnosed: bool = False,
    allow_failed: bool = False,
) -> Committed:
    """:meth:`Round.commit` of round ``t``."""
    return Round(store, run, t).commit(
        metrics, summary=summary, allow_undiagnosed=allow_undiagnosed, allow_failed=allow_failed
    )
