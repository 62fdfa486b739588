"""What counts once: the one rule set ingest and ``memory verify`` check a run's events against.

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
- a round decides its promotions once, every ``cause.promoted`` of the round comes before that
  decision and the decision names exactly those causes, and the round commits once, after it.

:class:`Tally` is pure: it is fed ``(round, class, data)`` in log order and answers the rule an
event breaks, or None.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from diagevo.catalog import (
    CATALOG,
    CauseCreated,
    CausePromoted,
    CauseReactivated,
    DiagnosisFailed,
    Event,
    FailureAttributed,
    FailureDiagnosed,
    FailureRecorded,
    PromotionsDecided,
    QuestionGenerated,
    QuestionScored,
    RoundCommitted,
)

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
    }
)
"""The types the rules read: a reader passes only these (the others change no count)."""

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
    promoted: dict[int, set[str]] = field(default_factory=dict)  # round -> causes promoted
    decided: set[int] = field(default_factory=set)  # rounds whose promotions are decided
    committed: set[int] = field(default_factory=set)

    def take(self, rnd: int, etype: type[Event], data: Mapping[str, Any]) -> tuple[str, str] | None:
        """(rule, reason) of the rule the event breaks, else None, and the event counted."""
        broken = self.check(rnd, etype, data)
        if broken is None:
            self.add(rnd, etype, data)
        return broken

    def check(self, rnd: int, etype: type[Event], data: Mapping[str, Any]) -> tuple[str, str] | None:
        """(rule, reason) of the rule the event would break, else None; nothing is counted."""
        if etype is QuestionGenerated or etype is QuestionScored:
            return self._question(rnd, etype, data)
        if etype is CausePromoted or etype is PromotionsDecided or etype is RoundCommitted:
            return self._round(rnd, etype, data)
        fid = data.get("failure_id")
        if not isinstance(fid, str):
            return None  # a cause.created of no failure, or a diagnosis.failed of the whole round
        if etype is FailureRecorded:
            if fid in self.recorded:
                return "failure recorded once", f"failure {fid!r} is recorded in round {self.recorded[fid]} already"
            return None
        if etype is FailureDiagnosed or etype is DiagnosisFailed:
            return self._diagnosis(rnd, etype, fid)
        if etype is CauseReactivated:
            if fid in self.reactivated:
                return "failure counted once", f"failure {fid!r} reactivated a cause already"
            return None
        if fid in self.counted:  # failure.attributed or cause.created
            what, at = self.counted[fid]
            done = "attributed" if what is FailureAttributed else "revealed a new cause"
            return "failure counted once", f"failure {fid!r} was {done} in round {at} already"
        return None

    def _diagnosis(self, rnd: int, etype: type[Event], fid: str) -> tuple[str, str] | None:
        at = self.diagnosed.get(fid)
        if at is not None and at != rnd:
            return "failure diagnosed once", f"failure {fid!r} is diagnosed in round {at} already"
        if etype is FailureDiagnosed and fid in self.judged:
            return "failure diagnosed once", f"failure {fid!r} is diagnosed twice in round {rnd}"
        return None

    def _question(self, rnd: int, etype: type[Event], data: Mapping[str, Any]) -> tuple[str, str] | None:
        qid = data.get("question_id")
        seen = self.generated if etype is QuestionGenerated else self.scored
        if isinstance(qid, str) and qid in seen:
            what = "generated" if etype is QuestionGenerated else "scored"
            return f"question {what} once", f"question {qid!r} is {what} in round {seen[qid]} already"
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
        question = etype is QuestionGenerated or etype is QuestionScored
        key = data.get("question_id") if question else data.get("failure_id")
        if etype is QuestionGenerated and isinstance(key, str):
            self.generated.setdefault(key, rnd)
        elif etype is QuestionScored and isinstance(key, str):
            self.scored.setdefault(key, rnd)
        elif etype is CausePromoted:
            self.promoted.setdefault(rnd, set()).add(str(data.get("cause_id")))
        elif etype is PromotionsDecided:
            self.decided.add(rnd)
        elif etype is RoundCommitted:
            self.committed.add(rnd)
        elif not isinstance(key, str):
            return
        elif etype is FailureRecorded:
            self.recorded.setdefault(key, rnd)
        elif etype is FailureDiagnosed or etype is DiagnosisFailed:
            self.diagnosed.setdefault(key, rnd)
            if etype is FailureDiagnosed:
                self.judged.add(key)
        elif etype is CauseReactivated:
            self.reactivated.add(key)
        elif etype is FailureAttributed or etype is CauseCreated:
            self.counted.setdefault(key, (etype, rnd))


def _few(names: Iterable[Any]) -> str:
    shown = sorted(map(str, names))
    if not shown:
        return "none"
    return ", ".join(repr(n) for n in shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")


def breaks(rows: Iterable[tuple[int, int, str, Mapping[str, Any]]]) -> Iterator[CountBreak]:
    """Every break of the rules in ``(seq, round, type, data)`` rows of one run, in log order."""
    tally = Tally()
    for seq, rnd, name, data in rows:
        cls = CATALOG.get(name)
        if cls not in COUNTED_TYPES:
            continue
        broken = tally.check(rnd, cls, data)
        if broken is not None:
            yield CountBreak(seq, *broken)
        tally.add(rnd, cls, data)
