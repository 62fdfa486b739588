"""What counts once and what follows from evidence: the one rule set the round protocol, ingest
and ``memory verify`` check a run's events against.

The fold (:mod:`diagevo.memory.fold`) keeps the memory's own rules (causes exist, states move
as Eq. 5-7 say, rounds commit in order). What it cannot see is evidence counted twice: a failure
recorded, diagnosed or attributed again under a new event id adds to a cause's frequency (F_t and
ε of Eq. 1-2), and a question generated or scored again adds to a cause's accuracy (Eq. 5-6). Nor
can it see a decision no evidence stands behind (an attribution of a failure never diagnosed so,
promotions other than what Eq. 5-6 decide from the round's scored questions), which would move
F_t, ε and the schedule as a real one does. The round protocol never writes such events; a log
that comes from anywhere else is held to the same rules here. A checkpoint name follows from its
event too (what a resume loads, :func:`~diagevo.memory.checkpoints.checkpoint_rule`).

Each type's rule is stated once, in :data:`RULES`: what it checks and what it counts. A
:class:`Tally` holds what a run has counted; a :class:`Ledger` takes typed events (or stored
rows) in log order, checks each against the counts and the memory before it, and moves both on
together: the one driver of every caller (``memory verify``, ingest, the round's refusals, a
stored run's counts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from diagevo.catalog import (
    CATALOG,
    BatchWithdrawn,
    CauseCreated,
    CausePromoted,
    CauseReactivated,
    CheckpointPruned,
    CheckpointWritten,
    DiagnosisFailed,
    Event,
    FailureAttributed,
    FailureDiagnosed,
    FailureRecorded,
    PromotionsDecided,
    QuestionGenerated,
    QuestionScored,
    RoundCommitted,
    RoundStarted,
    RunForked,
    StoredEvent,
    UnreadableRow,
)
from diagevo.config.errors import ConfigError
from diagevo.config.sections import config_from_record
from diagevo.memory.checkpoints import CheckpointTally
from diagevo.memory.deciders import decide_promotions
from diagevo.memory.fold import Draft, Folding, InvariantError, Read, Row, Taken
from diagevo.memory.forks import fork_opening
from diagevo.memory.state import Cause, Memory, MemoryImage, Refusal


@dataclass(frozen=True, slots=True)
class CountBreak:
    """An event that breaks a counting rule: where it is (a seq of the log, or a line of a file),
    the rule's short name and what happened, in words."""

    at: int
    rule: str
    reason: str


class Causes(Protocol):
    """What the rules read of a memory (a :class:`~diagevo.memory.state.Memory` or a fold's
    working copy): its causes and its config, as they stand before the event."""

    @property
    def causes(self) -> Mapping[str, Cause]: ...

    @property
    def config(self) -> Mapping[str, Any]: ...


Broken = tuple[str, str] | None
"""(rule, reason) of the rule an event breaks, or None."""


@dataclass(slots=True)
class Tally:
    """What a run has counted so far. :meth:`Ledger.take` checks the next event against it (and
    the memory before the event, where the caller folds) and counts it: each type's
    :data:`Rule` does both."""

    recorded: dict[str, int] = field(default_factory=dict)  # failure -> its round
    diagnosed: dict[str, int] = field(default_factory=dict)  # failure -> the round of its diagnosis
    judged: set[str] = field(default_factory=set)  # failures with a failure.diagnosed
    counted: dict[str, tuple[type[Event], int]] = field(default_factory=dict)  # failure -> (type, round)
    reactivated: set[str] = field(default_factory=set)
    generated: dict[str, int] = field(default_factory=dict)  # question -> its round
    scored: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)  # retained question -> its round
    promoted: dict[int, set[str]] = field(default_factory=dict)  # round -> causes promoted
    decided: set[int] = field(default_factory=set)  # rounds whose promotions are decided
    committed: set[int] = field(default_factory=set)
    started: set[int] = field(default_factory=set)  # rounds opened
    # the evidence decisions follow from
    diagnoses: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # failure -> (matched, error_cause)
    targets: dict[int, dict[str, Any]] = field(default_factory=dict)  # round -> question -> its active cause
    votes: dict[int, dict[str, Any]] = field(default_factory=dict)  # round -> question -> p1
    expected: dict[int, frozenset[str]] = field(default_factory=dict)  # round -> the promotions Eq. 5-6 decide
    last: tuple[int, type[Event]] | None = None  # the round and type of the last event taken
    whatif: bool = False  # a what-if: its questions are its source's (a stitched one's cause may be Active here)
    checkpoints: CheckpointTally = field(default_factory=CheckpointTally)  # the checkpoints the rule took

    def promotions(self, rnd: int, mem: Causes) -> frozenset[str] | None:
        """The causes Eq. 5-6 promote in round ``rnd`` from its scored questions, against the
        memory before the round's first promotion (M_{t-1} as far as promotion reads it); None
        without a θ_up to decide by (verify names the config's own seq: views.configs)."""
        want = self.expected.get(rnd)
        if want is None:
            try:
                want = decided_promotions(mem, self.targets.get(rnd, {}), self.votes.get(rnd, {}))
            except ConfigError:
                return None
            self.expected[rnd] = want
        return want

    def diagnosed_once(self, rnd: int, fid: str, judged: bool) -> Broken:
        """A failure's diagnosis events stand in one round, one ``failure.diagnosed`` (``judged``)."""
        at = self.diagnosed.get(fid)
        if at is not None and at != rnd:
            return "failure diagnosed once", f"failure {fid!r} is diagnosed in round {at} already"
        if judged and fid in self.judged:
            return "failure diagnosed once", f"failure {fid!r} is diagnosed twice in round {rnd}"
        return None

    def founded(self, event: CauseCreated | CauseReactivated | FailureAttributed, mem: Causes | None) -> Broken:
        """A memory change a failure stands behind: recorded, diagnosed, its diagnosis leading
        to the change (an attribution or a reactivation to its cause, a new cause to a new one)."""
        fid, cause = event.failure_id, event.cause_id
        rule = FOUNDED[type(event)]
        if fid not in self.recorded:
            return rule, f"failure {fid!r} is not recorded in the run"
        if fid not in self.diagnoses:
            return rule, f"failure {fid!r} is not diagnosed"
        matched, described = self.diagnoses[fid]
        if isinstance(event, CauseCreated):
            if matched is not None or described is None:
                said = f"matched cause {matched!r}" if matched is not None else "named no error cause"
                return rule, f"failure {fid!r} revealed no new cause: its diagnosis {said}"
            return None
        via = (event.via if isinstance(event, FailureAttributed) else None) or (
            "dedup" if matched is None else "recurrence"
        )
        if via == "recurrence" and matched != cause:
            return rule, f"failure {fid!r} was diagnosed as {_cause_said(matched, described)}, not as cause {cause!r}"
        if via == "dedup" and (matched is not None or described is None):
            return rule, f"failure {fid!r} was diagnosed as {_cause_said(matched, described)}: nothing to deduplicate"
        if isinstance(event, CauseReactivated) and mem is not None:
            held = mem.causes.get(str(cause))
            if held is not None and held.active:
                return rule, f"cause {cause!r} is Active: only a Mastered cause is reactivated (Eq. 7)"
        return None


FOUNDED: dict[type[Event], str] = {
    CauseCreated: "cause created from its failure",
    CauseReactivated: "cause reactivated by its failure",
    FailureAttributed: "failure attributed from its diagnosis",
}


Rule = Callable[[Tally, int, Any, Causes | None], Broken]
"""An event type's counting rule, kept together as eventsourcing keeps an event's effect with the
event: it checks the event against the counts (and the memory before it, or None) and adds it to
them, whether or not it broke the rule (the ``finally`` of the rules that check more than one thing)."""


def _generated(t: Tally, rnd: int, ev: QuestionGenerated, mem: Causes | None) -> Broken:
    qid, mastered = ev.question_id, ev.mastered_cause
    try:
        if qid in t.generated:
            return "question generated once", f"question {qid!r} is generated in round {t.generated[qid]} already"
        if mastered is not None and mem is not None and not t.whatif:
            held = mem.causes.get(str(mastered))
            if held is None or held.active:
                what = "unknown" if held is None else "Active"
                return (
                    "stitched question on a Mastered cause",
                    f"question {qid!r} names {what} cause {mastered!r} as mastered",
                )
        return None
    finally:
        t.generated.setdefault(qid, rnd)
        t.targets.setdefault(rnd, {}).setdefault(qid, ev.active_cause)


def _scored(t: Tally, rnd: int, ev: QuestionScored, mem: Causes | None) -> Broken:
    qid = ev.question_id
    try:
        if qid in t.scored:
            return "question scored once", f"question {qid!r} is scored in round {t.scored[qid]} already"
        at = t.generated.get(qid)
        if at != rnd:
            where = "never generated" if at is None else f"generated in round {at}"
            return "question scored after generated", f"question {qid!r} is scored in round {rnd} but {where}"
        return None
    finally:
        t.scored.setdefault(qid, rnd)
        if ev.retained is True:
            t.kept.setdefault(qid, rnd)
        t.votes.setdefault(rnd, {}).setdefault(qid, ev.p1)


def _promoted(t: Tally, rnd: int, ev: CausePromoted, mem: Causes | None) -> Broken:
    try:
        if rnd in t.committed:  # a round's promotions and milestones stand before its commit
            return "round committed once", f"round {rnd} is committed already"
        if rnd in t.decided:
            return "promotions decided once", f"cause {ev.cause_id!r} promoted after round {rnd}'s decision"
        want = t.promotions(rnd, mem) if mem is not None else None
        if want is not None and ev.cause_id not in want:
            return "promotion decided from the evidence", (
                f"cause {ev.cause_id!r} is promoted, but the round's scored questions and θ_up promote {_few(want)}"
            )
        return None
    finally:
        t.promoted.setdefault(rnd, set()).add(str(ev.cause_id))


def _decided(t: Tally, rnd: int, ev: PromotionsDecided, mem: Causes | None) -> Broken:
    try:
        if rnd in t.committed:
            return "round committed once", f"round {rnd} is committed already"
        if rnd in t.decided:
            return "promotions decided once", f"the promotions of round {rnd} are decided already"
        named, done = set(map(str, ev.promoted)), t.promoted.get(rnd, set())
        if done - named:
            return "promotions decided once", f"round {rnd}'s decision does not name its promoted {_few(done - named)}"
        if named - done:
            never = _few(named - done)
            return "promotions decided once", f"round {rnd}'s decision names {never}, which the round did not promote"
        want = t.promotions(rnd, mem) if mem is not None else None
        if want is not None and named != want:
            return "promotion decided from the evidence", (
                f"round {rnd}'s decision names {_few(ev.promoted)}, but its scored questions and θ_up promote "
                f"{_few(want)}"
            )
        return None
    finally:
        t.decided.add(rnd)


def _committed(t: Tally, rnd: int, ev: RoundCommitted, mem: Causes | None) -> Broken:
    try:
        if rnd in t.committed:
            return "round committed once", f"round {rnd} is committed already"
        if mem is None or rnd in t.decided or rnd in t.promoted:
            return None
        want = t.promotions(rnd, mem)
        if want:
            return "promotion decided from the evidence", (
                f"round {rnd} is committed without promotions, but its scored questions and θ_up promote {_few(want)}"
            )
        return None
    finally:
        t.committed.add(rnd)
        for table in (t.targets, t.votes, t.expected):  # a committed round's evidence is closed
            table.pop(rnd, None)


def _started(t: Tally, rnd: int, ev: RoundStarted, mem: Causes | None) -> Broken:
    broken = ("round started once", f"round {rnd} is started already") if rnd in t.started else None
    t.started.add(rnd)
    return broken


def _forked(t: Tally, rnd: int, ev: RunForked, mem: Causes | None) -> Broken:
    """Where a marker stands; it relaxes nothing after it. Whether the run is a what-if is its
    caller's to say (:attr:`Tally.whatif`: ``memory verify`` asks the reader of a run's origin,
    ingest the file that creates the run): a what-if's log ends at its marker, and what follows a
    marker in a run was written by whoever may append, whose marker this rule alone cannot tell
    from a what-if's (:func:`~diagevo.views.forks.fork_copy_problem` reads the source)."""
    return fork_opening(rnd, ev, t.last)


def _checkpoint(t: Tally, rnd: int, ev: CheckpointWritten | CheckpointPruned, mem: Causes | None) -> Broken:
    return t.checkpoints.take(rnd, ev, opened=rnd in t.started and rnd not in t.committed)


def _recorded(t: Tally, rnd: int, ev: FailureRecorded, mem: Causes | None) -> Broken:
    fid, qid = ev.failure_id, ev.question_id
    try:
        if fid in t.recorded:
            return "failure recorded once", f"failure {fid!r} is recorded in round {t.recorded[fid]} already"
        if rnd in t.started and t.kept.get(qid) != rnd:  # a round never opened has no questions
            return "failure of a retained question", (
                f"failure {fid!r} names question {qid!r}, not a retained question of round {rnd}"
            )
        return None
    finally:
        t.recorded.setdefault(fid, rnd)


def _diagnosed(t: Tally, rnd: int, ev: FailureDiagnosed, mem: Causes | None) -> Broken:
    fid, matched = ev.failure_id, ev.matched_cause
    try:
        if matched is not None and mem is not None and str(matched) not in mem.causes:
            return "diagnosis matches a known cause", (
                f"failure {fid!r} is diagnosed as cause {matched!r}, which the memory does not hold"
            )
        return t.diagnosed_once(rnd, fid, judged=True)
    finally:
        t.diagnosed.setdefault(fid, rnd)
        t.judged.add(fid)
        t.diagnoses.setdefault(fid, (matched, ev.error_cause))


def _failed(t: Tally, rnd: int, ev: DiagnosisFailed, mem: Causes | None) -> Broken:
    fid = ev.failure_id
    if fid is None:  # of the whole round
        return None
    broken = t.diagnosed_once(rnd, fid, judged=False)
    t.diagnosed.setdefault(fid, rnd)
    return broken


def _reactivated(t: Tally, rnd: int, ev: CauseReactivated, mem: Causes | None) -> Broken:
    try:
        if ev.failure_id in t.reactivated:
            return "failure counted once", f"failure {ev.failure_id!r} reactivated a cause already"
        return t.founded(ev, mem)
    finally:
        t.reactivated.add(ev.failure_id)


def _counted(t: Tally, rnd: int, ev: FailureAttributed | CauseCreated, mem: Causes | None) -> Broken:
    fid = ev.failure_id
    if fid is None:  # a cause.created
        return "cause created from its failure", f"cause {ev.cause_id!r} names no failure that revealed it"
    try:
        if fid in t.counted:
            what, at = t.counted[fid]
            done = "attributed" if what is FailureAttributed else "revealed a new cause"
            return "failure counted once", f"failure {fid!r} was {done} in round {at} already"
        return t.founded(ev, mem)
    finally:
        t.counted.setdefault(fid, (type(ev), rnd))


def _withdrawn(t: Tally, rnd: int, ev: BatchWithdrawn, mem: Causes | None) -> Broken:
    """A batch taken back: its questions and failures are the round's no more (and may be
    recorded again). Only before the commit; questions only before the round's promotions are
    decided (Eq. 5-6 read them), failures only while undiagnosed (the memory may follow)."""
    try:
        if rnd in t.committed:
            return "round committed once", f"batch {ev.first_seq}-{ev.last_seq} withdrawn after round {rnd}'s commit"
        if ev.questions and rnd in t.decided:
            return "questions withdrawn before the promotions", (
                f"batch {ev.first_seq}-{ev.last_seq} withdraws questions after round {rnd}'s promotions are decided"
            )
        judged = next((fid for fid in ev.failures if fid in t.diagnosed), None)
        if judged is not None:
            return (
                "failures withdrawn undiagnosed",
                f"batch {ev.first_seq}-{ev.last_seq} withdraws {judged!r}, diagnosed",
            )
        return None
    finally:
        for qid in ev.questions:
            for held in (t.generated, t.scored, t.kept):
                if held.get(qid) == rnd:
                    del held[qid]
            t.targets.get(rnd, {}).pop(qid, None)
            t.votes.get(rnd, {}).pop(qid, None)
        for fid in ev.failures:
            if t.recorded.get(fid) == rnd:
                del t.recorded[fid]


RULES: dict[type[Event], Rule] = {
    BatchWithdrawn: _withdrawn,
    QuestionGenerated: _generated,
    QuestionScored: _scored,
    FailureRecorded: _recorded,
    FailureDiagnosed: _diagnosed,
    DiagnosisFailed: _failed,
    FailureAttributed: _counted,
    CauseCreated: _counted,
    CauseReactivated: _reactivated,
    CausePromoted: _promoted,
    PromotionsDecided: _decided,
    RoundCommitted: _committed,
    RoundStarted: _started,
    RunForked: _forked,
    CheckpointWritten: _checkpoint,
    CheckpointPruned: _checkpoint,
}
"""Each counted type's rule: the one place it is stated."""


def decided_promotions(mem: Causes, targets: Mapping[str, Any], votes: Mapping[str, Any]) -> frozenset[str]:
    """The causes Eq. 5-6 promote from a round's questions (question -> its active cause, and
    question -> its p1) against ``mem``, under the θ_up (and the ablation switch) of its config:
    what :meth:`Round.promote` and the what-if decide, by the same decider."""
    evidence = [(targets[q], float(p1)) for q, p1 in votes.items() if q in targets and isinstance(p1, int | float)]
    method = config_from_record(dict(mem.config)).memory
    changes = decide_promotions(mem, evidence, method.theta_up, enabled=method.state_updates)  # type: ignore[arg-type]
    return frozenset(c.cause_id for c in changes)


def _cause_said(matched: Any, described: Any) -> str:
    if matched is not None:
        return f"cause {matched!r}"
    return "a new cause" if described is not None else "no skill error"


def _few(names: Iterable[Any]) -> str:
    shown = sorted(map(str, names))
    if not shown:
        return "none"
    return ", ".join(repr(n) for n in shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")


@dataclass(frozen=True)
class Audit:
    """A run's log checked whole: the memory at each commit (as JSON, by round), every break of
    the rules, every row the fold refused (as every reader's fold refuses it), and the first
    readable one of them (None: the fold took every readable row; verify names an unreadable
    row apart)."""

    commits: dict[int, MemoryImage]
    breaks: list[CountBreak]
    refused: tuple[Refusal, ...] = ()
    first_refused: Refusal | None = None

    @property
    def invariant(self) -> str | None:
        """The first readable refusal in words, with its seq."""
        first = self.first_refused
        return None if first is None else f"seq {first.seq}: {first.why}"

    @property
    def first_bad(self) -> int | None:
        """The seq of the first event the fold refused or a rule named: the log is good before it."""
        first = self.first_refused
        return min([b.at for b in self.breaks] + ([] if first is None else [first.seq]), default=None)


@dataclass(slots=True)
class Ledger:
    """A run's counts and its memory moved on together, one event at a time, through the fold's
    one loop (:class:`~diagevo.memory.fold.Folding`): the event checked against the counts and the
    memory before it, then counted and folded. What ``memory verify`` (:func:`audit`), ingest, and
    the round protocol's and the diagnosis's appends take events by. ``folding``: the memory at
    hand (a folding of None: the run's first event starts it); None: the counts alone, without
    the memory's rules."""

    run: str
    tally: Tally = field(default_factory=Tally)
    folding: Folding | None = None

    @classmethod
    def folded(cls, run: str, tally: Tally, memory: Memory | None) -> Ledger:
        """The counts and the memory from ``memory`` on (None: from the run's ``run.started``)."""
        return cls(run, tally, Folding(run, memory))

    def take(self, rnd: int, event: Event, seq: int = 0) -> Taken[Broken]:
        """:meth:`take_row` of a producer's event (in the shape of a stored row)."""
        return self.take_row(StoredEvent.of(seq, rnd, event))

    def take_row(self, row: Read) -> Taken[Broken]:
        """The fold's verdict on ``row`` and the rule it breaks: counted (whether or not it broke
        a rule: a reader goes on past a break) unless refused for its place, and folded unless the
        fold refuses it (then passed over, as every reader passes it over). Without a folding,
        counted alone."""
        if self.folding is None:
            if isinstance(row, UnreadableRow):
                return Taken(Refusal(row.seq, row.type, row.why), None)
            return Taken(None, self._count(row, None))
        try:
            return self.folding.take(row, self._count)
        except InvariantError as exc:  # a run.started the fold cannot start from
            return Taken(Refusal(row.seq, row.type, str(exc)), None)

    def _count(self, row: Row, mem: Draft | None) -> Broken:
        event = row.event
        rule = RULES.get(type(event))
        broken = None if rule is None else rule(self.tally, row.round, event, mem)
        self.tally.last = (row.round, type(event))
        return broken


def audit(rows: Iterable[Read], run: str, *, whatif: bool = False, took: Callable[[Row], None] | None = None) -> Audit:
    """Fold the stored rows of one run and check each counted event against
    the rules with the memory before it: one pass. Past an event the fold refuses, the rules
    that need no memory are still checked. ``whatif``: the run is a what-if; ``took``: told of
    each row the fold takes (what ``memory stats`` counts), in the same pass."""
    ledger = Ledger.folded(run, Tally(whatif=whatif), None)
    folding = ledger.folding
    assert folding is not None
    found: list[CountBreak] = []
    commits: dict[int, MemoryImage] = {}
    first: Refusal | None = None
    for row in rows:
        taken = ledger.take_row(row)
        if taken.counted is not None:
            found.append(CountBreak(row.seq, *taken.counted))
        if taken.refusal is not None:
            if first is None and not isinstance(row, UnreadableRow):  # verify names an unreadable row apart
                first = taken.refusal
            continue
        row = cast(Row, row)
        if took is not None:
            took(row)
        if row.type == RoundCommitted.name and folding.draft is not None:
            folding.draft.last_seq = row.seq
            commits[folding.draft.committed] = folding.draft.freeze().to_json()
    refused = tuple(folding.early if folding.draft is None else folding.draft.refused)
    return Audit(commits, found, refused, first)


def breaks(rows: Iterable[Row]) -> Iterator[CountBreak]:
    """Every break of the rules in the stored rows of one run, in log order
    (the rows of the types no rule reads are passed over)."""
    ledger = Ledger("")
    for row in rows:
        if CATALOG.get(row.type) in RULES:
            broken = ledger.take_row(row).counted
            if broken is not None:
                yield CountBreak(row.seq, *broken)
