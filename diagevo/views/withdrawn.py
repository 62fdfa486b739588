"""Which of a run's recorded questions and failures a ``batch.withdrawn`` took back: the one
statement of the rule every reader of a round's questions and failures applies (the promotions,
the diagnosis, the export and the dump reader, the round's refusals), so that a round reads as if
the withdrawn batch had never been recorded. A withdrawal names the seqs it takes back, so the
same ids recorded again afterwards (later seqs) stand."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from diagevo.catalog import BatchWithdrawn, FailureRecorded, QuestionGenerated, QuestionScored
from diagevo.log import EventReader

WITHDRAWABLE = (QuestionGenerated, QuestionScored, FailureRecorded)
"""What a batch of recorded evidence holds: what ``batch.withdrawn`` may take back."""
_NAMES = frozenset(cls.name for cls in WITHDRAWABLE)


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
    """The seq ranges the run's withdrawals took back, per round."""

    ranges: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    @classmethod
    def of(cls, store: EventReader, run: str, t: int | None = None) -> Withdrawn:
        """The withdrawals of ``run`` (of round ``t`` alone where given), read from the log."""
        return cls.from_rows(store.rows(run, types=(BatchWithdrawn,), in_round=t))

    @classmethod
    def from_rows(cls, rows: Iterable[Placed]) -> Withdrawn:
        """The withdrawals among ``rows`` (rows of other types are passed by, unbuilt)."""
        ranges: dict[int, list[tuple[int, int]]] = {}
        for row in rows:
            if row.type == BatchWithdrawn.name:
                ev = row.event  # type: ignore[attr-defined]
                ranges.setdefault(row.round, []).append((ev.first_seq, ev.last_seq))
        return cls(ranges)

    def holds(self, row: Placed) -> bool:
        """Whether ``row`` is one of the recorded questions or failures a withdrawal took back."""
        spans = self.ranges.get(row.round)
        return bool(spans) and row.type in _NAMES and any(a <= row.seq <= b for a, b in spans or ())

    def standing(self, rows: Iterable[R]) -> Iterator[R]:
        """``rows`` but those a withdrawal took back."""
        return (row for row in rows if not self.holds(row)) if self.ranges else iter(rows)

    def overlapping(self, t: int, first: int, last: int) -> tuple[int, int] | None:
        """A range of round ``t`` withdrawn already that meets ``first``..``last``, or None."""
        return next((span for span in self.ranges.get(t, ()) if span[0] <= last and first <= span[1]), None)


def recorded_batches(store: EventReader, run: str, t: int) -> list[tuple[int, int]]:
    """Round ``t``'s recorded batches, each (first seq, last seq), in log order: what one append
    of the round's questions or failures stored (consecutive seqs under one ``recorded_at``, the
    stamp of its transaction), those withdrawn included. A withdrawal takes back one of them
    whole (:func:`~diagevo.rounds.withdraw.withdrawal`)."""
    spans: list[tuple[int, int]] = []
    stamp = None
    for e in store.read(run, types=WITHDRAWABLE, in_round=t):
        if spans and e.seq == spans[-1][1] + 1 and e.recorded_at == stamp:
            spans[-1] = (spans[-1][0], e.seq)
        else:
            spans.append((e.seq, e.seq))
            stamp = e.recorded_at
    return spans


def batch_holding(store: EventReader, run: str, t: int, seq: int) -> tuple[int, int] | None:
    """The recorded batch of round ``t`` that holds the row at ``seq`` (None: no batch does)."""
    return next((span for span in recorded_batches(store, run, t) if span[0] <= seq <= span[1]), None)
