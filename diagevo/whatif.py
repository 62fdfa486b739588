"""What-ifs: the memory re-decided on a run's recorded evidence under other settings.

A what-if copies a run's log through its last committed round into a derived run and decides
again what needs no model call: the promotions of Eq. 5-6 (from the recorded questions' targets
and p1), the reactivations of Eq. 7 (on the recorded attributions), and so F_t, ε_{t+1} and the
schedule p of every round, or none of them under the "no state updates" ablation. Everything
the models produced (questions, votes, failures, diagnoses, new causes and nodes, merges) is
copied as recorded. Later rounds' evidence was produced under the recorded schedule, so a
what-if cannot change which questions were asked, only what the memory decided about them.

The derived run ends with ``run.forked`` naming its source, the source's last commit and, in
its ``whatif`` field, the settings changed: the fork machinery's provenance, so every read
command, ``memory diff`` (causes matched by the event that created them) and ``report
--compare`` read it like any run.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from diagevo.catalog import (
    COUNTED,
    CausePromoted,
    CauseReactivated,
    Event,
    FailureAttributed,
    PromotionsDecided,
    QuestionScored,
    RoundCommitted,
    RunConfigured,
    RunForked,
    RunStarted,
)
from diagevo.catalog.ids import event_id, rebase_event_id
from diagevo.config.sections import MemoryConfig, config_from_record
from diagevo.errors import BadInput, NotFound
from diagevo.interchange import copied_or_left
from diagevo.log import EventReader, Recorder, StoredEvent
from diagevo.memory.deciders import DecisionError, decide_attribution, decide_promotions, promotion_evidence
from diagevo.memory.fold import Folding, InvariantError
from diagevo.memory.forks import WHATIF_SETTINGS, whatif_config
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.results.runs import LeftBehind
from diagevo.schemas import EventIn, new_event
from diagevo.text.calls import validated
from diagevo.text.parsing import quoted
from diagevo.text.words import close_to, did_you_mean, you_mean
from diagevo.views.admission import admission
from diagevo.views.caches import refresh as refresh_snapshots
from diagevo.views.memory import commit_memories, committed_rounds
from diagevo.views.stats import count_rounds

MEANING = (
    "a what-if re-decides the memory (promotions, reactivations, F_t, ε, the schedule p) on the run's "
    "recorded evidence: later rounds' questions were asked under the recorded schedule, so they do not "
    "change, only the memory's decisions on them"
)
"""What a what-if is, in one sentence: every output of a what-if says it."""

SETTINGS = WHATIF_SETTINGS
"""The settings a what-if can change: those of the deciders that call no model."""

MOST_WHATIFS = 100
"""The most derived runs one sweep writes: the combinations are counted before any is built, and
a sweep asking for more is refused with nothing written (``k=`` with a thousand values times
three others is a typo, not a study)."""

_WHY_NOT = {
    "memory.generation": "it changes which questions are asked",
    "memory.fixed_free_ratio": "it changes which questions are asked",
    "memory.stitching": "it changes which questions are asked",
    "memory.challenger_updates": "it changes how the challenger is trained",
    "grpo.construction_responses": "N changes the votes, so the pseudo-labels and p1",
    "filter": "it changes which questions are retained, so which failures are recorded",
    "diagnosis": "it changes what the diagnostician decides",
    "reward": "it changes how the challenger is trained",
    "grpo": "it changes how the models are trained",
    "challenger": "it changes how the challenger is trained",
    "solver": "it changes how the solver is trained",
    "train": "it changes the training run",
}


class WhatIfError(BadInput):
    """A what-if that cannot be made as asked (a setting it cannot change, a run it cannot read)."""


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    """One committed round of a run as the memory ended it: M_t's sizes and the schedule it leaves."""

    round: int
    active: int
    mastered: int
    F: int
    epsilon_next: float
    promotions: int
    reactivations: int


@dataclass(frozen=True, slots=True)
class WhatIf:
    """One derived run: its source, the settings changed and its rounds."""

    run: str
    source: str
    settings: dict[str, Any]
    source_round: int
    source_hash: str
    events: int
    created: bool  # False: the same what-if was in the database already
    rounds: list[RoundOutcome] = field(default_factory=list)
    left_behind: tuple[LeftBehind, ...] = ()  # the source's rows it was made without (beyond the refused)


@dataclass(frozen=True, slots=True)
class Sweep:
    """The recorded run's rounds and one what-if per combination of the values asked."""

    source: str
    recorded: list[RoundOutcome]
    whatifs: list[WhatIf]
    meaning: str = MEANING


def _why_not(key: str) -> str:
    """Why a what-if cannot change ``key``: what its effect needs, else (a typo) the setting it most likely means."""
    why = _WHY_NOT.get(key) or _WHY_NOT.get(key.partition(".")[0])
    if why:
        return f"{why}, which needs new model calls"
    near = close_to(key, SETTINGS, n=1)
    return f"no such setting{you_mean([repr(s) for s in near])}" if near else "its effect needs new model calls"


def parse_settings(sets: Sequence[str]) -> list[dict[str, str]]:
    """``section.field=v1,v2`` items as the combinations they ask for (one dict of key -> value
    text per derived run, every combination of the values given, in order). A setting whose
    effect needs new model calls or evidence is refused, saying why; so are more combinations
    than :data:`MOST_WHATIFS`, counted before any is built."""
    axes: dict[str, list[str]] = {}
    for item in sets:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise WhatIfError(f"setting {item[:80]!r} is not of the form section.field=value")
        if key not in SETTINGS:
            raise WhatIfError(
                f"a what-if cannot change {key[:80]}: {_why_not(key)}; it changes "
                f"{', '.join(SETTINGS)} only (fork the run and train on for the rest)"
            )
        if key in axes:
            raise WhatIfError(f"{key} is set twice: give its values once, separated by commas")
        axes[key] = [v.strip() for v in values.split(",")]
        if any(not v for v in axes[key]):
            raise WhatIfError(f"setting {item[:80]!r} has an empty value")
    count = math.prod(len(v) for v in axes.values())
    if count > MOST_WHATIFS:
        shown = " x ".join(f"{len(v):,}" for v in axes.values())
        raise WhatIfError(
            f"{shown} values ask for {count:,} what-ifs, more than the {MOST_WHATIFS} one sweep writes: "
            "ask for fewer values (nothing was written)"
        )
    keys = list(axes)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))]


def _with_settings(record: Mapping[str, Any], settings: Mapping[str, str]) -> dict[str, Any]:
    """A stored config record with ``settings`` applied, checked as the method's config (what
    a reader of the what-if's marker expects its config records to hold: :func:`whatif_config`)."""
    return whatif_config(record, settings)


def default_name(source: str, settings: Mapping[str, str]) -> str:
    """The derived run's id when none is given: the source's and the settings'."""
    return f"{source}~" + ",".join(f"{k.rpartition('.')[2]}={v}" for k, v in settings.items())


@dataclass
class _Deriving:
    """The state of one pass over the source's log: the what-if memory and the events so far."""

    store: EventReader  # the source's, where what the copy passes over is named
    source: str
    new: str
    settings: Mapping[str, str]
    folding: Folding | None = None  # the what-if's memory, through the fold's one loop (from its run.started)
    base: Memory | None = None  # M'_{t-1}: what the round's promotions are decided against
    method: MemoryConfig = field(default_factory=MemoryConfig)
    # (type, round, cause, failure) -> the id of the source's decision
    recorded_ids: dict[tuple[type[Event], int, str, str], str] = field(default_factory=dict)
    rows: list[StoredEvent] = field(default_factory=list)  # the round's so far
    # round -> the seq before which its promotions are decided, where the source has no
    # promotions.decided to mark the step (a log written before it existed, or by a trainer without it)
    unmarked: dict[int, int] = field(default_factory=dict)
    out: list[EventIn] = field(default_factory=list)
    left: list[LeftBehind] = field(default_factory=list)  # the source's rows the what-if is made without

    def copy(self, e: StoredEvent, **changed: Any) -> None:
        """A source event copied at its stored version, ``changed`` fields replaced (one its class
        refuses is left behind, said in ``left``)."""
        copied = copied_or_left(e, self.source, self.new, **changed)
        if isinstance(copied, LeftBehind):
            self.left.append(copied)
        else:
            self._add(copied)

    def _add(self, ev: EventIn) -> None:
        event = ev.event
        if isinstance(event, RunStarted):
            self.folding = Folding(self.new)
        if self.folding is not None:
            refusal, _ = self.folding.take(StoredEvent.of(0, ev.round, event))
            if refusal is not None:  # the source's admitted rows, re-decided: a refusal is this what-if's own
                raise InvariantError(f"{ev.type} of round {ev.round}: {refusal.why}")
        if isinstance(event, RoundCommitted):
            self.base, self.rows = self.memory(), []
        else:
            self.rows.append(StoredEvent.of(0, ev.round, event))
        self.out.append(ev)

    def memory(self) -> Memory:
        if self.folding is None or self.folding.draft is None:
            raise WhatIfError(f"run {self.source!r} does not begin with {RunStarted.name}")
        return self.folding.draft.freeze()

    def decided(self, event: CausePromoted | CauseReactivated, rnd: int) -> None:
        """A re-decided memory event: the recorded event's id when the source decided the same."""
        _, _, cause, failure = decision = _decision(event, rnd)
        recorded = self.recorded_ids.get(decision)
        key = f"promote/{cause}" if isinstance(event, CausePromoted) else f"whatif/reactivate/{cause}/{failure}"
        eid = rebase_event_id(recorded, self.source, self.new) if recorded else event_id(self.new, rnd, key)
        self._add(new_event(event, run=self.new, at_round=rnd, event_id=eid))

    def take(self, e: StoredEvent) -> None:
        """One source event: copied, re-decided, or dropped (the source's own decisions); one the
        fold refuses (a round out of order, a decision its memory does not allow) is left behind,
        said in ``left``, and the what-if is made without it."""
        try:
            self._take(e)
        except (InvariantError, DecisionError) as exc:  # the fold's refusal, or the deciders'
            self.left.append(LeftBehind(e.seq, str(exc)))

    def _take(self, e: StoredEvent) -> None:
        ev = e.event
        if self.unmarked.get(e.round) == e.seq:
            self._promote(e.round)
        if isinstance(ev, RunStarted | RunConfigured):
            config = _with_settings(ev.config, self.settings) if self.settings else ev.config
            self.method = config_from_record(config).memory
            if self.settings:  # with none, the record is copied as it was written
                self.copy(e, config=config)
                return
        if isinstance(ev, CausePromoted | CauseReactivated | RunForked):
            return  # decided again below; a source's own fork provenance is replaced by the what-if's
        if isinstance(ev, PromotionsDecided):
            self._promote(e.round, e)
        elif isinstance(ev, FailureAttributed):
            for change in decide_attribution(self.memory(), ev.failure_id, ev.cause_id, ev.via, ev.similarity):
                if isinstance(change, CauseReactivated):
                    self.decided(change, e.round)
                else:
                    self.copy(e)
        elif isinstance(ev, RoundCommitted):
            self.copy(e, **self._commit(e.round, ev))
        else:
            self.copy(e)

    def _promote(self, rnd: int, marked: StoredEvent | None = None) -> None:
        """Eq. 5-6 on the round's questions so far, and the ``promotions.decided`` that marked the
        step in the source (``marked``; none where the source had none)."""
        base = self.base if self.base is not None else self.memory()
        evidence = promotion_evidence(self.rows)
        promoted = decide_promotions(base, evidence, self.method.theta_up, enabled=self.method.state_updates)
        for change in promoted:
            self.decided(change, rnd)
        if marked is not None:
            self.copy(marked, promoted=[c.cause_id for c in promoted])

    def _commit(self, rnd: int, committed: RoundCommitted) -> dict[str, Any]:
        """The commit's summary as the round protocol writes it, counted and scheduled again: the
        counts the recorded commit holds, F and epsilon."""
        counts = count_rounds(self.rows).get(rnd, dict.fromkeys(COUNTED.values(), 0))
        sched = schedule(self.memory())
        held = committed.model_fields_set
        return {**{k: v for k, v in counts.items() if k in held}, "F": sched.F, "epsilon_next": sched.epsilon}


def _decision(event: CausePromoted | CauseReactivated, rnd: int) -> tuple[type[Event], int, str, str]:
    """What makes a re-decided event the source's own decision: its type, round, cause and failure."""
    failure = event.failure_id if isinstance(event, CauseReactivated) else ""
    return type(event), rnd, event.cause_id, str(failure)


def _unmarked_promotions(rows: Iterable[StoredEvent]) -> dict[int, int]:
    """For each round without ``promotions.decided``: the seq before which the round protocol
    decides its promotions, where the source promoted (its first ``cause.promoted``), else the
    round's first event after its last scored question (its questions all recorded)."""
    marked: set[int] = set()
    first_promoted: dict[int, int] = {}
    after_scored: dict[int, int | None] = {}
    for row in rows:
        seq, rnd, etype = row.seq, row.round, row.type
        if etype == PromotionsDecided.name:
            marked.add(rnd)
        elif etype == CausePromoted.name:
            first_promoted.setdefault(rnd, seq)
        elif etype == QuestionScored.name:
            after_scored[rnd] = None
        elif rnd in after_scored and after_scored[rnd] is None:
            after_scored[rnd] = seq
    points = {rnd: seq for rnd, seq in after_scored.items() if seq is not None}
    points.update(first_promoted)
    return {rnd: seq for rnd, seq in points.items() if rnd not in marked}


def _existing(store: Recorder, new: str, source: str, settings: Mapping[str, str], source_hash: str) -> WhatIf | None:
    """The what-if ``new`` when it is this one already (same source, head and settings)."""
    marker = next(store.read(new, types=(RunForked,), newest=True, limit=1), None)
    fork = marker.event if marker is not None else None
    if marker is None or not isinstance(fork, RunForked) or not isinstance(fork.whatif, Mapping):
        return None
    if (fork.source_run, fork.source_hash, fork.whatif.get("settings")) != (source, source_hash, dict(settings)):
        return None
    return WhatIf(new, source, dict(settings), marker.round, source_hash, store.last_seq(new), False)


@dataclass(frozen=True, slots=True)
class _Plan:
    """A what-if checked against the log before anything is written: the derived run's name,
    the settings, the source's last commit, and the what-if already there under that name."""

    new: str
    settings: dict[str, str]
    commit: StoredEvent
    existing: WhatIf | None


def _plan(store: Recorder, source: str, settings: Mapping[str, str], new: str | None) -> _Plan:
    """Check a what-if of ``source`` under ``settings`` as run ``new`` without writing: the
    settings against the source's config, the name against the runs the log holds."""
    checked_settings = _one_combination(settings)
    new = new or default_name(source, checked_settings)
    if not new.strip():
        raise WhatIfError("the derived run needs a name")
    if not store.has_run(source):
        raise NotFound(f"no run {source!r} in the database{did_you_mean(source, store.runs())}")
    done = committed_rounds(store, source)
    if not done:
        raise WhatIfError(f"run {source!r} has no committed round: a what-if needs one")
    commit = next(e for e in store.read(source, types=(RoundCommitted,), in_round=done[-1]))
    if checked_settings:  # a value the config refuses is refused here, before any what-if is written
        configs = store.read(source, types=(RunStarted, RunConfigured), upto_seq=commit.seq)
        for e in admission(store, source).admitted(configs):
            if isinstance(c := e.event, RunStarted | RunConfigured):
                _with_settings(c.config, checked_settings)
    existing = None
    if store.has_run(new):
        existing = _existing(store, new, source, checked_settings, commit.hash)
        if existing is None:
            raise WhatIfError(f"run {new!r} exists already: pick a new name")
    return _Plan(new, checked_settings, commit, existing)


def _one_combination(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` checked as one what-if: a value that lists several (``"1,2"``, a sweep's
    spelling) is refused naming the field, since one call writes one derived run."""
    combos = parse_settings([f"{k}={v}" for k, v in settings.items()]) or [{}]
    if len(combos) > 1:
        key, value = next((k, v) for k, v in settings.items() if "," in str(v))
        raise WhatIfError(
            f"{key}={quoted(value, 40)} asks for {len(combos)} what-ifs: what_if writes one (give one value a field, "
            "and call it once for each value of a sweep)"
        )
    return combos[0]


@validated
def what_if(store: Recorder, source: str, settings: Mapping[str, str], new: str | None = None) -> WhatIf:
    """Write the what-if of ``source`` under ``settings`` (key -> value text; the keys
    ``memory.k``, ``memory.theta_up``, ``memory.state_updates``) as run ``new`` (default
    ``SOURCE~field=value``); with no setting, the copy that must reproduce the recorded memory
    exactly. Writing the same what-if again is a no-op, also when another process writes it at
    the same time (the one that comes second finds it there: ``created`` False)."""
    return _write(store, source, _plan(store, source, settings, new))


def _write(store: Recorder, source: str, plan: _Plan) -> WhatIf:
    if plan.existing is not None:
        return _with_rounds(store, plan.existing)
    new, checked_settings, commit = plan.new, plan.settings, plan.commit
    state = _Deriving(store, source, new, checked_settings)
    for e in store.read(source, types=(CausePromoted, CauseReactivated)):
        if isinstance(decided := e.event, CausePromoted | CauseReactivated):
            state.recorded_ids[_decision(decided, e.round)] = e.event_id
    state.unmarked = _unmarked_promotions(store.rows(source, upto_seq=commit.seq, data=False))
    # the rows the rules refuse stay behind (a config no reader can use: the one before it in force)
    for e in admission(store, source).admitted(store.read(source, upto_seq=commit.seq, texts=True)):
        state.take(e)
    forked = RunForked(
        source_run=source,
        source_round=commit.round,
        source_hash=commit.hash,
        source_seq=commit.seq,
        whatif={"settings": dict(checked_settings), "meaning": MEANING},
    )
    state.out.append(
        new_event(forked, run=new, at_round=commit.round, event_id=event_id(new, commit.round, RunForked.name))
    )

    def existing() -> WhatIf:
        there = _existing(store, new, source, checked_settings, commit.hash)
        if there is None:
            raise WhatIfError(f"run {new!r} exists already: pick a new name")
        return there

    # the events are a function of the source's log through one commit, which no later append
    # changes; under the append lock only the new run's absence is left to decide
    def decide() -> list[EventIn]:  # the derived run is created once, under the append lock
        if store.has_run(new):  # written meanwhile: the same what-if (another process's), or a run in the way
            existing()
            return []
        return state.out

    if not store.append_decided(decide).events:  # the same what-if stood there already: it is the answer
        return _with_rounds(store, existing())
    refresh_snapshots(store, new)
    events, left = len(state.out), tuple(state.left)
    made = WhatIf(new, source, dict(checked_settings), commit.round, commit.hash, events, True, left_behind=left)
    return _with_rounds(store, made)


def _with_rounds(store: Recorder, made: WhatIf) -> WhatIf:
    return replace(made, rounds=outcomes(store, made.run))


def outcomes(store: Recorder, run: str) -> list[RoundOutcome]:
    """Every committed round of ``run`` as the memory ended it (folded; the commits' counts)."""
    counts = {
        e.round: (c.promotions or 0, c.reactivations or 0)
        for e in store.rows(run, types=(RoundCommitted,))
        if isinstance(c := e.event, RoundCommitted)
    }
    out = []
    for m in commit_memories(store, run):
        s = schedule(m)
        promoted, reactivated = counts.get(m.committed, (0, 0))
        out.append(RoundOutcome(m.committed, len(m.active()), len(m.mastered()), s.F, s.epsilon, promoted, reactivated))
    return out


def what_if_sweep(store: Recorder, source: str, sets: Sequence[str], names: Sequence[str] = ()) -> Sweep:
    """One what-if per combination of the values in ``sets`` (``section.field=v1,v2,...``);
    ``names`` names the derived runs in that order (default ``SOURCE~field=value``). Every
    combination is counted (at most :data:`MOST_WHATIFS`) and checked, its values and its name,
    before the first is written: a refused sweep writes nothing."""
    combos = parse_settings(sets) or [{}]
    if names and len(names) != len(combos):
        raise WhatIfError(f"{len(names)} names for {len(combos)} what-ifs: give one name per combination")
    plans = [_plan(store, source, combo, names[i] if names else None) for i, combo in enumerate(combos)]
    twice = next((p.new for i, p in enumerate(plans) if p.new in {q.new for q in plans[:i]}), None)
    if twice is not None:
        raise WhatIfError(f"two combinations would both be run {twice!r}: give each its own name")
    made = [_write(store, source, plan) for plan in plans]
    return Sweep(source, outcomes(store, source), made)
