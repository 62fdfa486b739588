"""Which of a run's recorded questions and failures a ``batch.withdrawn`` took back: the one
statement of the rule every reader of a round's questions and failures applies (the promotions,
the diagnosis, the export and the dump reader, the round's refusals), so that a round reads as if
the withdrawn batch had never been recorded. A withdrawal names the seqs it takes back, so the
same ids recorded again afterwards (later seqs) stand."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, TypeVar, cast

from diagevo.catalog import (
    BatchWithdrawn,
    DiagnosisFailed,
    FailureDiagnosed,
    FailureRecorded,
    PromotionsDecided,
    QuestionGenerated,
    QuestionScored,
    RoundCommitted,
    of_type,
)
from diagevo.log import EventReader
from diagevo.memory.state import Refusal

WITHDRAWABLE = (QuestionGenerated, QuestionScored, FailureRecorded)
"""What a batch of recorded evidence holds: what ``batch.withdrawn`` may take back."""
_NAMES = frozenset(cls.name for cls in WITHDRAWABLE)
_DIAGNOSES: tuple[type[FailureDiagnosed | DiagnosisFailed], ...] = (FailureDiagnosed, DiagnosisFailed)


class Placed(Protocol):
    """A row as a read gives it (a stored event, an :class:`~diagevo.log.StoredEvent`): where it is."""

    @property
    def seq(self) -> int: ...

    @property
    def round(self) -> int: ...

    @property
    def type(self) -> str: ...


R = TypeVar("R", bound=Placed)


@dataclass(frozen=True, slots=True)
class Withdrawn:
    """The seq ranges the run's lawful withdrawals took back, per round, and the withdrawals the
    rule refused (:func:`withdrawal_problem`: a forged one, taking back half a batch, or after the
    round's promotions, a diagnosis or its commit), which no reader applies and every reader names."""

    ranges: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    refused: tuple[Refusal, ...] = ()

    @classmethod
    def of(cls, store: EventReader, run: str, t: int | None = None, upto: int | None = None) -> Withdrawn:
        """The withdrawals of ``run`` (of round ``t`` alone where given; those at seqs up to
        ``upto``), each held to the rule as the log stood when it was written."""
        ranges: dict[int, list[tuple[int, int]]] = {}
        refused = []
        for row in store.rows(run, types=(BatchWithdrawn,), in_round=t, upto_seq=upto):
            ev = cast(BatchWithdrawn, row.event)
            problem = withdrawal_problem(store, run, row.round, ev.first_seq, ev.last_seq, upto=row.seq - 1)
            if problem is None:
                problem = _names_its_batch(store, run, ev)
            if problem is None:
                ranges.setdefault(row.round, []).append((ev.first_seq, ev.last_seq))
            else:
                refused.append(Refusal(row.seq, row.type, problem.why))
        return cls(ranges, tuple(refused))

    def holds(self, row: Placed) -> bool:
        """Whether ``row`` is one of the recorded questions or failures a withdrawal took back."""
        spans = self.ranges.get(row.round)
        return bool(spans) and row.type in _NAMES and any(a <= row.seq <= b for a, b in spans or ())

    def standing(self, rows: Iterable[R]) -> Iterator[R]:
        """``rows`` but those a lawful withdrawal took back, and the refused withdrawals themselves."""
        if not self.ranges and not self.refused:
            return iter(rows)
        refused = {r.seq for r in self.refused}
        return (row for row in rows if not self.holds(row) and row.seq not in refused)

    def lawful(self, rows: Iterable[R]) -> Iterator[R]:
        """``rows`` but the withdrawals the rule refused: what a count of the log counts (a lawful
        withdrawal's rows stay, their counts taken back by the withdrawal's own)."""
        refused = {r.seq for r in self.refused}
        return (row for row in rows if row.seq not in refused) if refused else iter(rows)

    def overlapping(self, t: int, first: int, last: int) -> tuple[int, int] | None:
        """A range of round ``t`` withdrawn already that meets ``first``..``last``, or None."""
        return next((span for span in self.ranges.get(t, ()) if span[0] <= last and first <= span[1]), None)


class WithdrawalRefused(NamedTuple):
    """Why the rule refuses a withdrawal: ``late`` for when it comes (after the round's promotions,
    a diagnosis or its commit), else for what it names; ``why`` in one line naming the batch."""

    late: bool
    why: str


def withdrawal_problem(
    store: EventReader, run: str, t: int, first: int, last: int, upto: int | None = None
) -> WithdrawalRefused | None:
    """Why seqs ``first``..``last`` cannot be withdrawn from round ``t``, the log as it stands at
    seq ``upto`` (None: its head), else None: the one statement of the rule, for the writer
    (:func:`~diagevo.rounds.withdraw.withdrawal`) and for every reader of a stored withdrawal. A
    withdrawal takes back one recorded batch whole (:func:`recorded_batches`), of the round's
    questions or its failures, not one withdrawn already, before the round's commit, questions
    before its promotions are decided, failures none of which is diagnosed."""
    what = f"batch {first}-{last} of round {t} of run {run!r}"
    rows = [r for r in store.rows(run, after_seq=first - 1, upto_seq=last) if upto is None or r.seq <= upto]
    if not rows:
        return WithdrawalRefused(
            False, f"{what}: the run holds no event at those seqs (memory events shows a round's seqs)"
        )
    for e in rows:
        if e.round != t or e.type not in _NAMES:
            said = f"seq {e.seq} is a {e.type} of round {e.round}"
            return WithdrawalRefused(
                False, f"{what}: {said}, and a batch withdrawn holds only the round's recorded questions or failures"
            )
    touched = [f"{a}-{b}" for a, b in recorded_batches(store, run, t, upto) if a <= last and first <= b]
    if touched != [f"{first}-{last}"]:
        said = f"batch {touched[0]}" if len(touched) == 1 else f"batches {', '.join(touched[:-1])} and {touched[-1]}"
        return WithdrawalRefused(
            False,
            f"{what} is not one recorded batch: it touches {said} (a withdrawal takes back one recorded batch whole)",
        )
    done = Withdrawn.of(store, run, t, upto).overlapping(t, first, last)
    if done is not None:
        return WithdrawalRefused(True, f"{what} is withdrawn already (seqs {done[0]}-{done[1]})")
    questions = [r for r in rows if r.type == QuestionGenerated.name]
    failures = [cast(FailureRecorded, r.event).failure_id for r in rows if r.type == FailureRecorded.name]
    if questions and failures:
        return WithdrawalRefused(False, f"{what} holds questions and failures: withdraw one batch at a time")
    stands = list(store.rows(run, types=(PromotionsDecided, RoundCommitted), in_round=t, upto_seq=upto))
    if any(r.type == RoundCommitted.name for r in stands):
        return WithdrawalRefused(True, f"cannot withdraw {what}: round {t} is committed")
    if questions and stands:
        return WithdrawalRefused(
            True, f"cannot withdraw {what}: its promotions are decided (the questions' evidence is closed)"
        )
    judged = (
        store.rows(run, types=_DIAGNOSES, in_round=t, keys={"failure_id": failures}, upto_seq=upto) if failures else ()
    )
    diagnosed = next((d.failure_id for d in of_type(_DIAGNOSES, judged) if d.failure_id in failures), None)
    if diagnosed is not None:
        return WithdrawalRefused(
            True, f"cannot withdraw {what}: failure {diagnosed!r} is diagnosed (the memory may follow from it)"
        )
    return None


def _names_its_batch(store: EventReader, run: str, ev: BatchWithdrawn) -> WithdrawalRefused | None:
    """A stored withdrawal names the questions or failures its seqs hold, no other."""
    rows = list(store.rows(run, types=WITHDRAWABLE, after_seq=ev.first_seq - 1, upto_seq=ev.last_seq))
    questions = [cast(QuestionGenerated, r.event).question_id for r in rows if r.type == QuestionGenerated.name]
    failures = [cast(FailureRecorded, r.event).failure_id for r in rows if r.type == FailureRecorded.name]
    if list(ev.questions) == questions and list(ev.failures) == failures:
        return None
    return WithdrawalRefused(
        False, f"batch {ev.first_seq}-{ev.last_seq} names other questions or failures than its seqs hold"
    )


def recorded_batches(store: EventReader, run: str, t: int, upto: int | None = None) -> list[tuple[int, int]]:
    """Round ``t``'s recorded batches, each (first seq, last seq), in log order: what one append
    of the round's questions or failures stored (consecutive seqs under one ``recorded_at``, the
    stamp of its transaction), those withdrawn included. A withdrawal takes back one of them
    whole (:func:`~diagevo.rounds.withdraw.withdrawal`)."""
    spans: list[tuple[int, int]] = []
    stamp = None
    for e in store.read(run, types=WITHDRAWABLE, in_round=t, upto_seq=upto):
        if spans and e.seq == spans[-1][1] + 1 and e.recorded_at == stamp:
            spans[-1] = (spans[-1][0], e.seq)
        else:
            spans.append((e.seq, e.seq))
            stamp = e.recorded_at
    return spans


def batch_holding(store: EventReader, run: str, t: int, seq: int) -> tuple[int, int] | None:
    """The recorded batch of round ``t`` that holds the row at ``seq`` (None: no batch does)."""
    return next((span for span in recorded_batches(store, run, t) if span[0] <= seq <= span[1]), None)
