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
5. :func:`record_failures` and :func:`diagnose` (or ``diagevo diagnose``): the failures;
6. :func:`commit`: ``round.committed`` with the trainer's metrics.

Every event id derives from (run, round, item), so any step can be retried. Each write checks
the round's state and appends in one transaction under the store's append lock, so several
processes may record into one round at once, and a step out of order (recording into a
committed round, promoting twice, committing with undiagnosed failures) raises
:class:`ProtocolError` and stores nothing.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from diagevo import aio
from diagevo import curriculum as cur
from diagevo.config import Config, DiagnosisConfig
from diagevo.diagnosis.index import VectorIndex
from diagevo.diagnosis.interface import Diagnostician, Embedder
from diagevo.diagnosis.pipeline import DiagnosisSummary, FailureInput, diagnose_round
from diagevo.errors import BadInput, Conflict, NotFound
from diagevo.events import keys
from diagevo.events.schemas import EventIn, InvalidEvent, new_event
from diagevo.events.store import CheckedReader, EventStore
from diagevo.memory.deciders import decide_promotions
from diagevo.memory.fold import InvariantError, fold
from diagevo.memory.state import Memory
from diagevo.memory.sampler import GenerationRequest, sample_requests
from diagevo.memory.schedule import schedule
from diagevo.paths import diagevo_command as command
from diagevo.progress import ProgressFn, no_progress
from diagevo.replay import FOLD_TYPES, load_memory, refresh_snapshots
from diagevo.words import plural

Row = tuple[int, int, str, dict[str, Any]]

# what the order checks read: the run's and rounds' milestones
_MILESTONES = ("run.started", "round.started", "round.committed", "promotions.decided")
PURPOSES = {"curriculum": ("cur-requests", "q"), "challenger": ("chal-requests", "c")}


class ProtocolError(Conflict, BadInput):
    """A round operation out of order or with input that does not fit the round."""


class UnknownRun(ProtocolError, NotFound):
    """A step for a run the log does not hold."""


def event_id(run: str, t: int, key: str) -> str:
    """The id of the event ``key`` of round ``t``: the same for every retry of a step."""
    return keys.event_id(run, t, key)


def _event(run: str, t: int, key: str, type: str, **data: Any) -> EventIn:
    return new_event(type, run, t, event_id(run, t, key), **data)


# --- the run and its rounds ------------------------------------------------------------------


def run_config(store: EventStore, run: str) -> Config:
    """The config recorded in the run's ``run.started`` (defaults for what it leaves out), with
    the latest ``run.configured`` applied: the one place the run's config is read from the log."""
    cfg = stored_config(store, run)
    if cfg is None:
        raise UnknownRun(f"no run {run!r}: start it first ({command(store.url, 'round', 'start', '--run', run)})")
    return cfg


def stored_config(store: EventStore, run: str) -> Config | None:
    """:func:`run_config`, or None for a run the log does not hold."""
    data: dict[str, Any] | None = None
    for e in store.read(run, types=("run.started", "run.configured")):
        data = dict(e.data["config"])
    if data is None:
        return None
    k = data.pop("k", None)
    data.pop("db", None)
    if isinstance(data.get("diagnosis"), dict):
        data["diagnosis"] = {key: v for key, v in data["diagnosis"].items() if key != "api_key"}
    try:
        cfg = Config.model_validate(data)
    except ValueError as exc:  # pydantic's ValidationError: a log written by another version
        raise BadInput(f"the config stored for run {run!r} does not validate: {str(exc).splitlines()[0]}") from None
    if k is not None and k != cfg.memory.k:
        cfg = cfg.model_copy(update={"memory": cfg.memory.model_copy(update={"k": float(k)})})
    return cfg


def config_record(config: Config | Mapping[str, Any]) -> dict[str, Any]:
    """The config as ``run.started`` stores it: redacted, with ``k`` at the top."""
    if isinstance(config, Config):
        return config.redacted() | {"k": config.memory.k}
    data = dict(config)
    if "k" not in data:
        memory = data.get("memory")
        if isinstance(memory, Mapping) and "k" in memory:
            data["k"] = memory["k"]
    return data


def start_run(store: EventStore, run: str, config: Config | Mapping[str, Any], seed: int = 0) -> bool:
    """Append ``run.started``; False (and nothing stored) when the run exists already."""
    try:
        ev = new_event("run.started", run, 0, event_id(run, 0, "run.started"), config=config_record(config), seed=seed)
    except InvalidEvent as exc:
        raise ProtocolError(str(exc)) from None
    return store.append([ev]).appended == 1


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


def _state(run: str, rows: Iterable[Row], db: str = "") -> RoundState:
    last, started, promoted, seed, exists = 0, set(), set(), 0, False
    for _seq, rnd, typ, data in rows:
        if typ == "run.started":
            exists, seed = True, int(data.get("seed", 0))
        elif typ == "round.started":
            started.add(rnd)
        elif typ == "round.committed":
            last = max(last, rnd)
        elif typ == "promotions.decided":
            promoted.add(rnd)
    if not exists:
        raise UnknownRun(f"no run {run!r}: start it first ({command(db, 'round', 'start', '--run', run)})")
    return RoundState(run, last, frozenset(started), frozenset(promoted), seed, db)


def round_state(store: EventStore, run: str) -> RoundState:
    return _state(run, store.iter_rows(run, types=_MILESTONES), store.url)


def _require_open(st: RoundState, t: int, doing: str) -> None:
    if t <= st.last_committed:
        raise ProtocolError(f"cannot {doing}: round {t} of run {st.run!r} is committed")
    if t != st.last_committed + 1:
        raise ProtocolError(f"cannot {doing}: round {t} is not next in run {st.run!r} (last committed: {st.last_committed})")
    if t not in st.started:
        raise ProtocolError(f"cannot {doing}: round {t} of run {st.run!r} is not open ({command(st.db, 'round', 'start', '--run', st.run)})")


def current_round(store: EventStore, run: str) -> int:
    """The run's open round."""
    st = round_state(store, run)
    if st.open_round is None:
        raise ProtocolError(
            f"run {run!r} has no open round (last committed: {st.last_committed}); open one first ({command(store.url, 'round', 'start', '--run', run)})"
        )
    return st.open_round


def open_round(store: EventStore, run: str, t: int | None = None) -> int:
    """Append ``round.started`` for the next round (``t`` defaults to it); opening the open
    round again is a no-op. Returns the round."""
    chosen: list[int] = []

    def decide(read: CheckedReader) -> list[EventIn]:
        st = _state(run, read(_MILESTONES), store.url)
        nxt = st.last_committed + 1
        want = nxt if t is None else t
        if want <= st.last_committed:
            raise ProtocolError(f"round {want} of run {run!r} is committed already")
        if want != nxt:
            raise ProtocolError(f"round {want} cannot open in run {run!r}: round {nxt} comes first")
        chosen.append(want)
        return [] if want in st.started else [_event(run, want, "round.started", "round.started")]

    store.append_checked(run, decide)
    return chosen[0]


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
            if value is not None and (not isinstance(value, list) or not all(x is None or isinstance(x, str) for x in value)):
                raise ProtocolError(f"{name} must be a list of strings")
        return cls(
            question_id=obj["question_id"], mode=obj["mode"], text=str(text),
            active_cause=obj.get("active_cause"), mastered_cause=obj.get("mastered_cause"), node=obj.get("node"),
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


def score(c: Candidate, cfg: Config) -> Scored:
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
    return Scored(c.question_id, c.text, c.mode, c.active_cause, c.mastered_cause, len(answers), v.p1, v.p2,
                  v.label, retained, reference)


# --- failures --------------------------------------------------------------------------------


def failure_inputs(store: EventStore, run: str, t: int) -> list[FailureInput]:
    """The round's recorded failures, with their questions, as diagnosis inputs."""
    questions: dict[str, dict[str, Any]] = {}
    labels: dict[str, str] = {}
    failures: dict[str, dict[str, Any]] = {}
    types = ("question.generated", "question.scored", "failure.recorded")
    for e in store.read(run, types=types, round=t, texts=True):  # the round's events only (indexed)
        if e.type == "question.generated":
            questions[e.data["question_id"]] = e.data
        elif e.type == "question.scored":
            labels[e.data["question_id"]] = e.data["pseudo_label"] or ""
        else:
            failures[e.data["failure_id"]] = e.data
    out = []
    for fid, f in sorted(failures.items()):
        q = questions[f["question_id"]]
        known = tuple(c for c in (q["active_cause"], q["mastered_cause"]) if c is not None)
        out.append(FailureInput(
            failure_id=fid, question_id=q["question_id"], question=q["text"], pseudo_label=labels[q["question_id"]],
            response=f["response"], reference=f["reference"], known_causes=known,
        ))
    return out


# --- one round -------------------------------------------------------------------------------


class Round:
    """Round ``t`` of a run, the unit a trainer works in: the run's config and M_{t-1} are read
    from the log once, on first use, and every step of the round reuses them.

    The steps, in order: :meth:`requests` (any number of times), :meth:`record`, :meth:`promote`,
    :meth:`record_failures`, :meth:`diagnose`, :meth:`commit`; :meth:`note` for the trainer's
    own bookkeeping. Each write re-checks the round's milestones under the store's append lock."""

    def __init__(self, store: EventStore, run: str, t: int) -> None:
        self.store, self.run, self.t = store, run, t
        self._config: Config | None = None
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
    def config(self) -> Config:
        """The run's config as it stands for this round (``run.configured`` before it applied)."""
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

    def event(self, key: str, type: str, **data: Any) -> EventIn:
        return _event(self.run, self.t, key, type, **data)

    # --- the steps ------------------------------------------------------------------------------
    def requests(self, n: int, *, purpose: str = "curriculum", seed: int | None = None) -> list[Request]:
        """``n`` requests from the schedule of M_{t-1}; the same for the same (run, round, seed,
        purpose). ``purpose`` is ``curriculum`` (Q^cur) or ``challenger`` (Q^chal)."""
        if n < 0:
            raise ProtocolError(f"n must be at least 0, not {n}")
        if purpose not in PURPOSES:
            raise ProtocolError(f"purpose must be one of {', '.join(PURPOSES)}, not {purpose!r}")
        st = round_state(self.store, self.run)
        _require_open(st, self.t, "draw requests")
        cfg, memory, t = self.config.memory, self.base, self.t
        phase, prefix = PURPOSES[purpose]
        rng = random.Random(f"{st.seed if seed is None else seed}/{t}/{phase}")
        drawn = sample_requests(
            memory, schedule(memory), n, rng,
            generation=cfg.generation, fixed_free_ratio=cfg.fixed_free_ratio, stitching=cfg.stitching,
        )
        return [Request(question_id=f"{prefix}{t}-{i:05d}", **asdict(r)) for i, r in enumerate(drawn)]

    def record(self, candidates: Sequence[Candidate]) -> list[Scored]:
        """Vote, filter and append ``question.generated`` + ``question.scored`` for each candidate
        (one transaction); returns them scored. Recording a question id again is a no-op."""
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
                generated.append(self.event(
                    f"gen/{c.question_id}", "question.generated", question_id=c.question_id, mode=c.mode,
                    active_cause=c.active_cause, mastered_cause=c.mastered_cause, node=c.node, text=c.text,
                ))
            except InvalidEvent as exc:
                raise ProtocolError(f"question {c.question_id}: {exc}") from None
            scores.append(self.event(
                f"score/{c.question_id}", "question.scored", question_id=c.question_id, n=s.n, p1=s.p1,
                p2=s.p2, pseudo_label=s.pseudo_label, retained=s.retained, reference=s.reference,
            ))
            scored.append(s)

        def decide(read: CheckedReader) -> list[EventIn]:
            st = _state(run, read(_MILESTONES), self.store.url)
            _require_open(st, t, "record questions")
            if t in st.promoted:
                raise ProtocolError(f"cannot record questions: promotions of round {t} are decided (the evidence is closed)")
            return generated + scores

        self.store.append_checked(run, decide)
        return scored

    def promote(self) -> list[dict[str, Any]]:
        """Decide Eq. 5-6 once, from every candidate recorded in the round against M_{t-1};
        appends the promotions and ``promotions.decided``. Returns the promotions."""
        run, t, cfg, memory = self.run, self.t, self.config.memory, self.base
        decided: list[dict[str, Any]] = []

        def decide(read: CheckedReader) -> list[EventIn]:
            st = _state(run, read(_MILESTONES), self.store.url)
            _require_open(st, t, "decide promotions")
            if t in st.promoted:
                raise ProtocolError(f"promotions of round {t} in run {run!r} are decided already")
            active: dict[str, str | None] = {}
            p1: dict[str, float] = {}
            for _seq, _rnd, typ, data in read(("question.generated", "question.scored"), round=t):
                if typ == "question.generated":
                    active[data["question_id"]] = data["active_cause"]
                elif typ == "question.scored":
                    p1[data["question_id"]] = data["p1"]
            evidence = [(active[q], p1[q]) for q in active if q in p1]
            changes = decide_promotions(memory, evidence, cfg.theta_up, enabled=cfg.state_updates)
            decided.extend(d for _, d in changes)
            events = [self.event(f"promote/{d['cause_id']}", typ, **d) for typ, d in changes]
            events.append(self.event("promotions", "promotions.decided",
                                     promoted=[d["cause_id"] for d in decided], candidates=len(evidence)))
            return events

        self.store.append_checked(run, decide)
        return decided

    def record_failures(self, failures: Sequence[Mapping[str, Any]]) -> int:
        """Append ``failure.recorded`` for failed optimization responses of retained questions
        (``failure_id``, ``question_id``, ``response``, ``reference``); returns how many were new."""
        run, t = self.run, self.t
        events = []
        for f in failures:
            try:
                events.append(self.event(f"fail/{f['failure_id']}", "failure.recorded", **f))
            except (InvalidEvent, KeyError, TypeError) as exc:
                raise ProtocolError(f"failure: {exc}") from None
        wanted = {e.data["question_id"] for e in events}

        def decide(read: CheckedReader) -> list[EventIn]:
            st = _state(run, read(_MILESTONES), self.store.url)
            _require_open(st, t, "record failures")
            retained = {d["question_id"] for _s, _r, _t, d in read(("question.scored",), round=t) if d["retained"]}
            missing = sorted(wanted - retained)
            if missing:
                raise ProtocolError(f"question {missing[0]} is not a retained question of round {t}")
            return events

        return self.store.append_checked(run, decide).appended

    def memory(self) -> Memory:
        """The memory now: M_{t-1} and what the round has appended so far (folded from M_{t-1})."""
        return load_memory(self.store, self.run, since=self.base)

    def diagnose(
        self,
        *,
        diagnostician: Diagnostician,
        embedder: Embedder,
        cfg: DiagnosisConfig | None = None,
        index: VectorIndex | None = None,
        failures: Sequence[FailureInput] | None = None,
        progress: ProgressFn = no_progress,
    ) -> DiagnosisSummary:
        """Diagnose failures with the pipeline of Sec. 2.3 (``cfg`` defaults to the run's
        diagnosis config): the round's recorded failures, or ``failures`` given by a trainer
        that records nothing else (``diagevo diagnose FILE``; the round need not be opened then,
        only be the next one)."""
        st = round_state(self.store, self.run)
        if failures is None:
            _require_open(st, self.t, "diagnose")
            failures = failure_inputs(self.store, self.run, self.t)
        elif self.t != st.last_committed + 1:
            raise ProtocolError(
                f"round {self.t} is not open in run {self.run!r}: its last committed round is {st.last_committed}"
            )
        return aio.run(diagnose_round(
            store=self.store, run=self.run, round=self.t, failures=failures, diagnostician=diagnostician,
            embedder=embedder, cfg=cfg if cfg is not None else self.config.diagnosis, index=index,
            progress=progress, memory=self.memory(),
        ))

    def note(self, key: str, type: str, **data: Any) -> None:
        """Append a trainer's bookkeeping event (``phase.completed``, ``checkpoint.written`` ...)."""
        self.store.append([self.event(key, type, **data)])

    def commit(
        self,
        metrics: Mapping[str, float] | None = None,
        *,
        summary: Mapping[str, Any] | None = None,
        allow_undiagnosed: bool = False,
    ) -> dict[str, Any]:
        """Append ``eval.recorded`` (the metrics) and ``round.committed``: M_t is the memory here.
        Refused before promotions are decided and, unless ``allow_undiagnosed``, while a recorded
        failure has no diagnosis. Returns the commit's data (counts, F_t, ε_{t+1}, ``summary``)."""
        run, t, base = self.run, self.t, self.base
        committed: dict[str, Any] = {}

        def decide(read: CheckedReader) -> list[EventIn]:
            st = _state(run, read(_MILESTONES), self.store.url)
            _require_open(st, t, "commit")
            if t not in st.promoted:
                raise ProtocolError(f"cannot commit round {t}: its promotions are not decided ({self._hint('promote')})")
            questions = retained = 0
            failures: set[str] = set()
            diagnosed: set[str] = set()
            for _s, _r, typ, d in read(("question.scored", "failure.recorded", "failure.diagnosed", "diagnosis.failed"), round=t):
                if typ == "question.scored":
                    questions += 1
                    retained += bool(d["retained"])
                elif typ == "failure.recorded":
                    failures.add(d["failure_id"])
                elif typ in ("failure.diagnosed", "diagnosis.failed") and d.get("failure_id"):
                    diagnosed.add(d["failure_id"])
            pending = sorted(failures - diagnosed)
            if pending and not allow_undiagnosed:
                raise ProtocolError(
                    f"cannot commit round {t}: {plural(len(pending), 'recorded failure')} "
                    f"{'is' if len(pending) == 1 else 'are'} not diagnosed "
                    f"(first: {pending[0]}); diagnose them or allow undiagnosed failures"
                )
            after = fold(read(FOLD_TYPES, after_seq=base.last_seq), run, base)
            sched = schedule(after)
            committed.update(
                questions=questions, retained=retained, failures=len(failures), F=sched.F,
                epsilon_next=sched.epsilon, **dict(summary or {}),
            )
            events = [self.event("eval", "eval.recorded", **metrics)] if metrics else []
            return [*events, self.event("round.committed", "round.committed", **committed)]

        try:
            self.store.append_checked(run, decide)
        except InvariantError as exc:
            raise ProtocolError(f"cannot commit round {t}: {exc}") from None
        refresh_snapshots(self.store, run)
        return committed

    def _hint(self, step: str) -> str:
        """The command that takes ``step`` for this round (the database without its password)."""
        return command(self.store.url, "round", step, "--run", self.run, "--round", str(self.t))


# --- the steps as functions of (store, run, round) -------------------------------------------
# Each builds a Round, so each reads the config and M_{t-1} afresh; a trainer that takes several
# steps of one round keeps a :class:`Round` instead.


def requests(
    store: EventStore, run: str, t: int, n: int, *, purpose: str = "curriculum", seed: int | None = None
) -> list[Request]:
    """:meth:`Round.requests` of round ``t``."""
    return Round(store, run, t).requests(n, purpose=purpose, seed=seed)


def record(store: EventStore, run: str, t: int, candidates: Sequence[Candidate]) -> list[Scored]:
    """:meth:`Round.record` of round ``t``."""
    return Round(store, run, t).record(candidates)


def promote(store: EventStore, run: str, t: int) -> list[dict[str, Any]]:
    """:meth:`Round.promote` of round ``t``."""
    return Round(store, run, t).promote()


def record_failures(store: EventStore, run: str, t: int, failures: Sequence[Mapping[str, Any]]) -> int:
    """:meth:`Round.record_failures` of round ``t``."""
    return Round(store, run, t).record_failures(failures)


def note(store: EventStore, run: str, t: int, key: str, type: str, **data: Any) -> None:
    """:meth:`Round.note` of round ``t``."""
    Round(store, run, t).note(key, type, **data)


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

