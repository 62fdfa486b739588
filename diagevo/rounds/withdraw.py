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
from diagevo.rounds.protocol import OutOfOrder, ProtocolError, Reader
from diagevo.rounds.state import RunState
from diagevo.schemas import EventIn
from diagevo.text.parsing import quoted
from diagevo.views.stats import count_rounds
from diagevo.views.withdrawn import Withdrawn, withdrawal_problem

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
    refusal one line naming the batch (:func:`~diagevo.views.withdrawn.withdrawal_problem`, the
    rule every reader holds a stored withdrawal to): for what it names a :class:`ProtocolError`,
    for when it comes (after the promotions, a diagnosis) an :class:`OutOfOrder`."""
    problem = withdrawal_problem(store, run, t, batch.first, batch.last)
    if problem is not None:
        raise (OutOfOrder if problem.late else ProtocolError)(problem.why)
    rows = list(store.rows(run, after_seq=batch.first - 1, upto_seq=batch.last))
    counts = {k: v for k, v in count_rounds(rows).get(t, {}).items() if v}
    return BatchWithdrawn(
        first_seq=batch.first,
        last_seq=batch.last,
        questions=[q.question_id for q in of_type(QuestionGenerated, rows)],
        failures=[f.failure_id for f in of_type(FailureRecorded, rows)],
        counts=counts,
        reason=reason,
    )


def batch_of(done: AppendResult) -> str | None:
    """The batch an append stored (``FIRST-LAST``: one transaction under the append lock, so
    consecutive seqs), None where it stored nothing (a retry)."""
    return str(Batch(done.last_seq - done.appended + 1, done.last_seq)) if done.appended else None


def standing(
    store: EventReader, run: str, read: Reader, types: type[Event] | tuple[type[Event], ...], t: int
) -> list[StoredEvent]:
    """Round ``t``'s rows of ``types`` read at the log's head, those a lawful withdrawal took back
    left out (:class:`~diagevo.views.withdrawn.Withdrawn`)."""
    wanted = types if isinstance(types, tuple) else (types,)
    return list(Withdrawn.of(store, run, t).standing(read(wanted, t=t)))


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
