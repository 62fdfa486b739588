"""The one way a reader takes events of a class from what the log gives (a stored event, a row,
an event in its envelope): :func:`of_type` among many, :func:`typed` of one, :func:`last_event` of
a run. Light: a read command imports it without the envelope's pydantic model
(:mod:`diagevo.schemas`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar, cast

from diagevo.catalog import Event
from diagevo.log import EventReader


class Typed(Protocol):
    """What a read gives (a stored event, a row, an event in its envelope): its type's name and
    its typed event."""

    @property
    def type(self) -> str: ...

    @property
    def event(self) -> Event: ...


E = TypeVar("E", bound=Event)


def of_type(cls: type[E] | tuple[type[E], ...], events: Iterable[Typed]) -> Iterator[E]:
    """The typed events of class ``cls`` (or of one of these classes) among ``events``: a reader
    matches on the class and reads attributes, never the stored data by key."""
    names = {c.name for c in cls} if isinstance(cls, tuple) else {cls.name}
    for e in events:
        if e.type in names:  # the name first: an event of another type is never built
            yield cast(E, e.event)


def typed(cls: type[E], row: Typed) -> E:
    """The event of ``row``, read by its type ``cls``, as that class (a row of another type is a
    :class:`TypeError`)."""
    event = row.event
    if not isinstance(event, cls):
        raise TypeError(f"the event read is a {row.type}, not a {cls.name}")
    return event


def last_event(store: EventReader, run: str, cls: type[E]) -> E | None:
    """The last event of type ``cls`` of ``run`` (None: it has none), in one indexed read."""
    return next(of_type(cls, store.read(run, types=(cls,), newest=True, limit=1)), None)
