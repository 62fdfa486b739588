"""ProtocolError and its kinds, the ids of a round's events, and the one way a round step
writes: a decision read at the log's head and appended under the append lock."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from diagevo.catalog import (
    Event,
    EventTypes,
)
from diagevo.catalog import ids as keys
from diagevo.errors import BadInput, Conflict, NotFound, start_call
from diagevo.log import AppendResult, EventReader, Recorder, StoredEvent
from diagevo.schemas import EventIn, new_event
from diagevo.text.urls import redact_url
from diagevo.text.words import did_you_mean


class ProtocolError(BadInput):
    """A round operation with input that does not fit the round (a type, an id, content the
    round holds otherwise), or out of order (:class:`OutOfOrder`)."""


class OutOfOrder(ProtocolError):
    """A step out of the documented order: recording into a round whose promotions are decided
    or that is committed, failures before the promotions, promoting twice, committing before the
    promotions or with failures undiagnosed. ``Round.open(...).next_step`` says what comes next."""


class MemoryMoved(Conflict):
    """Another producer changed the memory since the decisions were taken: decide again."""


class UnknownRun(ProtocolError, NotFound):
    """A step for a run the log does not hold."""


def round_event(run: str, t: int, key: str, event: Event) -> EventIn:
    """``event`` of round ``t``, under the id ``key`` gives it: the same on every retry."""
    return new_event(event, run=run, at_round=t, event_id=keys.event_id(run, t, key))


Reader = Callable[..., list[StoredEvent]]
"""What a decision reads: ``read(types, *, t=None, after_seq=0)`` (``t``: one round) -> the run's rows."""


def append_decision(store: Recorder, run: str, decide: Callable[[Reader], Sequence[EventIn]]) -> AppendResult:
    """Append the events ``decide`` returns, having let it read ``run`` at the log's head, under
    the append lock: one decision, no writer in between."""

    def read(types: EventTypes | None, *, t: int | None = None, after_seq: int = 0) -> list[StoredEvent]:
        return list(store.rows(run, types=types, in_round=t, after_seq=after_seq))

    try:
        return store.append_decided(lambda: decide(read))
    except UnknownRun:
        raise unknown_run(store, run) from None


def unknown_run(store: EventReader, run: str) -> UnknownRun:
    """``no run 'huer' in URL (did you mean 'heur'?): start it ...``: the Python call for a
    Python caller, ``round start`` on the command line."""
    runs = store.runs()
    return UnknownRun(
        f"no run {run!r} in {redact_url(store.url)}{did_you_mean(run, runs)}: start it with",
        start_call(run),
        value=run,
        allowed=tuple(runs),
    )
