"""The catalog derived from the event classes' declarations (:mod:`diagevo.catalog.events`):
type name -> class, the sets of types each reader filters by, the per-type facts the log reads.
Imported through :mod:`diagevo.catalog`."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from diagevo.catalog.event import _READERS, Event, Kind
from diagevo.catalog.events import (
    EVENT_CLASSES,
    RunStarted,
)

SCHEMA_VERSION = 1
"""The version every event stored before versions were stored carries, and that of an
interchange line that names none: each stored event's ``schema_version`` is the version of its
class it was written at (:attr:`Event.class_version`; see :mod:`diagevo.catalog.event`)."""

CATALOG: dict[str, type[Event]] = {cls.name: cls for cls in EVENT_CLASSES}
"""Type name -> its class, in the catalog's order."""


def stored_event(type_name: str, data: Mapping[str, Any], version: int) -> Event:
    """The typed event of a stored row (type ``type_name``, its ``data`` as stored at its class's
    ``version``): :meth:`Event.from_stored`, unvalidated. The one way a reader outside the
    catalog builds an event (the log's :attr:`~diagevo.log.StoredEvent.event`, an envelope's
    :attr:`~diagevo.schemas.EventIn.event`), each built once."""
    return _READERS[CATALOG[type_name]](data, version)  # Event.from_stored, without its lookup of the class


EventTypes = Collection[type[Event]]
"""A type filter of a read: the classes of the events wanted."""


def of_kind(*kinds: Kind) -> frozenset[type[Event]]:
    """The types of these kinds."""
    return frozenset(cls for cls in EVENT_CLASSES if cls.kind in kinds)


def type_names(types: Iterable[type[Event]]) -> list[str]:
    """The names of these types, as the log stores them."""
    return [cls.name for cls in types]


FOLDED = frozenset(cls for cls in EVENT_CLASSES if cls.folded)
"""What the fold applies: the rows a replay of the memory reads."""

MEMORY_TYPES = FOLDED - {RunStarted}
"""What changes a memory already started (or commits it)."""

MILESTONES = of_kind(Kind.MILESTONE)
"""Where a run and its rounds stand: the rows the round protocol's state reads."""

RETROSPECTIVE = of_kind(Kind.RETROSPECTIVE)
"""Types that may name a round already committed."""

TEXT_FIELDS: dict[str, tuple[str, ...]] = {cls.name: cls.texts for cls in EVENT_CLASSES if cls.texts}
"""Type name -> the fields whose text the log keeps beside the chained data."""

COUNTED: dict[str, str] = {cls.name: cls.counted for cls in EVENT_CLASSES if cls.counted}
"""Type name -> its column in the per-round statistics."""
