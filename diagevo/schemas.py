"""The envelope every event comes in (:class:`EventIn`, one line of the JSONL interchange) and
how an event becomes what the log stores: its data validated by its class
(:mod:`diagevo.catalog.events`), its ids checked, its texts cut. An unknown ``type`` or ``data``
that does not fit its class is rejected.

Untrusted text is stored bounded (:class:`diagevo.config.limits.LimitsConfig`): a long text field
(an event class's ``texts``) beyond ``text_bytes`` UTF-8 bytes, or a short phrase (its
``phrases``) beyond ``phrase_bytes``, is cut there, and the event's data says so
under ``cut``: ``{field: {"bytes": length of the whole text, "sha256": its hash}}``."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from diagevo.catalog import CATALOG, KEY_FIELDS, SCHEMA_VERSION, Event, InvalidEvent, version_problem
from diagevo.catalog.event import TextCut, first_error
from diagevo.config.limits import LimitsConfig
from diagevo.text.parsing import MAX_ID_CHARS, check_id, find_not_utf8, quoted


class EventLine(BaseModel):
    """One line of the JSONL interchange format: an event's envelope and its data as JSON, before
    its class has read the data (:func:`validate_event` makes the :class:`EventIn` of it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    run: str = Field(min_length=1)
    round: int = Field(ge=0, le=2**31 - 1, strict=True)  # an INTEGER column on both backends
    event_id: str = Field(min_length=1)
    data: dict[str, Any] = Field(default_factory=dict)
    # the version of its class ``data`` is in (stored, hashed, and what a read upcasts from); a
    # line without one is of version 1, as every event stored before versions were stored
    schema_version: int = Field(default=SCHEMA_VERSION, ge=1, le=2**31 - 1, strict=True)

    @field_validator("type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        if v not in CATALOG:
            raise ValueError(f"unknown event type {quoted(v)}")
        return v

    # ids are columns: no NUL (PostgreSQL refuses it, SQLite would store it) nor other controls
    @field_validator("run")
    @classmethod
    def _run_id(cls, v: str) -> str:
        return check_id(v, "run id")

    @field_validator("event_id")
    @classmethod
    def _event_id(cls, v: str) -> str:
        return check_id(v, "event id", 4 * MAX_ID_CHARS)


@dataclass(frozen=True, slots=True, eq=False)
class EventIn:
    """An event on its way into the log: where it goes (``run``, ``round``), its id, and the typed
    event as the log stores it (texts cut to the limits, what was cut its :attr:`~Event.cut`).
    Made once, by :func:`new_event` (a producer's event) or :func:`validate_event` (a line handed
    in); checks under the append lock read :attr:`event`, and :attr:`data`, its stored form, is
    serialised once, when the batch is chained."""

    run: str
    round: int
    event_id: str
    event: Event
    schema_version: int  # the version its data is stored at: the class's, or an older line's kept as written
    _data: dict[str, Any] | None = field(default=None, repr=False)  # the stored form: made once, or as written

    @property
    def type(self) -> str:
        return self.event.name

    @property
    def data(self) -> dict[str, Any]:
        """The data as the log stores it (JSON values, texts cut, ``cut`` beside them), made on
        first use and kept."""
        if self._data is None:
            object.__setattr__(self, "_data", _stored_form(self.event))
        assert self._data is not None
        return self._data

    def line(self) -> dict[str, Any]:
        """The event as one line of the JSONL interchange format (what :func:`validate_event` reads)."""
        fields = {"type": self.type, "run": self.run, "round": self.round, "event_id": self.event_id}
        return {**fields, "data": self.data, "schema_version": self.schema_version}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EventIn):
            return NotImplemented
        mine = (self.run, self.round, self.event_id, self.type, self.schema_version)
        return mine == (other.run, other.round, other.event_id, other.type, other.schema_version) and (
            self.data == other.data
        )

    __hash__ = None  # type: ignore[assignment]


def _stored_form(event: Event) -> dict[str, Any]:
    """An event's data as the log stores it: its class's stored form, and what was cut."""
    data = event.stored_data()
    if event.cut:
        data["cut"] = dict(sorted(event.cut.items()))
    return data


def validate_event(raw: dict[str, Any]) -> EventIn:
    """Validate envelope and data (an event handed in as JSON: ingest, a fork's copy); the
    returned event's data is normalised by its class. Data of an older version of its class
    (``schema_version``) is validated as it reads (upcast from that version) and kept as written
    where that is what it reads as (:func:`_stored_older`); a version newer than the class is
    refused."""
    name = raw.get("type") if isinstance(raw, dict) else None
    line = _envelope(raw, name if isinstance(name, str) and name in CATALOG else None)
    cls = CATALOG[line.type]
    unknown = version_problem(cls, line.schema_version)
    if unknown is not None:
        raise InvalidEvent(unknown)
    payload = dict(line.data)
    cut = _check_cut(cls, payload.pop("cut")) if "cut" in payload else {}
    if line.schema_version < cls.class_version:
        return _older(line, cls, payload, cut)
    event = cls(**payload)  # InvalidEvent, in diagevo's words
    return EventIn(line.run, line.round, line.event_id, _as_stored(event, cut), line.schema_version)


def _older(line: EventLine, cls: type[Event], payload: dict[str, Any], cut: dict[str, Any]) -> EventIn:
    """The :class:`EventIn` of a line at an older ``version`` of ``cls``: validated as a read gives
    it (upcast from that version). Data that reads back as exactly that event (an export of a log
    an older diagevo wrote) is kept as written, at its version: its bytes, and so its hash, are
    those it was exported with. Any other (a line written by hand, a default left out) is stored
    as the validated event, at the class's version, as a new event is: either way what a reader
    builds without validating is what was validated here."""
    upcast = cls.upcast(payload, line.schema_version)
    event = cls(**upcast)  # InvalidEvent, in diagevo's words
    stored = _as_stored(event, cut)
    read = {f: v for f, v in upcast.items() if not (f in cls.stored_if_set and v is None)}
    if json.dumps(read, sort_keys=True) != json.dumps(event.stored_data(), sort_keys=True):  # True is not 1
        return EventIn(line.run, line.round, line.event_id, stored, cls.class_version)
    written = _stored(event, dict(cut), payload)
    return EventIn(line.run, line.round, line.event_id, stored, line.schema_version, written)


def new_event(event: Event, *, run: str, at_round: int, event_id: str) -> EventIn:
    """``event`` (validated when it was constructed) in its envelope, as the log stores it (what
    producers use): its ids checked, its texts cut; the event itself where nothing was cut."""
    envelope = {"type": event.name, "run": run, "round": at_round, "event_id": event_id}
    line = _envelope({**envelope, "schema_version": event.class_version}, event.name)
    return EventIn(line.run, line.round, line.event_id, _as_stored(event, {}), line.schema_version)


def _envelope(raw: Any, name: str | None) -> EventLine:
    """``raw`` validated as an envelope, refused in diagevo's words (a text not UTF-8 before
    pydantic's words), naming its type ``name`` where known."""
    not_utf8 = find_not_utf8(raw, "") if isinstance(raw, dict) else None
    if not_utf8 is not None:
        raise InvalidEvent(f"{name}: {not_utf8}" if name else str(not_utf8))
    try:
        return EventLine.model_validate(raw)
    except ValidationError as exc:
        raise InvalidEvent(first_error(exc)) from None


_COLUMNS: dict[type[Event], tuple[str, ...]] = {}


def _columns(cls: type[Event]) -> tuple[str, ...]:
    """The fields of ``cls`` the store copies into columns or cuts: its key fields and texts."""
    found = _COLUMNS.get(cls)
    if found is None:
        found = _COLUMNS[cls] = tuple(f for f in (*KEY_FIELDS, *cls.texts, *cls.phrases) if f in cls.model_fields)
    return found


def _as_stored(event: Event, cut: dict[str, Any]) -> Event:
    """``event`` as the log stores it: its ids and texts checked (:func:`_check_columns`), its
    texts cut to the limits in effect, what was cut (and ``cut``, a stored event's own) its
    :attr:`~Event.cut`. The event itself where nothing is cut."""
    values = {f: getattr(event, f) for f in _columns(type(event))}
    _check_columns(event, values)
    found = {**event.cut, **cut}
    _cut(event, values, found)
    if not found:
        return event
    kept = {f: values[f] for f in found if f in values and values[f] != getattr(event, f, None)}
    stored = event.model_copy(update=kept)
    stored._cut = dict(sorted(found.items()))
    return stored


def _stored(event: Event, cut: dict[str, Any], data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The data of a valid event (``data``: as written, else its own) as the log stores it: ids
    checked, texts cut to the limits."""
    data = event.stored_data() if data is None else data
    _check_columns(event, data)
    _cut(event, data, cut)
    return data


def _check_columns(event: Event, data: dict[str, Any]) -> None:
    """Values the store copies out of ``data`` into columns or artifacts: ids without control
    characters, texts and phrases (a cause's description, a node's label, a note) without NUL
    (PostgreSQL cannot hold it, so it is refused on every backend, by name)."""
    if not _KEYS.isdisjoint(data):
        for f in KEY_FIELDS:
            v = data.get(f)
            if v and isinstance(v, str):
                try:
                    check_id(v, f)
                except ValueError as exc:
                    raise InvalidEvent(f"{event.name}: data.{exc}") from None
    for f in (*event.texts, *event.phrases):
        v = data.get(f)
        if isinstance(v, str) and "\x00" in v:
            raise InvalidEvent(f"{event.name}: data.{f} contains a NUL character (U+0000)")


_KEYS = frozenset(KEY_FIELDS)
_DEFAULT_LIMITS = LimitsConfig()
_LIMITS: ContextVar[LimitsConfig | None] = ContextVar("diagevo_text_limits", default=None)
_SHA256 = re.compile(r"[0-9a-f]{64}")


@contextmanager
def text_limits(limits: LimitsConfig) -> Iterator[None]:
    """The limits the events validated inside the block are stored under (a run's ``[limits]``)."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def current_limits() -> LimitsConfig:
    """The limits in effect (:func:`text_limits`; the defaults outside any)."""
    return _LIMITS.get() or _DEFAULT_LIMITS


def cut_text(text: str, limit: int) -> tuple[str, TextCut | None]:
    """``text`` cut to at most ``limit`` UTF-8 bytes (at a character boundary) and, when it was
    cut, the whole text's ``{"bytes", "sha256"}``; else ``(text, None)``."""
    if len(text) * 4 <= limit:
        return text, None
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return text, None
    kept = raw[:limit].decode("utf-8", "ignore")
    return kept, {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def _check_cut(cls: type[Event], value: Any) -> dict[str, Any]:
    """A ``cut`` map as an event of type ``cls`` may carry (an event already stored, handed in again)."""
    fields, name = (*cls.texts, *cls.phrases), cls.name
    if not isinstance(value, dict):
        raise InvalidEvent(f"{name}: data.cut: must be an object")
    for f, entry in value.items():
        if f not in fields:
            raise InvalidEvent(f"{name}: data.cut: {quoted(f, 40)} is not a text of this type")
        ok = (
            isinstance(entry, dict)
            and set(entry) == {"bytes", "sha256"}
            and isinstance(entry["bytes"], int)
            and not isinstance(entry["bytes"], bool)
            and entry["bytes"] >= 0
            and isinstance(entry["sha256"], str)
            and _SHA256.fullmatch(entry["sha256"]) is not None
        )
        if not ok:
            raise InvalidEvent(f"{name}: data.cut.{f}: must be {{bytes: length, sha256: 64 hex digits}}")
    return dict(value)


def _cut(event: Event, data: dict[str, Any], cut: dict[str, Any]) -> None:
    """Cut ``data``'s texts to the limits in effect (in place), recording what was cut."""
    limits = current_limits()
    for fields, limit in ((event.texts, limits.text_bytes), (event.phrases, limits.phrase_bytes)):
        for f in fields:
            v = data.get(f)
            if isinstance(v, str):
                kept, whole = cut_text(v, limit)
                if whole is not None:
                    data[f] = kept
                    cut[f] = whole
    if cut:
        data["cut"] = dict(sorted(cut.items()))


def refused_by_type(type_: str, data: dict[str, Any], version: int) -> str | None:
    """Why the class of a stored event refuses its data (as parsed from the log's JSON, upcast
    from its stored ``version`` as a reader upcasts it), or None.
    A row written raw can fit its type's shape (:func:`diagevo.log.registry.shape_problem`, what
    the database checks) yet break a rule of its class (a bound, a ``mode`` that does not fit its
    causes): the writers that copy events validate them (a what-if, a fork), so ``memory verify``
    names such a row. Long texts stored as artifact references stand in as empty texts (their
    bytes are checked against their keys apart)."""
    cls = CATALOG.get(type_)
    if cls is None:
        return None  # not an event type: the shape check names it
    payload = cls.upcast(data, version)
    payload.pop("cut", None)
    for name in cls.texts:
        if isinstance(payload.get(name), dict):
            payload[name] = ""
    try:
        cls.from_json(payload)
    except InvalidEvent as exc:
        return str(exc)
    return None
