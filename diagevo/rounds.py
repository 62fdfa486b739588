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
from typing import Any, cast

from diagevo import curriculum as cur
from diagevo.catalog import (
    CATALOG,
    FOLDED,
    MEMORY_TYPES,
    MILESTONES,
    RETROSPECTIVE,
    CausePromoted,
    CheckpointWritten,
    DiagnosisFailed,
    EvalRecorded,
    Event,
    EventTypes,
    FailureDiagnosed,
    FailureRecorded,
    MetricsRecorded,
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
)
from diagevo.catalog import ids as keys
from diagevo.catalog.events import GenerationMode
from diagevo.config import MethodConfig, config_from_record
from diagevo.errors import BadInput, Conflict, Hint, NotFound
from diagevo.log import AppendResult, EventRow, EventStore
from diagevo.memory.deciders import decide_promotions, promotion_evidence
from diagevo.memory.fold import InvariantError, fold
from diagevo.memory.sampler import GenerationRequest, sample_requests
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.redaction import redact_config
from diagevo.schemas import EventIn, InvalidEvent, new_event
from diagevo.urls import redact_url
from diagevo.views import runs as runs_view
from diagevo.views.caches import refresh
from diagevo.views.memory import load_memory
from diagevo.views.stats import count_rounds
from diagevo.words import plural

PURPOSES = {"curriculum": ("cur-requests", "q"), "challenger": ("chal-requests", "c")}


class ProtocolError(Conflict, BadInput):
    """A round operation out of order or with input that does not fit the round."""


class MemoryMoved(Conflict):
    """Another producer changed the memory since the decisions were taken: decide again."""


class UnknownRun(ProtocolError, NotFound):
    """A step for a run the log does not hold."""


def _event(run: str, t: int, key: str, event: Event) -> EventIn:
    return new_event(event, run=run, round=t, event_id=keys.event_id(run, t, key))  # the same on every retry


Reader = Callable[..., list[EventRow]]
"""What a decision reads: ``read(types, *, round=None, after_seq=0)`` -> the run's rows."""


def _appending(store: EventStore, run: str, decide: Callable[[Reader], Sequence[EventIn]]) -> AppendResult:
    """Append the events ``decide`` returns, having let it read ``run`` at the log's head, under
    the append lock: one decision, no writer in between."""

    def read(types: EventTypes | None, *, round: int | None = None, after_seq: int = 0) -> list[EventRow]:
        return list(store.rows(run, types=types, round=round, after_seq=after_seq))

    return store.append_decided(lambda: decide(read))


# --- the run and its rounds ------------------------------------------------------------------


def run_config(store: EventStore, run: str) -> MethodConfig:
    """The config recorded in the run's ``run.started`` (defaults for what it leaves out), with
    the latest ``run.configured`` applied: the one place the run's config is read from the log."""
    cfg = stored_config(store, run)
    if cfg is None:
        raise UnknownRun(f"no run {run!r}: start it first", hint=Hint(("round", "start", "--run", run), store.url))
    return cfg


def stored_config(store: EventStore, run: str) -> MethodConfig | None:
    """:func:`run_config`, or None for a run the log does not hold."""
    data: dict[str, Any] | None = None
    for e in store.read(run, types=(RunStarted, RunConfigured)):
        data = dict(e.data["config"])
    if data is None:
        return None
    try:
        return config_from_record(data)
    except BadInput as exc:  # a log stored before ingest checked its config
        raise BadInput(f"the config stored for run {run!r} does not validate: {exc}") from None


def config_record(config: MethodConfig | Mapping[str, Any]) -> dict[str, Any]:
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


def start_run(
    store: EventStore,
    run: str,
    config: MethodConfig | Mapping[str, Any],
    seed: int = 0,
    *,
    new: bool = False,
    trainer: str = EXTERNAL_TRAINER,
) -> bool:
    """Append ``run.started``, decided under the append lock: False (and nothing stored) when
    the run exists already, or :class:`RunExists` with ``new`` (a run that must be new: two
    processes creating one id both find out, one of them here). ``trainer`` names what drives
    the run (``runs`` and ``report`` show it; only a run of ``diagevo train`` resumes with it)."""
    try:
        started = RunStarted(config=config_record(config), seed=seed, trainer=trainer)
        ev = new_event(started, run=run, round=0, event_id=keys.event_id(run, 0, RunStarted.name))
    except InvalidEvent as exc:
        raise ProtocolError(str(exc)) from None

    def decide() -> list[EventIn]:
        if not store.has_run(run):
            return [ev]
        if new:
            raise RunExists(
                (
                    f"run {run!r} already exists in {redact_url(store.url)}: continue it with {{command}}, or name a "
                    "new run"
                ),
                hint=Hint(("train", "--run", run, "--resume"), store.url),
            )
        return []

    return store.append_decided(decide).appended == 1


def run_trainer(store: EventStore, run: str) -> str | None:
    """The trainer the run's ``run.started`` names (a fork's: its source's); None for a log of
    an older diagevo, which did not record it."""
    for e in store.read(run, types=(RunStarted,)):
        name = RunStarted.from_stored(e.data).trainer
        return name if isinstance(name, str) else None
    return None


def configure_run(store: EventStore, run: str, config: MethodConfig) -> bool:
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
        return [new_event(RunConfigured(config=record, seed=config.train.seed), run=run, round=t, event_id=eid)]

    if saved is not None and saved.redacted() == config.redacted():
        return False
    return _appending(store, run, decide).appended == 1


def configure_fork(store: EventStore, run: str, overrides: Sequence[str]) -> bool:
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
        raise ProtocolError(f"run {run!r} {own}: its config is fixed (fork it with memory fork --set to change it)")
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
class RoundState:
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


def _state(run: str, rows: Iterable[EventRow], db: str = "") -> RoundState:
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
    return RoundState(run, last, frozenset(started), frozenset(promoted), seed, db)


@dataclass(frozen=True)
class RoundProgress:
    """How far round ``t`` has come: the run's milestones, the phases a trainer noted done
    (``phase.completed``, with their figures) and the last checkpoint written up to the round:
    what a resumed round skips and loads."""

    state: RoundState
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


def round_progress(store: EventStore, run: str, t: int) -> RoundProgress:
    """Where round ``t`` of ``run`` stands (indexed reads of a few dozen events)."""
    state = round_state(store, run)
    phases = {e.data["phase"]: e.data for e in store.read(run, round=t, types=(PhaseCompleted,))}
    checkpoint = None
    for e in store.read(run, types=(CheckpointWritten,)):
        if e.round <= t:  # in seq order: the last one up to this round's own
            checkpoint = CheckpointWritten.from_stored(e.data).path
    return RoundProgress(state, t, phases, checkpoint)


def round_state(store: EventStore, run: str) -> RoundState:
    """Where ``run`` stands (last committed round, open round, promotions decided), read from
    its milestone events only."""
    return _state(run, store.rows(run, types=MILESTONES), store.url)


def require_open(st: RoundState, t: int, doing: str) -> None:
    if t <= st.last_committed:
        raise ProtocolError(f"cannot {doing}: round {t} of run {st.run!r} is committed")
    if t != st.last_committed + 1:
        raise ProtocolError(
            f"cannot {doing}: round {t} is not next in run {st.run!r} (last committed: {st.last_committed})"
        )
    if t not in st.started:
        raise ProtocolError(
            f"cannot {doing}: round {t} of run {st.run!r} is not open",
            hint=Hint(("round", "start", "--run", st.run), st.db),
        )


def current_round(store: EventStore, run: str) -> int:
    """The run's open round."""
    st = round_state(store, run)
    if st.open_round is None:
        raise ProtocolError(
            f"run {run!r} has no open round (last committed: {st.last_committed}); open one first",
            hint=Hint(("round", "start", "--run", run), store.url),
        )
    return st.open_round


def open_round(store: EventStore, run: str, t: int | None = None) -> int:
    """Append ``round.started`` for the next round (``t`` defaults to it); opening the open
    round again is a no-op. Returns the round."""
    chosen: list[int] = []

    def decide(read: Reader) -> list[EventIn]:
        st = _state(run, read(MILESTONES), store.url)
        nxt = st.last_committed + 1
        want = nxt if t is None else t
        if want <= st.last_committed:
            raise ProtocolError(f"round {want} of run {run!r} is committed already")
        if want != nxt:
            raise ProtocolError(f"round {want} cannot open in run {run!r}: round {nxt} comes first")
        chosen.append(want)
        return [] if want in st.started else [_event(run, want, RoundStarted.name, RoundStarted())]

    _appending(store, run, decide)
    return chosen[0]


def record_retrospective(store: EventStore, run: str, events: Sequence[EventIn]) -> int:
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


def tag_run(store: EventStore, run: str, tags: Sequence[str], *, removed: bool = False) -> None:
    """Add ``tags`` to a run (or take them off), as a ``run.tagged`` event."""
    _annotate(store, run, RunTagged, lambda: RunTagged(tags=list(tags), removed=removed))


def note_run(store: EventStore, run: str, note: str) -> None:
    """Add a free-text note to a run, as a ``run.noted`` event."""
    _annotate(store, run, RunNoted, lambda: RunNoted(note=note))


def _annotate(store: EventStore, run: str, kind: type[Event], make: Callable[[], Event]) -> None:
    def decide(read: Reader) -> list[EventIn]:
        _state(run, read(MILESTONES), store.url)  # the run exists
        n = len(read((kind,)))  # the n-th of its kind: the same words twice are two events
        try:
            return [new_event(make(), run=run, round=0, event_id=keys.event_id(run, 0, kind.name, n))]
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
        return cur.challenger_messages(self.generation_request())

    def to_json(self) -> dict[str, Any]:
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

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Candidate:
        """From one JSON object; the request's own fields (texts, messages) may be carried along."""
        if not isinstance(obj, Mapping):
            raise ProtocolError("a candidate is a JSON object")
        known = {"question_id", "mode", "text", "active_cause", "mastered_cause", "node", "responses", "answers"}
        carried = {"active_text", "mastered_text", "node_label", "messages", "question"}
        unknown = sorted(set(obj) - known - carried)
        if unknown:
            raise ProtocolError(f"unknown field {unknown[0]!r}")
        text = obj.get("text", obj.get("question"))
        for name, value in (("question_id", obj.get("question_id")), ("mode", obj.get("mode")), ("text", text)):
            if not isinstance(value, str) or not value.strip():
                raise ProtocolError(f"{name} must be a non-empty string")
        for name in ("responses", "answers"):
            value = obj.get(name)
            if value is not None and (
                not isinstance(value, list) or not all(x is None or isinstance(x, str) for x in value)
            ):
                raise ProtocolError(f"{name} must be a list of strings")
        return cls(
            question_id=obj["question_id"],
            mode=obj["mode"],
            text=str(text),
            active_cause=obj.get("active_cause"),
            mastered_cause=obj.get("mastered_cause"),
            node=obj.get("node"),
            responses=tuple(obj["responses"]) if obj.get("responses") is not None else None,
            answers=tuple(obj["answers"]) if obj.get("answers") is not None else None,
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

    def to_json(self) -> dict[str, Any]:
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


def _failure_record(f: Mapping[str, Any]) -> dict[str, str]:
    """A failure as ``failure.recorded`` holds it: its four fields, each a string, only the
    ids and texts the diagnostician needs (a failure without response or reference is refused)."""
    if not isinstance(f, Mapping):
        raise ProtocolError(f"a failure is a mapping of {', '.join(FAILURE_FIELDS)}, not {type(f).__name__}")
    fid = f.get("failure_id")
    if not isinstance(fid, str) or not fid.strip():
        raise ProtocolError("failure_id must be a non-empty string")
    unknown = sorted(set(f) - set(FAILURE_FIELDS))
    if unknown:
        raise ProtocolError(f"failure {fid!r}: unknown field {unknown[0]!r}")
    for name in FAILURE_FIELDS[1:]:
        value = f.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ProtocolError(f"failure {fid!r}: {name} must be a non-empty string")
    return {name: f[name] for name in FAILURE_FIELDS}


FAILURE_TYPES = (FailureRecorded, FailureDiagnosed, DiagnosisFailed)
_DIAGNOSES = frozenset({FailureDiagnosed.name, DiagnosisFailed.name})


def refuse_reused_failures(store: EventStore, run: str, t: int, given: Mapping[str, Mapping[str, Any] | None]) -> None:
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


# --- one round -------------------------------------------------------------------------------


class Round:
    """Round ``t`` of a run, the unit a trainer works in: the run's config and M_{t-1} are read
    from the log once, on first use, and every step of the round reuses them.

    The steps, in order: :meth:`requests` (any number of times), :meth:`record`, :meth:`promote`,
    :meth:`record_failures`, ``diagevo.diagnose(round)``, :meth:`commit`; :meth:`note` for the trainer's
    own bookkeeping. Each write re-checks the round's milestones under the store's append lock."""

    def __init__(self, store: EventStore, run: str, t: int) -> None:
        self.store = store
        """The event store the round reads and appends to."""
        self.run = run
        """The run's id."""
        self.t = t
        """The round's number t (1 for the first round; M_{t-1} is the memory it starts from)."""
        self._config: MethodConfig | None = None
        self._base: Memory | None = None

    @classmethod
    def open(cls, store: EventStore, run: str, t: int | None = None) -> Round:
        """Open the next round (``t`` defaults to it; opening the open round again is a no-op)."""
        return cls(store, run, open_round(store, run, t))

    @classmethod
    def current(cls, store: EventStore, run: str) -> Round:
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

    def event(self, key: str, event: Event) -> EventIn:
        """``event`` of this round, under the id ``key`` gives it (the same on every retry)."""
        return _event(self.run, self.t, key, event)

    # --- the steps ------------------------------------------------------------------------------
    def requests(self, n: int, *, purpose: str = "curriculum", seed: int | None = None) -> list[Request]:
        """``n`` requests from the schedule of M_{t-1}; the same for the same (run, round, seed,
        purpose). ``purpose`` is ``curriculum`` (Q^cur) or ``challenger`` (Q^chal)."""
        if n < 0:
            raise ProtocolError(f"n must be at least 0, not {n}")
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
                    f"cannot record questions: promotions of round {t} are decided (the evidence is closed)"
                )
            stored.clear()  # read under the append lock: what this append skips
            stored.update(d["question_id"] for _s, _r, _t, d in read((QuestionGenerated,), round=t))
            return generated + scores

        _appending(self.store, run, decide)
        return Recorded(scored, stored & seen)

    def promote(self) -> list[dict[str, Any]]:
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
        return decided

    def record_failures(self, failures: Sequence[Mapping[str, Any]]) -> int:
        """Append ``failure.recorded`` for failed optimization responses of retained questions
        (``failure_id``, ``question_id``, ``response``, ``reference``, the last two non-empty);
        returns how many were new. Recording the same failure again in this round is a no-op; a
        failure id the run holds in another round, or here with other content, is refused
        (:class:`ProtocolError`) and nothing is stored."""
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

        def decide(read: Reader) -> Sequence[EventIn]:
            st = _state(run, read(MILESTONES), self.store.url)
            if t != st.last_committed + 1:
                raise ProtocolError(
                    f"round {t} is not open in run {run!r}: its last committed round is {st.last_committed}"
                )
            decided = {fid: None for ev in events if ev.type in _DIAGNOSES and (fid := ev.data.get("failure_id"))}
            refuse_reused_failures(self.store, run, t, decided)  # a failure is diagnosed once in a run
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
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight <= 0:
            raise ProtocolError(f"weight of rank {rank} must be a finite number above 0, not {weight!r}")
        ev = self.event(f"metrics/rank{rank}", MetricsRecorded(rank=rank, weight=float(weight), metrics=values))

        def decide(read: Reader) -> list[EventIn]:
            require_open(_state(run, read(MILESTONES), self.store.url), t, f"record the metrics of rank {rank}")
            for _s, _r, _t, d in read((MetricsRecorded,), round=t):
                if d["rank"] == rank and (d["metrics"], d["weight"]) != (ev.data["metrics"], ev.data["weight"]):
                    raise ProtocolError(f"rank {rank} recorded other metrics in round {t} of run {run!r} already")
            return [ev]

        return _appending(self.store, run, decide).appended == 1

    def note(self, key: str, event: Event) -> None:
        """Append a trainer's bookkeeping event (``phase.completed``, ``checkpoint.written`` ...)."""
        self.notes([self.event(key, event)])

    def notes(self, events: Sequence[EventIn]) -> None:
        """Append a trainer's bookkeeping events of this round in one transaction, while the
        round is open (decided under the append lock)."""
        run, t = self.run, self.t
        for ev in events:
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
        summary: Mapping[str, Any] | None = None,
        allow_undiagnosed: bool = False,
    ) -> dict[str, Any]:
        """Append ``eval.recorded`` (the metrics: those the ranks recorded with
        :meth:`record_metrics`, weighted, and ``metrics`` over them) and ``round.committed``: M_t
        is the memory here. The commit waits for no rank: the trainer's ranks meet first (a
        barrier of its own), and a rank's write after the commit is refused.
        Refused before promotions are decided and, unless ``allow_undiagnosed``, while a recorded
        failure has no diagnosis. Returns the commit's data (counts, F_t, ε_{t+1}, ``summary``)."""
        run, t, base = self.run, self.t, self.base
        metrics = check_metrics(metrics or {})
        committed: dict[str, Any] = {}

        def decide(read: Reader) -> list[EventIn]:
            st = _state(run, read(MILESTONES), self.store.url)
            require_open(st, t, "commit")
            if t not in st.promoted:
                raise ProtocolError(
                    f"cannot commit round {t}: its promotions are not decided", hint=self._hint("promote")
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
            after = fold(read(FOLDED, after_seq=base.last_seq), run, base)
            sched = schedule(after)
            # the round's statistics as `memory stats` counts them, and the schedule it leaves
            committed.update(count_rounds(rows).get(t, {}))
            ranks = [d for _s, _r, typ, d in rows if typ == MetricsRecorded.name]
            round_metrics = {**rank_metrics(ranks), **metrics}  # the caller's own, over the ranks'
            if ranks:
                committed["ranks"] = len(ranks)
            committed.update(F=sched.F, epsilon_next=sched.epsilon, **dict(summary or {}))
            events = [self.event("eval", EvalRecorded(**round_metrics))] if round_metrics else []
            return [*events, self.event(RoundCommitted.name, RoundCommitted(**committed))]

        try:
            _appending(self.store, run, decide)
        except InvariantError as exc:
            raise ProtocolError(f"cannot commit round {t}: {exc}") from None
        refresh(self.store, run)
        return committed

    def _hint(self, step: str) -> Hint:
        """The command that takes ``step`` for this round."""
        return Hint(("round", step, "--run", self.run, "--round", str(self.t)), self.store.url)


def rank_metrics(recorded: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The round's metrics from the ranks' ``metrics.recorded``: for each name, the mean over
    the ranks that report it, weighted by their weights."""
    sums: dict[str, float] = {}
    weights: dict[str, float] = {}
    for d in sorted(recorded, key=lambda d: d["rank"]):  # the same sum in every process
        for name, value in d["metrics"].items():
            sums[name] = sums.get(name, 0.0) + d["weight"] * value
            weights[name] = weights.get(name, 0.0) + d["weight"]
    return {name: sums[name] / weights[name] for name in sums}


def check_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The metrics of a commit: each named by a non-empty string, each a finite number
    (:class:`ProtocolError` naming the first that is not)."""
    if not isinstance(metrics, Mapping):
        raise ProtocolError(f"metrics must be a mapping of names to numbers, not {type(metrics).__name__}")
    out: dict[str, float] = {}
    for name, value in metrics.items():
        if not isinstance(name, str) or not name.strip():
            raise ProtocolError(f"metric name {name!r} must be a non-empty string")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProtocolError(f"metric {name!r} must be a number, not {value!r}"[:200])
        if not math.isfinite(value):
            raise ProtocolError(f"metric {name!r} must be a finite number, not {value!r}")
        out[name] = value
    return out


# --- the steps as functions of (store, run, round) -------------------------------------------
# Each builds a Round, so each reads the config and M_{t-1} afresh; a trainer that takes several
# steps of one round keeps a :class:`Round` instead.


def requests(
    store: EventStore, run: str, t: int, n: int, *, purpose: str = "curriculum", seed: int | None = None
) -> list[Request]:
    """:meth:`Round.requests` of round ``t``."""
    return Round(store, run, t).requests(n, purpose=purpose, seed=seed)


def record(store: EventStore, run: str, t: int, candidates: Sequence[Candidate]) -> Recorded:
    """:meth:`Round.record` of round ``t``."""
    return Round(store, run, t).record(candidates)


def promote(store: EventStore, run: str, t: int) -> list[dict[str, Any]]:
    """:meth:`Round.promote` of round ``t``."""
    return Round(store, run, t).promote()


def record_failures(store: EventStore, run: str, t: int, failures: Sequence[Mapping[str, Any]]) -> int:
    """:meth:`Round.record_failures` of round ``t``."""
    return Round(store, run, t).record_failures(failures)


def note(store: EventStore, run: str, t: int, key: str, event: Event) -> None:
    """:meth:`Round.note` of round ``t``."""
    Round(store, run, t).note(key, event)


def commit(
    store: EventStore,
    run: str,
    t: int,
    metrics: Mapping[str, float] | None = None,
    *,
    summary: Mapping[str, Any] | None = None,
    allow_undiagnosed: bool = False,
) -> dict[str, Any]:
    """:meth:`Round.commit` of round ``t``."""
    return Round(store, run, t).commit(metrics, summary=summary, allow_undiagnosed=allow_undiagnosed)
