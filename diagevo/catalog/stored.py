"""An event as the log holds it (:class:`StoredEvent`): its place in the log around its typed
event, one type for every read (a fold's light rows and a full read alike), the event built from
the stored data once. Here, beside the classes, because every layer that reads events takes it:
the fold (:mod:`diagevo.memory`) below the log, the log that makes it, the views above."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from diagevo.catalog.event import _READERS, Event
from diagevo.catalog.registry import CATALOG


class Stamp(NamedTuple):
    """Where a stored event sits in the log beyond its seq and round: its id, its run, when it
    was appended and its place in the run's hash chain (what :meth:`~diagevo.log.EventReader.read` reads and
    :meth:`~diagevo.log.EventReader.rows`, a fold's lighter read, leaves out)."""

    event_id: str
    run: str
    recorded_at: str
    prev_hash: str
    hash: str


class UnreadableRow(NamedTuple):
    """A stored row no reader can take (its columns or its data out of shape: written raw where no
    check guards the table), as the fold's read gives it (:func:`~diagevo.log.recorder.every_row`;
    every other read leaves it out): its seq, its type as stored (text) and why. The fold refuses it as it refuses
    a row its rules refuse, so the run's admission names it (:mod:`diagevo.views.admission`)."""

    seq: int
    type: str
    why: str


@dataclass(slots=True)
class StoredEvent:
    """A stored event as every reader gets it: its place in the log (seq, round, its type's
    name, the ``version`` of its class it was stored at) around the typed :attr:`event`, built
    from the stored data once, on first access (a fold reads a million rows and builds only the
    events it applies). :meth:`~diagevo.log.EventReader.read` gives it with its :class:`Stamp` (id, run, hash
    chain); :meth:`~diagevo.log.EventReader.rows` without. Its data as stored stays inside the log and the
    interchange (:func:`diagevo.log.payload`)."""

    seq: int
    round: int
    type: str
    version: int
    _data: dict[str, Any] | None = field(default=None, repr=False)
    _stamp: Stamp | None = field(default=None, repr=False)
    _event: Event | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, seq: int, round_: int, event: Event) -> StoredEvent:
        """The stored-event form of an event already typed (one not yet appended: a producer's
        pending events, folded with the log's; ``seq`` 0)."""
        return cls(seq, round_, event.name, event.class_version, None, None, event)

    @property
    def event(self) -> Event:
        """The typed event (:func:`~diagevo.catalog.stored_event`), built on first access: the long
        texts are their stored references unless the read put them back."""
        event = self._event
        if event is None:
            data = self._data
            if data is None:
                raise LookupError(f"the event at seq {self.seq} was read without its data (rows(data=False))")
            # stored_event, inline: a fold reads a million rows
            event = self._event = _READERS[CATALOG[self.type]](data, self.version)
        return event

    @property
    def stamp(self) -> Stamp:
        stamp = self._stamp
        if stamp is None:
            raise LookupError(f"the event at seq {self.seq} was read without its stamp (rows(), not read())")
        return stamp

    @property
    def event_id(self) -> str:
        return self.stamp.event_id

    @property
    def run(self) -> str:
        return self.stamp.run

    @property
    def recorded_at(self) -> str:
        return self.stamp.recorded_at

    @property
    def prev_hash(self) -> str:
        return self.stamp.prev_hash

    @property
    def hash(self) -> str:
        return self.stamp.hash


class Typed(Protocol):
    """What a read gives (a stored event, an event in its envelope): its type's name and its
    typed event."""

    @property
    def type(self) -> str: ...

    @property
    def event(self) -> Event: ...


E = TypeVar("E", bound=Event)


def of_type(cls: type[E] | tuple[type[E], ...], events: Iterable[Typed]) -> Iterator[E]:
    """The typed events of class ``cls`` (or of one of these classes) among ``events``: the one
    way a reader takes events of a class, matching on the class and reading attributes, never
    the stored data by key."""
    names = {c.name for c in cls} if isinstance(cls, tuple) else {cls.name}
    for e in events:
        if e.type in names:  # the name first: an event of another type is never built
            yield cast(E, e.event)
