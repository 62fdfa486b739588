"""What every event type is: a pydantic model of its ``data`` that declares, as class variables,
the facts the log, the fold and the statistics read of it (its name, its kind, its long texts,
the ids it names, how it is counted), and how to read its older stored shapes (upcasters).

Constructing an event validates it (``CauseCreated(cause_id=..., node_id=..., description=...)``:
a field that does not fit raises :class:`InvalidEvent`, in diagevo's words). Reading one back
from the log validates nothing (:meth:`Event.from_stored`): the log holds only what was
validated when it was appended, and a fold over a million events must not pay a validation
each. Every stored event keeps the version of its class it was written at (the log's
``schema_version``, covered by its hash); one older than its class (``class_version``) goes
through the class's upcasters from that version on (``upcast_v1_v2``, ``upcast_v2_v3`` ...), as
eventsourcing does, and one at its class's version through none: an upcaster runs once on an
event, so it need not be idempotent. The stored bytes never change.

Events stored before versions were stored all carry 1, whatever shape they were written in:
the upcasters of those versions (``absent_is_none``) are idempotent, so an event written in the
shape of version 2 and stored as 1 reads the same. An upcaster added from now on runs only on
events stored at the version before it.

Kinds:

- ``milestone``: where a run and its rounds stand (the round protocol's states);
- ``memory``: changes the memory M_t (the fold applies it);
- ``evidence``: what a round observed (questions, their scores, failures and their diagnoses);
- ``bookkeeping``: the loop's and the diagnostician's notes; it opens a round and changes nothing;
- ``retrospective``: about a round already committed (a checkpoint evaluated or chosen later).
"""

# no ``from __future__ import annotations``: pydantic evaluates the annotations of a model and of
# its bases for each class it builds, and every command that reads the log builds every event class
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeAlias, TypedDict

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from diagevo.errors import BadInput
from diagevo.results import Json
from diagevo.text.parsing import error_reason, find_not_utf8, one_line, quoted

KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")
"""Data fields that name a cause, a failure or a question: each is also a column of ``events``,
filled at append time (a string value, else NULL), with a partial index on (run_id, field)."""

CAUSE_FIELDS = KEY_FIELDS[:4]
"""The key fields that name a cause."""


JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}
"""The JSON types a field may declare, as the Python values ``json.loads`` gives."""


FIGURE_BOUND = 1e12
"""The largest magnitude of a figure a reader takes from the log (seconds, counts, metrics): a
hundred rounds of them still sum, draw and format as finite numbers. A row stored raw may hold
1e308 or 10^300 where a figure belongs; readers take such a value as none, and verify names it."""


def json_kinds(value: Any) -> set[str]:
    """The JSON types ``value`` is, as PostgreSQL's ``jsonb_typeof`` and the registry's checks
    see them: a boolean is no number; a number without a fractional part is also an integer."""
    if isinstance(value, bool):
        return {"boolean"}
    kinds = {k for k, ts in JSON_TYPES.items() if isinstance(value, ts)}
    if isinstance(value, float) and value.is_integer():
        kinds.add("integer")
    return kinds


class Kind(StrEnum):
    MILESTONE = "milestone"
    MEMORY = "memory"
    EVIDENCE = "evidence"
    BOOKKEEPING = "bookkeeping"
    RETROSPECTIVE = "retrospective"


class InvalidEvent(BadInput):
    """An event whose envelope or data does not fit the catalog."""


def first_error(exc: ValidationError) -> str:
    """The first problem pydantic found, on one line, its place first (``field.0: reason``), with
    the value it refused (:func:`~diagevo.text.parsing.error_reason`) unless the field is missing or unknown."""
    err = exc.errors(include_url=False)[0]
    if err["type"] not in ("missing", "extra_forbidden"):
        return error_reason(err)
    loc = ".".join(str(p) if len(str(p)) <= 40 else quoted(p, 40) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return one_line(f"{loc}: {msg}" if loc else msg)


StoredData: TypeAlias = dict[str, Json]
"""An event's data as the log stores it: JSON, read back as written (what an upcaster reshapes)."""

Upcaster = Callable[[StoredData], StoredData]
"""Reshapes an event's stored JSON (the log's bytes, as written) from one version of its class
to the next."""


class TextCut(TypedDict):
    """What the log kept of a text it stored cut to the limits: the whole text's UTF-8 length
    and SHA-256 (the stored data's ``cut``, by field: :func:`diagevo.schemas.cut_text`)."""

    bytes: int
    sha256: str


_READERS: dict[type["Event"], Callable[[Mapping[str, Any], int], "Event"]] = {}
""":meth:`Event.from_stored` of each class, built once per class (:func:`_reader`)."""


class Event(BaseModel):
    """The data of one event type (extra fields refused). Subclasses declare the facts below."""

    # the schema is built on the first validation: a read builds none
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # The facts each type declares, as class variables (``name`` and ``kind`` without a default).
    name: ClassVar[str]  # the type's name in the log, e.g. "cause.created"
    kind: ClassVar[Kind]
    folded: ClassVar[bool] = False  # the fold applies it (it changes M_t, or starts or commits it)
    texts: ClassVar[tuple[str, ...]] = ()  # long texts kept in the event's row, named in data by their sha256
    phrases: ClassVar[tuple[str, ...]] = ()  # short untrusted phrases, stored up to limits.phrase_bytes
    keys: ClassVar[tuple[str, ...]] = ()  # the KEY_FIELDS its data names
    counted: ClassVar[str | None] = None  # its column in the per-round statistics
    counted_if: ClassVar[str | None] = None  # ...counted only when this boolean data field is true
    class_version: ClassVar[int] = 1  # the shape of its data; older stored shapes are upcast on read
    stored_if_set: ClassVar[tuple[str, ...]] = ()  # fields a later version added: absent when None
    closed_since: ClassVar[int] = 1  # the version from which its stored data holds no undeclared field
    free_form: ClassVar[str | None] = None  # its field of a trainer's own figures (version 1's flat extras)
    upcasters: ClassVar[tuple[Upcaster, ...]] = ()  # upcast_v1_v2 ... up to class_version, in order

    # what the log cut of the texts of a stored event: set by the reader alone (a producer gives
    # whole texts; the store cuts them), compared as its fields are
    _cut: dict[str, TextCut] = PrivateAttr(default_factory=dict)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.upcasters = tuple(getattr(cls, f"upcast_v{v}_v{v + 1}") for v in range(1, cls.class_version))
        _READERS[cls] = _reader(cls)

    if not TYPE_CHECKING:  # the type checker keeps the fields' signature pydantic declares

        def __init__(self, **data: Any) -> None:
            problem = find_not_utf8(data, "data")
            if problem is not None:
                raise InvalidEvent(f"{self.name}: {problem}")
            self._validate(data)

    def _validate(self, data: dict[str, Any]) -> None:
        """Fill this event from ``data`` as pydantic validates it; what it refuses, in diagevo's words."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidEvent(f"{self.name}: data.{first_error(exc)}") from None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """The event of ``data`` parsed from JSON, validated as constructing it validates, less
        the look for text that is not UTF-8: a JSON parser gives none (orjson refuses a lone
        surrogate), and a check of every stored row must not serialise each again to look."""
        event = cls.__new__(cls)  # pydantic's __init__ (model_validate takes half as long again)
        event._validate(data)
        return event

    @classmethod
    def from_stored(cls, data: Mapping[str, Any], version: int) -> Self:
        """The event whose stored data is ``data``, stored at its class's ``version``,
        unvalidated (it was validated when it was appended), upcast from that version to the
        current one. Its long texts are the stored ``{"$artifact": sha256}`` references unless
        the read put them back (``texts=True``); the stored ``cut``, which says which texts were
        cut, is its :attr:`cut`."""
        return _READERS[cls](data, version)  # type: ignore[return-value]

    @property
    def cut(self) -> Mapping[str, TextCut]:
        """What the log cut of this stored event's texts, by field (empty: none; an event not
        read from the log holds whole texts): two texts that differ past the cut are stored
        alike, and differ here."""
        return self._cut

    @classmethod
    def upcast(cls, data: Mapping[str, Json], version: int) -> StoredData:
        """Stored data of ``version`` in the current version's shape (a copy)."""
        out = dict(data)
        for upcast in cls.upcasters[version - 1 :]:
            out = upcast(out)
        return out

    def stored_data(self) -> dict[str, Any]:
        """The data as the log stores it: JSON values, and the fields a later version added
        left out while unset (the bytes of an event of an older version stay as they were)."""
        data = self.model_dump(mode="json", exclude_none=False)
        for f in self.stored_if_set:
            if f in data and data[f] is None:
                del data[f]
        return data


class NewerEvent(InvalidEvent):
    """An event at a version its class does not have: most likely a newer diagevo wrote it, and
    only that one knows its shape (or its version is below 1)."""


def version_problem(cls: type[Event], version: int) -> str | None:
    """Why an event of type ``cls`` cannot be stored or read at ``version`` (None: it can): the
    one rule of every writer, reader and check (ingest, verify, the reader, the database's)."""
    if type(version) is not int or version < 1:
        return f"{cls.name}: schema_version {version!r} is not a version (a whole number from 1)"
    if version > cls.class_version:
        return (
            f"{cls.name}: schema_version {version} is newer than this diagevo's {cls.name} "
            f"(version {cls.class_version}): read it with the diagevo that wrote it, or a newer one"
        )
    return None


def _reader(cls: type[Event]) -> Callable[[Mapping[str, Any], int], Event]:
    """:meth:`Event.from_stored` for ``cls``, with what it looks up per event bound once: a
    fold reads a million events through it. ``chains[v]`` holds the upcasters an event stored at
    version ``v`` goes through (one index per event; none at the current version)."""
    upcasters = cls.upcasters
    chains = (None, *(upcasters[v - 1 :] for v in range(1, cls.class_version + 1)))  # no version 0
    count, construct, complete = len(cls.__pydantic_fields__), cls.model_construct, _complete(cls)
    required = {n: None for n, f in cls.__pydantic_fields__.items() if f.is_required()}
    needed = required.keys()

    def read(data: Mapping[str, Any], version: int) -> Event:
        try:
            chain = chains[version] if version > 0 else None
        except (IndexError, TypeError):
            chain = None
        if chain is None:
            raise NewerEvent(str(version_problem(cls, version)))
        for upcast in chain:
            data = upcast(dict(data))
        if len(data) == count and "cut" not in data:  # every field (a read passes over a row out of shape)
            return complete(data)
        if not data.keys() >= needed:  # a row written by hand: the rules name what does not fit
            data = {**required, **data}
        fields = dict(data)
        if "cut" in fields:
            fields["_cut"] = fields.pop("cut")  # model_construct sets the private attribute it is given
        return construct(**fields)

    return read


def _complete(cls: type[Event]) -> Callable[[Mapping[str, Any]], Event]:
    """``cls.model_construct(**data)`` for stored data that holds every field of ``cls`` and
    nothing else (the common shape: a field a later version added is absent while unset): the
    four instance attributes model_construct sets, set here without its loop over the fields and
    their aliases and defaults: about 1 µs an event where model_construct takes 6, and a fold
    reads a million. ``tests/test_event_classes.py`` holds the two equal for every class. The
    event holds a copy of ``data`` (the stored row's dict, which :func:`~diagevo.log.payload`
    hands out): a frozen event shares nothing a caller may change."""
    new, put = object.__new__, object.__setattr__

    def construct(data: Mapping[str, Any]) -> Event:
        event = new(cls)
        put(event, "__dict__", dict(data))
        put(event, "__pydantic_fields_set__", set(data))
        put(event, "__pydantic_extra__", None)
        put(event, "__pydantic_private__", {"_cut": {}})
        return event

    return construct


def absent_is_none(*fields: str) -> Upcaster:
    """An upcaster for fields a version added as optional: a stored event of the version before
    lacks them, which means None."""

    def upcast(data: StoredData) -> StoredData:
        for f in fields:
            data.setdefault(f, None)
        return data

    return upcast


def extra_into(**renamed: str) -> Any:
    """An upcaster for a type whose version before carried undeclared fields (a trainer's free-form
    figures): they are its ``free_form`` field's; a field ``renamed`` takes its new name."""

    def upcast(cls: type[Event], data: StoredData) -> StoredData:
        for old, new in renamed.items():
            if old in data:
                data[new] = data.pop(old)
        extra = {f: data.pop(f) for f in [f for f in data if f not in cls.__pydantic_fields__ and f != "cut"]}
        if extra:
            data[str(cls.free_form)] = extra
        return data

    return classmethod(upcast)
