"""Which stored rows of a run the rules take: decided once, by the fold, for every reader.

Whoever writes a log may append rows the rules refuse (the database keeps the log whole, not its
meaning: a forged second ``cause.created``, a commit of a round that never ran, a config written
after its round was committed). The fold decides which rows it takes and keeps the refusals with
the memory it makes (:attr:`~diagevo.memory.Memory.refused`, saved in each snapshot), so the
question "does the log's row at seq N count?" has one answer, here, whichever reader asks: the
story of a cause (``memory why``), the config and the last commit a resumed run trains from.

Whether the fold takes a milestone (a round's opening, promotions or commit) or a config depends
on the milestones and configs before it alone (the order of rounds, a positive k): those are
decided from those rows (:func:`~diagevo.views.memory.bearings`), a few per round, without folding
the causes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from diagevo.log import Recorder
from diagevo.memory.state import Refusal
from diagevo.views.memory import load_memory


class _Seq(Protocol):
    @property
    def seq(self) -> int: ...


R = TypeVar("R", bound=_Seq)


@dataclass(frozen=True)
class Admission:
    """The rows of ``run`` the rules refused, up to seq ``seq`` (the log's head when read)."""

    run: str
    seq: int
    refusals: tuple[Refusal, ...]
    refused: frozenset[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "refused", frozenset(r.seq for r in self.refusals))

    def admits(self, seq: int) -> bool:
        """Whether the row at ``seq`` counts (one past ``seq`` is not decided here)."""
        return seq not in self.refused

    def admitted(self, rows: Iterable[R]) -> Iterator[R]:
        """``rows`` of this run, those the rules refused left out."""
        refused = self.refused
        return (row for row in rows if row.seq not in refused) if refused else iter(rows)


def admission(store: Recorder, run: str) -> Admission:
    """The run's admission at the log's head: the memory's refusals (from its latest snapshot
    and the rows after it), each named once to the command that reads it."""
    memory = load_memory(store, run)
    return Admission(run, memory.last_seq, memory.refused)
