"""What a round refuses under the append lock: a question or failure again with other content, a
failure id reused across rounds, evidence counted twice, an event of a type the step does not take."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from diagevo.catalog import (
    CauseCreated,
    CauseReactivated,
    CheckpointPruned,
    CheckpointWritten,
    DiagnosisFailed,
    Event,
    FailureAttributed,
    FailureDiagnosed,
    FailureRecorded,
    LLMCalled,
    NodeCreated,
    NodesMerged,
    PhaseCompleted,
    TrainStep,
)
from diagevo.errors import withdraw_call
from diagevo.log import EventReader
from diagevo.memory.counting import Ledger
from diagevo.memory.state import Memory
from diagevo.rounds.failures import FAILURE_FIELDS, FAILURE_TYPES
from diagevo.rounds.protocol import ProtocolError
from diagevo.schemas import EventIn
from diagevo.text.parsing import quoted
from diagevo.views.counts import stored_tally
from diagevo.views.withdrawn import Withdrawn, batch_holding


def refuse_other_content(
    store: EventReader, run: str, t: int, events: Sequence[EventIn], closed: Callable[[str], Exception] | None = None
) -> None:
    """Refuse (:class:`ProtocolError`, or ``closed(what)``: the round's evidence is closed) when round
    ``t`` holds one of ``events``' ids with other data: a question id recorded again with another text,
    mode, cause or votes would leave the trainer holding a question the log does not (the same data
    again is a retry, skipped by the append). Called from inside a decision, under the append lock."""
    wanted = {ev.event_id: ev for ev in events}
    if not wanted:
        return
    for e in store.read(run, in_round=t, keys={"event_id": list(wanted)}, texts=True):
        ev = wanted.get(e.event_id)
        if ev is None:
            continue
        stored, given = e.event, ev.event
        if stored == given:
            continue
        # a text over the limit is stored cut: two texts that differ past the cut differ in what was cut
        field = next(
            (
                n
                for n in type(given).model_fields
                if getattr(stored, n, None) != getattr(given, n) or stored.cut.get(n) != given.cut.get(n)
            ),
            "type",
        )
        what = getattr(given, "question_id", e.event_id)
        said = f"question {quoted(what, 80)} is recorded in round {t} of run {run!r} already with another {field}"
        if closed is not None:
            raise closed(said)
        raise _already(store, run, t, e.seq, said, "recording the same question again is a no-op")


def _already(store: EventReader, run: str, t: int, seq: int, said: str, aside: str) -> ProtocolError:
    """The refusal of an id the round holds with other content, naming the recorded batch that
    holds it and the withdrawal that takes that batch back (the way to record the file again)."""
    span = batch_holding(store, run, t, seq)
    if span is None:  # no batch of a record holds it (a raw row): a new id is the way
        return ProtocolError(f"{said} (give it a new id{'; ' + aside if aside else ''})")
    batch = f"{span[0]}-{span[1]}"
    return ProtocolError(
        f"{said}, in batch {batch} (give it a new id{'; ' + aside if aside else ''}), or take that batch back with",
        withdraw_call(run, batch),
    )


def refuse_reused_failures(store: EventReader, run: str, t: int, given: Mapping[str, FailureRecorded | None]) -> None:
    """Refuse failure ids the run holds in another round (recorded or diagnosed there), or in
    round ``t`` recorded with other content (``given[id]``: the event that would record it, None
    to skip that check). A failure id names one failure of the run: diagnosed twice it would be counted
    twice. Called from inside a decision, under the append lock."""
    if not given:
        return
    elsewhere: dict[str, tuple[str, int]] = {}  # failure -> what another round did with it (diagnosed first)
    held = store.read(run, types=FAILURE_TYPES, keys={"failure_id": list(given)}, texts=True)
    for e in Withdrawn.of(store, run).standing(held):  # a failure withdrawn was never recorded
        event = e.event
        fid = getattr(event, "failure_id", None)
        if not isinstance(fid, str) or fid not in given:
            continue
        if e.round != t:
            what = "recorded" if isinstance(event, FailureRecorded) else "diagnosed"
            if what == "diagnosed" or fid not in elsewhere:
                elsewhere[fid] = (what, e.round)
            continue
        record = given[fid]
        if isinstance(event, FailureRecorded) and record is not None:
            field = next((n for n in FAILURE_FIELDS if getattr(event, n) != getattr(record, n)), None)
            if field is not None:
                said = f"failure {fid!r} is recorded in round {t} already with another {field}"
                raise _already(store, run, t, e.seq, said, "")
    for fid in given:
        if fid in elsewhere:
            what, other = elsewhere[fid]
            raise ProtocolError(
                f"failure {fid!r} was {what} in round {other} of run {run!r} already: a failure id names one "
                "failure of the run (give new failures new ids)"
            )


NOTE_TYPES: frozenset[type[Event]] = frozenset({PhaseCompleted, CheckpointWritten, CheckpointPruned, TrainStep})
"""What :meth:`Round.note` takes: the trainer's bookkeeping, which changes no count."""

DIAGNOSIS_TYPES: frozenset[type[Event]] = frozenset(
    {
        *(FailureDiagnosed, DiagnosisFailed, LLMCalled, FailureRecorded),  # the diagnostician's decisions and notes
        *(FailureAttributed, CauseReactivated, CauseCreated, NodeCreated, NodesMerged),  # its deciders' events
    }
)
"""What :meth:`Round.append_diagnosis` takes: the diagnostician's decisions and notes, and the
memory events its deciders return (never a promotion, a config or a milestone); and
``failure.recorded`` in a round never opened (in an open round, :meth:`Round.record_failures`
records them, each of a retained question)."""


def refuse_other_type(allowed: frozenset[type[Event]], name: str, what: str) -> None:
    """Refuse an event type (by its name) that ``allowed`` does not hold, naming those it does."""
    names = {cls.name for cls in allowed}
    if name not in names:
        raise ProtocolError(f"{what} cannot be {quoted(name, 60)} (it takes {', '.join(sorted(names))})")


def refuse_counted_twice(store: EventReader, run: str, events: Sequence[EventIn], memory: Memory | None = None) -> None:
    """Refuse events that would count evidence twice or decide what no evidence stands behind
    (:mod:`diagevo.memory.counting`) against what the run holds: a failure diagnosed or
    attributed again, an attribution or a new cause of a failure the run never recorded or
    diagnosed so, a question generated in another round, a checkpoint its event does not name.
    With ``memory`` (the memory at the log's head, or M_{t-1} for questions) the rules that read
    it too, and the memory events folded on it (a state transition the fold refuses is refused
    here). Those the run holds already under the same id (a retry) are skipped, as the append
    skips them. Called under the lock."""
    held = store.existing_ids(run, [ev.event_id for ev in events])
    fresh = [ev for ev in events if ev.event_id not in held]
    tally = stored_tally(store, run, fresh)
    ledger = Ledger.folded(run, tally, memory) if memory is not None else Ledger(run, tally)
    for ev in fresh:
        taken = ledger.take(ev.round, ev.event)
        if taken.counted is not None:
            raise ProtocolError(f"{ev.type} refused: {taken.counted[0]}: {taken.counted[1]}")
        if taken.refusal is not None:
            raise ProtocolError(f"{ev.type} refused: {taken.refusal.why}")
