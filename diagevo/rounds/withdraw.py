"""A recorded batch taken back before the commit (``batch.withdrawn``), and the ids the same
questions or failures are recorded under again.

A batch is what one append of :meth:`~diagevo.rounds.Round.record` or
:meth:`~diagevo.rounds.Round.record_failures` stored: consecutive seqs, named ``FIRST-LAST``
(``diagevo memory events`` shows them; ``round record`` and ``diagnose`` say which they
appended). Questions are withdrawn while the round's promotions are undecided (they close its
evidence), failures while none of them is diagnosed (a diagnosis may have changed the memory);
never after the commit, never twice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from diagevo.catalog import BatchWithdrawn, Event, FailureRecorded, QuestionGenerated, of_type
from diagevo.log import AppendResult, EventReader, StoredEvent
from diagevo.rounds.failures import DIAGNOSES
from diagevo.rounds.protocol import OutOfOrder, ProtocolError, Reader
from diagevo.rounds.state import RunState
from diagevo.schemas import EventIn
from diagevo.text.parsing import quoted
from diagevo.views.stats import count_rounds
from diagevo.views.withdrawn import WITHDRAWABLE, Withdrawn, recorded_batches

MAX_SEQ = 2**63 - 1
_BATCH = re.compile(r"([0-9]{1,19})(?:-([0-9]{1,19}))?")
"""``FIRST-LAST`` or one seq: ASCII digits, at most a 64-bit seq's nineteen."""


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch as a command names it: its first and last seq."""

    first: int
    last: int

    @classmethod
    def parse(cls, text: str) -> Batch:
        """``FIRST-LAST`` (or one seq), as ``round record`` and ``memory events`` show seqs."""
        found = _BATCH.fullmatch(str(text).strip())
        if found is None:  # ASCII digits, as many as a seq has: "²" and a 5,000-digit number are no seq
            raise ProtocolError(f"batch {quoted(text, 40)} is not FIRST-LAST, the seqs of its first and last event")
        batch = cls(int(found[1]), int(found[2] or found[1]))
        if batch.first < 1 or batch.last < batch.first:
            raise ProtocolError(f"batch {quoted(text, 40)}: its last seq must not be before its first, both from 1")
        if batch.last > MAX_SEQ:
            raise ProtocolError(f"batch {quoted(text, 40)}: no seq is past {MAX_SEQ:,} (a 64-bit integer)")
        return batch

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


def withdrawal(store: EventReader, run: str, t: int, st: RunState, batch: Batch, reason: str) -> BatchWithdrawn:
    """The ``batch.withdrawn`` that takes ``batch`` back from round ``t`` of ``run``, decided
    against the log's head (``st``: the round's milestones read under the append lock); each
    refusal one line naming the batch: not a batch of the round (unknown), not one recorded batch
    whole (:func:`~diagevo.views.withdrawn.recorded_batches`: it cuts one, or runs into the next),
    withdrawn already, of questions after the promotions, of failures one of which is diagnosed."""
    rows = list(store.rows(run, after_seq=batch.first - 1, upto_seq=batch.last))
    what = f"batch {batch} of round {t} of run {run!r}"
    if not rows:
        raise ProtocolError(f"{what}: the run holds no event at those seqs (memory events shows a round's seqs)")
    for e in rows:
        if e.round != t or e.type not in {cls.name for cls in WITHDRAWABLE}:
            raise ProtocolError(
                f"{what}: seq {e.seq} is a {e.type} of round {e.round}, and a batch withdrawn holds only the round's "
                "recorded questions or failures"
            )
    touched = [
        Batch(*span) for span in recorded_batches(store, run, t) if span[0] <= batch.last and batch.first <= span[1]
    ]
    if touched != [batch]:
        said = (
            f"batch {touched[0]}"
            if len(touched) == 1
            else f"batches {', '.join(map(str, touched[:-1]))} and {touched[-1]}"
        )
        raise ProtocolError(
            f"{what} is not one recorded batch: it touches {said} (a withdrawal takes back one recorded batch whole)"
        )
    done = Withdrawn.of(store, run, t).overlapping(t, batch.first, batch.last)
    if done is not None:
        raise OutOfOrder(f"{what} is withdrawn already (seqs {done[0]}-{done[1]})")
    questions = [q.question_id for q in of_type(QuestionGenerated, rows)]
    failures = [f.failure_id for f in of_type(FailureRecorded, rows)]
    if questions and failures:
        raise ProtocolError(f"{what} holds questions and failures: withdraw one batch at a time")
    if questions and t in st.promoted:
        raise OutOfOrder(f"cannot withdraw {what}: its promotions are decided (the questions' evidence is closed)")
    diagnosed = _diagnosed(store, run, t, failures)
    if diagnosed:
        raise OutOfOrder(f"cannot withdraw {what}: failure {diagnosed!r} is diagnosed (the memory may follow from it)")
    counts = {k: v for k, v in count_rounds(rows).get(t, {}).items() if v}
    return BatchWithdrawn(
        first_seq=batch.first, last_seq=batch.last, questions=questions, failures=failures, counts=counts, reason=reason
    )


def _diagnosed(store: EventReader, run: str, t: int, failures: Sequence[str]) -> str | None:
    """The first of ``failures`` the round holds a diagnosis of, or None."""
    if not failures:
        return None
    rows = store.rows(run, types=DIAGNOSES, in_round=t, keys={"failure_id": list(failures)})
    return next((d.failure_id for d in of_type(DIAGNOSES, rows) if d.failure_id in failures), None)


def batch_of(done: AppendResult) -> str | None:
    """The batch an append stored (``FIRST-LAST``: one transaction under the append lock, so
    consecutive seqs), None where it stored nothing (a retry)."""
    return str(Batch(done.last_seq - done.appended + 1, done.last_seq)) if done.appended else None


def standing(read: Reader, types: type[Event] | tuple[type[Event], ...], t: int) -> list[StoredEvent]:
    """Round ``t``'s rows of ``types`` read at the log's head, those a withdrawal took back left out."""
    wanted = types if isinstance(types, tuple) else (types,)
    rows = read((*wanted, BatchWithdrawn), t=t)
    return list(Withdrawn.from_rows(rows).standing(r for r in rows if r.type != BatchWithdrawn.name))


def rekeyed(store: EventReader, run: str, events: Sequence[EventIn]) -> list[EventIn]:
    """``events``, each whose id the run holds on an event a withdrawal took back given the
    next free id (``ID~1``, ``ID~2``...): the same question or failure recorded again after a
    withdrawal is a new event, and its retry the same one again (a no-op)."""
    withdrawn = Withdrawn.of(store, run)
    if not withdrawn.ranges:
        return list(events)
    most = sum(map(len, withdrawn.ranges.values()))  # each withdrawal frees an id at most once
    tries = {ev.event_id: [ev.event_id, *(f"{ev.event_id}~{k}" for k in range(1, most + 1))] for ev in events}
    every = [i for ids in tries.values() for i in ids]
    held: dict[str, StoredEvent] = {e.event_id: e for e in store.read(run, keys={"event_id": every})}
    out = []
    for ev in events:
        free = next(i for i in tries[ev.event_id] if i not in held or not withdrawn.holds(held[i]))
        out.append(ev if free == ev.event_id else replace(ev, event_id=free))
    return out
