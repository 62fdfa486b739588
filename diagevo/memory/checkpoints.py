"""The checkpoint rule: which checkpoint a ``checkpoint.written`` or ``checkpoint.pruned`` names,
and whether the run may name it there. Stated once (:func:`checkpoint_rule`), kept by one
:class:`CheckpointTally`, which the counting rules (:mod:`diagevo.memory.counting`: ``memory
verify``, ingest, ``Round.note``) and every reader of checkpoints (:func:`checkpoint_verdicts`: a
resume, a fork, pruning, eval, the sizes a report shows) take the events through. An event the
rule refuses counts for nothing after it: a verifier names it, a reader passes it over.

Apart from the counting rules, whose config models and deciders a read command does not load."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from diagevo.catalog import CheckpointPruned, CheckpointWritten, Event, RoundCommitted, RoundStarted
from diagevo.files.confined import checkpoint_name, checkpoint_problem
from diagevo.memory.fold import Row

CHECKPOINT_TYPES: tuple[type[Event], ...] = (CheckpointWritten, CheckpointPruned)
CHECKPOINT_READS: tuple[type[Event], ...] = (*CHECKPOINT_TYPES, RoundStarted, RoundCommitted)
"""What a reader of checkpoints reads of a run: its checkpoint events and the rounds it opened and
committed (the loop writes a checkpoint in a round the run has open)."""
CHECKPOINT_PHASES = ("challenger", "solver")
"""The phases after which the training loop writes a checkpoint (both models, ``roundNNN-phase``)."""
MAX_BYTES = 2**63 - 1
"""The largest size a checkpoint event holds: a 64-bit count of bytes."""
SIZED, NAMED, OPENED, PRUNED = CHECKPOINT_RULES = (
    "checkpoint size a count of bytes",
    "checkpoint named by its event",
    "checkpoint of an open round",
    "checkpoint pruned once written",
)
"""The names of the rules :func:`checkpoint_rule` states, as a break names them."""

Broken = tuple[str, str] | None
"""(rule, reason) of the rule an event breaks, or None."""


def checkpoint_rule(
    rnd: int,
    event: CheckpointWritten | CheckpointPruned,
    written: Mapping[str, str],
    latest: Mapping[str, str],
    *,
    opened: bool = True,
) -> Broken:
    """(rule, reason) when a checkpoint event (of round ``rnd``) names a checkpoint its event
    does not give, else None. ``written``: checkpoint -> its phase, of every ``checkpoint.written``
    before the event that the rule took; ``latest``: phase -> its checkpoint written last (what a
    resume loads); ``opened``: round ``rnd`` is open (started, not committed), as it is where the
    loop writes. A name taken on trust would have a resume load another round's or role's weights,
    or look for a folder that was never written or is still needed; a size that is no count of
    bytes would stop what sums them."""
    path = event.path
    name = checkpoint_name(path)
    shown = name if name is not None else repr(path)[:80]
    size = getattr(event, "bytes", None)
    if size is not None and (type(size) is not int or not 0 <= size <= MAX_BYTES):
        return SIZED, (
            f"{event.name} of round {rnd} holds bytes {repr(size)[:40]}, not a whole number from 0 to 2^63-1"
        )
    if isinstance(event, CheckpointWritten):
        phase = event.phase
        if name is None:
            return NAMED, str(checkpoint_problem(path))
        if phase not in CHECKPOINT_PHASES:
            return NAMED, (
                f"checkpoint.written of round {rnd} names phase {repr(phase)[:40]}, not challenger or solver"
            )
        want = f"round{rnd:03d}-{phase}"
        if name != want:
            return NAMED, (f"checkpoint.written of round {rnd} after {phase} names {shown}, not {want}")
    if not opened:
        return OPENED, (
            f"{event.name} of round {rnd} names {shown}, but round {rnd} is not open (started, not committed)"
        )
    if isinstance(event, CheckpointWritten):
        return None
    phase = written.get(name) if name is not None else None
    if phase is None:
        return PRUNED, f"checkpoint.pruned names {shown}, which the run never wrote before it"
    if latest.get(phase) == name:
        return PRUNED, (f"checkpoint.pruned names {name}, the latest checkpoint of {phase}: what a resume loads")
    return None


@dataclass(slots=True)
class CheckpointTally:
    """The checkpoints a run wrote, as the rule took them: each checkpoint's phase and the latest
    of each phase. :meth:`take` checks an event and counts it only when the rule takes it."""

    written: dict[str, str] = field(default_factory=dict)  # checkpoint -> its phase
    latest: dict[str, str] = field(default_factory=dict)  # phase -> its checkpoint written last

    def take(self, rnd: int, event: CheckpointWritten | CheckpointPruned, *, opened: bool) -> Broken:
        broken = checkpoint_rule(rnd, event, self.written, self.latest, opened=opened)
        if broken is None and isinstance(event, CheckpointWritten):
            name = checkpoint_name(event.path)
            assert name is not None and isinstance(event.phase, str)  # the rule holds them
            self.written[name], self.latest[event.phase] = event.phase, name
        return broken


def checkpoint_verdicts(rows: Iterable[Row]) -> Iterator[tuple[Row, Broken]]:
    """Each checkpoint event of ``rows`` (a run's :data:`CHECKPOINT_READS`, in log order) with
    the rule it breaks (None: the rule takes it): the one pass every reader of checkpoints makes."""
    tally = CheckpointTally()
    started: set[int] = set()
    committed: set[int] = set()
    for row in rows:
        rnd, name = row.round, row.type
        if name == RoundStarted.name:
            started.add(rnd)
        elif name == RoundCommitted.name:
            committed.add(rnd)
        elif name in (CheckpointWritten.name, CheckpointPruned.name):
            event = row.event
            assert isinstance(event, CheckpointWritten | CheckpointPruned)
            yield row, tally.take(rnd, event, opened=rnd in started and rnd not in committed)
