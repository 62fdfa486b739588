"""What counts once and what follows from evidence: the one rule set the round protocol, ingest
and ``memory verify`` check a run's events against.

The fold (:mod:`diagevo.memory.fold`) keeps the memory's own rules (causes exist, states move
as Eq. 5-7 say, rounds commit in order). What it cannot see is evidence counted twice: a failure
recorded, diagnosed or attributed again under a new event id adds to a cause's frequency (F_t and
ε of Eq. 1-2), and a question generated or scored again adds to a cause's accuracy (Eq. 5-6). The
round protocol never writes such events (a failure id names one failure of a run, a question id
one question); a log that comes from anywhere else is held to the same rules here:

- a failure is recorded once in a run, diagnosed once (its diagnosis events in one round), and
  counted once: attributed to a cause or revealing a new one (``cause.created``), not both, not
  twice; reactivating a cause at most once;
- a question is generated once and scored once in a run;
- a round is started once, decides its promotions once, every ``cause.promoted`` of the round comes before that
  decision and the decision names exactly those causes, and the round commits once, after it.

And every decision follows from its evidence (a memory change no evidence stands behind would move
F_t, ε and the schedule as a real one does):

- an attribution (and a reactivation, Eq. 7) names a failure recorded and diagnosed in the run,
  whose diagnosis leads to that cause: it matched the cause (``recurrence``) or described a new
  one that deduplication found to be it (``dedup``);
- a ``cause.created`` names the diagnosed failure that revealed it (a new description, no match);
- a question is scored after it is generated, in the same round;
- a failure recorded in an opened round is of a question the round retained (a round its trainer
  never opened holds failures alone);
- with the memory at hand, a diagnosis matches a cause the memory holds;
- with the memory at hand (``mem``): a reactivated cause is Mastered, a stitched question names a
  Mastered cause as its mastered one (a what-if copies its source's questions, and is exempt), and
  a round's promotions are exactly what :func:`~diagevo.memory.deciders.decide_promotions`
  decides from the round's scored questions and the run's recorded θ_up (Eq. 5-6);
- a ``run.forked`` stands right after the commit of the round it names (the opening events of a
  fork or a what-if), of another run;
- a commit's ``timing`` holds numbers of seconds (``report`` and ``memory whatif`` read it; the
  summary fields' own types are the catalog's).

And a checkpoint name follows from its event (what a resume loads, :func:`checkpoint_rule`): a
``checkpoint.written`` of round t after phase p (``challenger`` or ``solver``) names
``round{t:03d}-{p}``; a ``checkpoint.pruned`` names a checkpoint the run wrote before it, never
the latest written of its phase.

:class:`Tally` is pure: it is fed ``(round, class, data)`` in log order (with the memory before
the event, where the caller folds) and answers the rule an event breaks, or None.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from diagevo.catalog import (
    CATALOG,
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
)
from diagevo.catalog.event import json_kinds
from diagevo.confined import checkpoint_name, checkpoint_problem
from diagevo.memory.fold import Draft, InvariantError, Row, step
from diagevo.memory.state import Cause
from diagevo.sections import ConfigError

COUNTED_TYPES: frozenset[type[Event]] = frozenset(
    {
        FailureRecorded,
        FailureDiagnosed,
        DiagnosisFailed,
        FailureAttributed,
        CauseCreated,
        CauseReactivated,
        QuestionGenerated,
        QuestionScored,
        CausePromoted,
        PromotionsDecided,
        RoundCommitted,
        RoundStarted,
        RunForked,
        CheckpointWritten,
        CheckpointPruned,
    }
)
"""The types the rules read: a reader passes only these (the others change no count)."""

CHECKPOINT_TYPES: tuple[type[Event], ...] = (CheckpointWritten, CheckpointPruned)
CHECKPOINT_PHASES = ("challenger", "solver")
"""The phases after which the training loop writes a checkpoint (both models, ``roundNNN-phase``)."""

FAILURE_KEYED: tuple[type[Event], ...] = (FailureRecorded, FailureDiagnosed, DiagnosisFailed, FailureAttributed)
"""Types whose ``failure_id`` names the failure they count (``cause.created`` and
``cause.reactivated`` name one too)."""


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


@dataclass(slots=True)
class Tally:
    """What a run has counted so far. :meth:`check` tells whether the next event may count,
    :meth:`add` counts it; :meth:`take` does both."""

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
    last: tuple[int, type[Event]] | None = None  # the round and type of the last event counted
    whatif: bool = False  # a what-if: its questions are its source's (a stitched one's cause may be Active here)
    checkpoints: dict[str, str] = field(default_factory=dict)  # checkpoint written -> its phase
    latest: dict[str, str] = field(default_factory=dict)  # phase -> its checkpoint written last

    def take(
        self, rnd: int, etype: type[Event], data: Mapping[str, Any], mem: Causes | None = None
    ) -> tuple[str, str] | None:
        """(rule, reason) of the rule the event breaks, else None, and the event counted."""
        broken = self.check(rnd, etype, data, mem)
        if broken is None:
            self.add(rnd, etype, data)
        return broken

    def check(
        self, rnd: int, etype: type[Event], data: Mapping[str, Any], mem: Causes | None = None
    ) -> tuple[str, str] | None:
        """(rule, reason) of the rule the event would break, else None; nothing is counted.
        ``mem``: the memory before the event, for the rules that read it (none: those are left
        to a caller that folds)."""
        if etype is QuestionGenerated or etype is QuestionScored:
            return self._question(rnd, etype, data, mem)
        if etype is RoundCommitted and (unreadable := summary_problem(data)) is not None:
            return "round summary readable", f"round {rnd}'s commit {unreadable}"
        if etype is CausePromoted or etype is PromotionsDecided or etype is RoundCommitted:
            return self._round(rnd, etype, data) or (self._promotion(rnd, etype, data, mem) if mem else None)
        if etype is RunForked:
            return self._forked(rnd, data)
        if etype is CheckpointWritten or etype is CheckpointPruned:
            return checkpoint_rule(rnd, etype, data, self.checkpoints, self.latest)
        if etype is RoundStarted:
            return ("round started once", f"round {rnd} is started already") if rnd in self.started else None
        fid = data.get("failure_id")
        if etype is CauseCreated and fid is None:
            return "cause created from its failure", f"cause {data.get('cause_id')!r} names no failure that revealed it"
        if not isinstance(fid, str):
            return None  # a diagnosis.failed of the whole round
        if etype is FailureRecorded:
            if fid in self.recorded:
                return "failure recorded once", f"failure {fid!r} is recorded in round {self.recorded[fid]} already"
            qid = data.get("question_id")
            if rnd in self.started and self.kept.get(str(qid)) != rnd:  # a round never opened has no questions
                return "failure of a retained question", (
                    f"failure {fid!r} names question {qid!r}, not a retained question of round {rnd}"
                )
            return None
        if etype is FailureDiagnosed or etype is DiagnosisFailed:
            matched = data.get("matched_cause")
            if etype is FailureDiagnosed and matched is not None and mem is not None and str(matched) not in mem.causes:
                return "diagnosis matches a known cause", (
                    f"failure {fid!r} is diagnosed as cause {matched!r}, which the memory does not hold"
                )
            return self._diagnosis(rnd, etype, fid)
        if etype is CauseReactivated:
            if fid in self.reactivated:
                return "failure counted once", f"failure {fid!r} reactivated a cause already"
            return self._founded(etype, fid, data, mem)
        if fid in self.counted:  # failure.attributed or cause.created
            what, at = self.counted[fid]
            done = "attributed" if what is FailureAttributed else "revealed a new cause"
            return "failure counted once", f"failure {fid!r} was {done} in round {at} already"
        return self._founded(etype, fid, data, mem)

    def _founded(
        self, etype: type[Event], fid: str, data: Mapping[str, Any], mem: Causes | None
    ) -> tuple[str, str] | None:
        """A memory change a failure stands behind: recorded, diagnosed, its diagnosis leading
        to the change (an attribution or a reactivation to its cause, a new cause to a new one)."""
        cause = data.get("cause_id")
        if etype is CauseCreated:
            rule = "cause created from its failure"
        elif etype is CauseReactivated:
            rule = "cause reactivated by its failure"
        else:
            rule = "failure attributed from its diagnosis"
        if fid not in self.recorded:
            return rule, f"failure {fid!r} is not recorded in the run"
        if fid not in self.diagnoses:
            return rule, f"failure {fid!r} is not diagnosed"
        matched, described = self.diagnoses[fid]
        if etype is CauseCreated:
            if matched is not None or described is None:
                said = f"matched cause {matched!r}" if matched is not None else "named no error cause"
                return rule, f"failure {fid!r} revealed no new cause: its diagnosis {said}"
            return None
        via = data.get("via", "dedup" if matched is None else "recurrence")
        if via == "recurrence" and matched != cause:
            return rule, f"failure {fid!r} was diagnosed as {_cause_said(matched, described)}, not as cause {cause!r}"
        if via == "dedup" and (matched is not None or described is None):
            return rule, f"failure {fid!r} was diagnosed as {_cause_said(matched, described)}: nothing to deduplicate"
        if etype is CauseReactivated and mem is not None:
            held = mem.causes.get(str(cause))
            if held is not None and held.active:
                return rule, f"cause {cause!r} is Active: only a Mastered cause is reactivated (Eq. 7)"
        return None

    def _diagnosis(self, rnd: int, etype: type[Event], fid: str) -> tuple[str, str] | None:
        at = self.diagnosed.get(fid)
        if at is not None and at != rnd:
            return "failure diagnosed once", f"failure {fid!r} is diagnosed in round {at} already"
        if etype is FailureDiagnosed and fid in self.judged:
            return "failure diagnosed once", f"failure {fid!r} is diagnosed twice in round {rnd}"
        return None

    def _question(
        self, rnd: int, etype: type[Event], data: Mapping[str, Any], mem: Causes | None
    ) -> tuple[str, str] | None:
        qid = data.get("question_id")
        seen = self.generated if etype is QuestionGenerated else self.scored
        if isinstance(qid, str) and qid in seen:
            what = "generated" if etype is QuestionGenerated else "scored"
            return f"question {what} once", f"question {qid!r} is {what} in round {seen[qid]} already"
        if etype is QuestionScored and isinstance(qid, str) and self.generated.get(qid) != rnd:
            at = self.generated.get(qid)
            where = "never generated" if at is None else f"generated in round {at}"
            return "question scored after generated", f"question {qid!r} is scored in round {rnd} but {where}"
        mastered = data.get("mastered_cause")
        if etype is QuestionGenerated and mastered is not None and mem is not None and not self.whatif:
            held = mem.causes.get(str(mastered))
            if held is None or held.active:
                what = "unknown" if held is None else "Active"
                return (
                    "stitched question on a Mastered cause",
                    f"question {qid!r} names {what} cause {mastered!r} as mastered",
                )
        return None

    def _promotion(self, rnd: int, etype: type[Event], data: Mapping[str, Any], mem: Causes) -> tuple[str, str] | None:
        """A round's promotions are what the deciders decide from its evidence (Eq. 5-6): the
        memory before the round's first promotion is M_{t-1} as far as promotion reads it."""
        if etype is RoundCommitted and (rnd in self.decided or rnd in self.promoted):
            return None
        want = self.expected.get(rnd)
        if want is None:
            try:
                want = decided_promotions(mem, self.targets.get(rnd, {}), self.votes.get(rnd, {}))
            except ConfigError:  # no θ_up to decide by: verify names the config's own seq (views.configs)
                return None
            self.expected[rnd] = want
        if etype is RoundCommitted:
            if want:
                return "promotion decided from the evidence", (
                    f"round {rnd} is committed without promotions, but its scored questions and θ_up "
                    f"promote {_few(want)}"
                )
            return None
        if etype is CausePromoted:
            cause = data.get("cause_id")
            if cause not in want:
                return "promotion decided from the evidence", (
                    f"cause {cause!r} is promoted, but the round's scored questions and θ_up promote {_few(want)}"
                )
            return None
        named = data.get("promoted")
        if isinstance(named, list) and set(map(str, named)) != want:
            return "promotion decided from the evidence", (
                f"round {rnd}'s decision names {_few(named)}, but its scored questions and θ_up promote {_few(want)}"
            )
        return None

    def _forked(self, rnd: int, data: Mapping[str, Any]) -> tuple[str, str] | None:
        """``run.forked`` opens a fork or a what-if: right after the copied commit of its round."""
        at = data.get("source_round")
        last = self.last
        if at != rnd or last is None or last[0] != rnd or last[1] not in (RoundCommitted, RunForked):
            return "run forked at its opening", (
                f"run.forked (source round {at!r}) does not follow the commit of round {rnd}: only a fork or a "
                "what-if writes it, right after the rounds it copies"
            )
        return None

    def _round(self, rnd: int, etype: type[Event], data: Mapping[str, Any]) -> tuple[str, str] | None:
        if rnd in self.committed:
            return "round committed once", f"round {rnd} is committed already"
        if etype is CausePromoted and rnd in self.decided:
            return "promotions decided once", f"cause {data.get('cause_id')!r} promoted after round {rnd}'s decision"
        if etype is not PromotionsDecided:
            return None
        if rnd in self.decided:
            return "promotions decided once", f"the promotions of round {rnd} are decided already"
        named, done = data.get("promoted"), self.promoted.get(rnd, set())
        if not isinstance(named, list) or set(map(str, named)) == done:
            return None
        unnamed, never = done - set(map(str, named)), set(map(str, named)) - done
        if unnamed:
            return "promotions decided once", f"round {rnd}'s decision does not name its promoted {_few(unnamed)}"
        return "promotions decided once", f"round {rnd}'s decision names {_few(never)}, which the round did not promote"

    def add(self, rnd: int, etype: type[Event], data: Mapping[str, Any]) -> None:
        """Count the event (whether or not it broke a rule: a reader goes on past a break)."""
        self.last = (rnd, etype)
        question = etype is QuestionGenerated or etype is QuestionScored
        key = data.get("question_id") if question else data.get("failure_id")
        if etype is QuestionGenerated and isinstance(key, str):
            self.generated.setdefault(key, rnd)
            self.targets.setdefault(rnd, {}).setdefault(key, data.get("active_cause"))
        elif etype is QuestionScored and isinstance(key, str):
            self.scored.setdefault(key, rnd)
            if data.get("retained") is True:
                self.kept.setdefault(key, rnd)
            self.votes.setdefault(rnd, {}).setdefault(key, data.get("p1"))
        elif etype is CausePromoted:
            self.promoted.setdefault(rnd, set()).add(str(data.get("cause_id")))
        elif etype is PromotionsDecided:
            self.decided.add(rnd)
        elif etype is RoundCommitted:
            self.committed.add(rnd)
            for table in (self.targets, self.votes, self.expected):  # a committed round's evidence is closed
                table.pop(rnd, None)
        elif etype is RunForked:
            self.whatif = self.whatif or data.get("whatif") is not None
        elif etype is RoundStarted:
            self.started.add(rnd)
        elif etype is CheckpointWritten:
            name, phase = checkpoint_name(data.get("path")), data.get("phase")
            if name is not None and isinstance(phase, str):
                self.checkpoints[name], self.latest[phase] = phase, name
        elif not isinstance(key, str):
            return
        elif etype is FailureRecorded:
            self.recorded.setdefault(key, rnd)
        elif etype is FailureDiagnosed or etype is DiagnosisFailed:
            self.diagnosed.setdefault(key, rnd)
            if etype is FailureDiagnosed:
                self.judged.add(key)
                self.diagnoses.setdefault(key, (data.get("matched_cause"), data.get("error_cause")))
        elif etype is CauseReactivated:
            self.reactivated.add(key)
        elif etype is FailureAttributed or etype is CauseCreated:
            self.counted.setdefault(key, (etype, rnd))


def checkpoint_rule(
    rnd: int,
    etype: type[Event],
    data: Mapping[str, Any],
    written: Mapping[str, str],
    latest: Mapping[str, str],
) -> tuple[str, str] | None:
    """(rule, reason) when a checkpoint event (of round ``rnd``) names a checkpoint its event
    does not give, else None. ``written``: checkpoint -> its phase, of every ``checkpoint.written``
    the run holds before the event; ``latest``: phase -> its checkpoint written last (what a
    resume loads). A name taken on trust would have a resume load another round's or role's
    weights, or look for a folder that was never written or is still needed."""
    path = data.get("path")
    name = checkpoint_name(path)
    shown = name if name is not None else repr(path)[:80]
    if etype is CheckpointWritten:
        phase = data.get("phase")
        if name is None:
            return "checkpoint named by its event", str(checkpoint_problem(path))
        if phase not in CHECKPOINT_PHASES:
            return "checkpoint named by its event", (
                f"checkpoint.written of round {rnd} names phase {repr(phase)[:40]}, not challenger or solver"
            )
        want = f"round{rnd:03d}-{phase}"
        if name != want:
            return "checkpoint named by its event", (
                f"checkpoint.written of round {rnd} after {phase} names {shown}, not {want}"
            )
        return None
    phase = written.get(name) if name is not None else None
    if phase is None:
        return "checkpoint pruned once written", f"checkpoint.pruned names {shown}, which the run never wrote before it"
    if latest.get(phase) == name:
        return "checkpoint pruned once written", (
            f"checkpoint.pruned names {name}, the latest checkpoint of {phase}: what a resume loads"
        )
    return None


def decided_promotions(mem: Causes, targets: Mapping[str, Any], votes: Mapping[str, Any]) -> frozenset[str]:
    """The causes Eq. 5-6 promote from a round's questions (question -> its active cause, and
    question -> its p1) against ``mem``, under the θ_up (and the ablation switch) of its config:
    what :meth:`Round.promote` and the what-if decide, by the same decider."""
    from diagevo.config import config_from_record
    from diagevo.memory.deciders import decide_promotions

    evidence = [(targets[q], float(p1)) for q, p1 in votes.items() if q in targets and isinstance(p1, int | float)]
    method = config_from_record(dict(mem.config)).memory
    changes = decide_promotions(mem, evidence, method.theta_up, enabled=method.state_updates)  # type: ignore[arg-type]
    return frozenset(c.cause_id for c in changes if isinstance(c, CausePromoted))


def summary_problem(data: Mapping[str, Any]) -> str | None:
    """What in a commit's ``timing`` (seconds by phase) its readers cannot read, or None: a phase
    whose seconds are no number. The types of the summary's fields themselves are the catalog's
    (:class:`~diagevo.catalog.RoundCommitted`'s: checked on every write, the database's included); the
    values inside ``timing`` are this rule's."""
    timing = data.get("timing")
    if not isinstance(timing, Mapping):
        return None  # null, or no object: the catalog's type check names it
    slow = next((phase for phase, sec in timing.items() if "number" not in json_kinds(sec)), None)
    if slow is None:
        return None
    return f"holds timing.{slow} as {' or '.join(sorted(json_kinds(timing[slow])))}, not a number of seconds"


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
    the rules, and the first event the fold refused (its line and its seq; None: the fold took
    all)."""

    commits: dict[int, dict[str, Any]]
    breaks: list[CountBreak]
    invariant: str | None
    refused_at: int | None = None

    @property
    def first_bad(self) -> int | None:
        """The seq of the first event the fold refused or a rule named: the log is good before it."""
        seqs = [b.at for b in self.breaks] + ([self.refused_at] if self.refused_at is not None else [])
        return min(seqs, default=None)


def audit(rows: Iterable[Row], run: str, *, whatif: bool = False) -> Audit:
    """Fold ``(seq, round, type, data)`` rows of one run and check each counted event against
    the rules with the memory before it: one pass. Past an event the fold refuses, the rules
    that need no memory are still checked. ``whatif``: the run is a what-if."""
    tally = Tally(whatif=whatif)
    draft: Draft | None = None
    found: list[CountBreak] = []
    commits: dict[int, dict[str, Any]] = {}
    failed: str | None = None
    refused_at: int | None = None
    committed = RoundCommitted.name
    catalog = CATALOG
    for row in rows:
        seq, rnd, name, data, _ = row
        cls = catalog[name]
        if cls in COUNTED_TYPES:
            broken = tally.check(rnd, cls, data, draft if failed is None else None)
            if broken is not None:
                found.append(CountBreak(seq, *broken))
            tally.add(rnd, cls, data)
        else:
            tally.last = (rnd, cls)  # what a run.forked must follow
        if failed is not None:
            continue
        try:
            draft = step(draft, run, row)
        except InvariantError as exc:
            failed, refused_at = str(exc), seq
            continue
        if name == committed:
            draft.last_seq = seq
            commits[draft.committed] = draft.freeze().to_json()
    return Audit(commits, found, failed, refused_at)


def breaks(rows: Iterable[Row]) -> Iterator[CountBreak]:
    """Every break of the rules in ``(seq, round, type, data)`` rows of one run, in log order."""
    tally = Tally()
    for seq, rnd, name, data, _ in rows:
        cls = CATALOG.get(name)
        if cls not in COUNTED_TYPES:
            continue
        broken = tally.check(rnd, cls, data)
        if broken is not None:
            yield CountBreak(seq, *broken)
        tally.add(rnd, cls, data)
