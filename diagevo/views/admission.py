"""Which stored rows of a run the rules take: decided once, here, for every reader.

Whoever writes a log may append rows the rules refuse (the database keeps the log whole, not its
meaning): a raw row no reader can take (a round or version of another type, data past the readers'
bounds or out of its type's shape), a forged second ``cause.created``, a commit of a round that
never ran, a config written after its round was committed or one no reader can use, a checkpoint
event the checkpoint rule refuses, a ``run.forked`` that marks nothing. The question "does the
log's row at seq N count?" has one answer, :func:`admission`, whichever reader asks: the story of a
cause (``memory why``), the report, ``diagevo runs``, the config and the last commit a resumed run
trains from, what a fork or a what-if copies. Every command names the refusals of the runs it read
the same way (:func:`~diagevo.results.runs.passed_line`).

The fold decides the most (:attr:`~diagevo.memory.Memory.refused`, saved in each snapshot: the rows
no reader can take, the counting and evidence rules, the order of rounds); the checkpoint, config
and fork-marker rules read a few rows by type (:func:`~diagevo.views.checkpoints.checkpoint_log`,
:func:`~diagevo.views.configs.config_refusals`, :func:`~diagevo.views.forks.marker_refusals`), as
does the withdrawal rule (:class:`~diagevo.views.withdrawn.Withdrawn`: a withdrawal of half a batch,
or after the round's promotions, a diagnosis or its commit, is applied by no reader).
Whether the fold takes a milestone or a config depends on the milestones and configs before it
alone: those are decided from those rows (:func:`~diagevo.views.memory.bearings`), a few per round,
without folding the causes. The admission of a run is kept per recorder until the run's head moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, Unpack
from weakref import WeakKeyDictionary

from diagevo.log import Recorder, StoredEvent
from diagevo.log.recorder import Filters
from diagevo.memory.fold import InvariantError, NotStarted
from diagevo.memory.state import Refusal
from diagevo.results.runs import passed_line
from diagevo.views.checkpoints import checkpoint_log
from diagevo.views.configs import config_refusals
from diagevo.views.forks import marker_refusals
from diagevo.views.memory import load_memory
from diagevo.views.withdrawn import Withdrawn


class _Seq(Protocol):
    @property
    def seq(self) -> int: ...


R = TypeVar("R", bound=_Seq)


@dataclass(frozen=True)
class Admission:
    """The rows of ``run`` the rules refused, in log order, up to seq ``seq`` (its head when read)."""

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

    def lines(self) -> list[str]:
        """Each refusal as every command names it (:func:`~diagevo.results.runs.passed_line`)."""
        return [passed_line(self.run, r.seq, r.why) for r in self.refusals]


_KEPT: WeakKeyDictionary[Recorder, dict[str, Admission]] = WeakKeyDictionary()


def admission(store: Recorder, run: str) -> Admission:
    """The run's admission at the log's head, decided once per head: the memory's refusals (from its
    latest snapshot and the rows after it) and the checkpoint, config and fork-marker rules'."""
    head = store.last_seq(run)
    if not head:  # a run the log does not hold: nothing to refuse
        return Admission(run, 0, ())
    kept = _KEPT.setdefault(store, {})
    found = kept.get(run)
    if found is None or found.seq != head:
        found = kept[run] = Admission(run, head, _refusals(store, run))
    return found


def admitted_rows(
    store: Recorder, run: str, *, texts: bool = False, **filters: Unpack[Filters]
) -> Iterator[StoredEvent]:
    """:meth:`~diagevo.log.EventReader.rows` of ``run`` as the rules admit them: a row the run's
    admission refuses left out, and the questions and failures a lawful withdrawal took back (the
    round reads as if they were never recorded). The read of every reader but the log, the fold
    and verify: an export, a dataset, the diagnosis, a report never meets a refused row."""
    rows = admission(store, run).admitted(store.rows(run, texts=texts, **filters))
    return Withdrawn.of(store, run).standing(rows)


def _refusals(store: Recorder, run: str) -> tuple[Refusal, ...]:
    try:
        folded = load_memory(store, run).refused
    except NotStarted as exc:  # no row of the run is one the fold can start from
        folded = exc.refused
    except InvariantError as exc:  # a run.started the fold cannot start from: the run folds nothing
        first = next(store.rows(run, limit=1, data=False), None)
        said = str(exc).removeprefix(f"seq {first.seq}: ") if first is not None else ""
        folded = (Refusal(first.seq, first.type, said),) if first is not None else ()
    ruled = (
        *_ahead_of_the_log(store, run),
        *checkpoint_log(store, run).refused,
        *config_refusals(store, run),
        *marker_refusals(store, run),
        *Withdrawn.of(store, run).refused,
    )
    found = {r.seq: r for r in folded}
    for r in ruled:
        found.setdefault(r.seq, r)
    return tuple(found[seq] for seq in sorted(found))


def _ahead_of_the_log(store: Recorder, run: str) -> list[Refusal]:
    """The rows stored at a seq below 1 (a raw INSERT into SQLite may give any): ahead of the
    run's start, where no writer of the log puts a row, and below any snapshot the fold starts
    from. One indexed read; none in a log diagevo wrote."""
    return [
        Refusal(row.seq, row.type, f"its seq {row.seq} lies ahead of the run's start (a writer gives seq 1 on)")
        for row in store.rows(run, upto_seq=0, data=False)
    ]
