"""A stored row's data as every reader takes it: parsed within ingest's bounds (a row that slipped
past them, written raw where no check guards the table, is a one-line ``ValueError`` naming the
bound, never a ``RecursionError``), and the texts it names by their sha256 checked against them.
Backend-free, so that every recorder and ``memory verify`` read a row alike."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

import orjson

from diagevo.catalog import TEXT_FIELDS
from diagevo.text.parsing import MAX_DEPTH, depth


class RawRow(NamedTuple):
    """A stored row as it lies in the database: what verification recomputes (here, below the
    recorder that reads it and the registry that checks it, so neither imports the other for it)."""

    seq: int
    event_id: str
    round: int
    type: str
    schema_version: int
    data: str
    prev_hash: str
    hash: str
    texts: str | None
    keys: tuple[str | None, ...]  # the key columns (KEY_FIELDS)
    recorded_at: str = ""  # when its append was made, as the database keeps it (any type, on SQLite)


ARTIFACT_KEY = "$artifact"
_orjson_loads = orjson.loads


def loads(text_: str) -> Any:
    """Parse stored JSON within ingest's bounds (:data:`~diagevo.text.parsing.MAX_DEPTH` levels, every
    number in a double's range): a row that slipped past them (written raw where no check guards
    the table) is a :class:`ValueError` naming the bound, never a ``RecursionError``. orjson reads
    no deeper than 1,024 levels and no number beyond a double's range; the nesting is walked only
    where the text holds enough brackets to nest deeper than the bound."""
    try:
        value = _orjson_loads(text_)
    except ValueError as exc:
        raise _past_bounds(str(exc)) from None
    if len(text_) > _SHALLOW and text_.count("[") + text_.count("{") > MAX_DEPTH and depth(value) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


_SHALLOW = 2 * MAX_DEPTH  # no shorter JSON text nests deeper than MAX_DEPTH

UNREADABLE = "its data cannot be read: "
"""How a reader names a row whose data is past its bounds (:func:`loads`)."""
NOT_AN_OBJECT = "its data is not a JSON object"
"""How a reader names a row whose data is JSON but no object (no event's data)."""
NEGATIVE_ROUND = "its round is negative"
"""How a reader names a row of a round below 0 (rounds start at 0, ``run.started``)."""


def loads_data(text_: str) -> dict[str, Any]:
    """:func:`loads` of an event's stored data, which is a JSON object: a :class:`ValueError`
    otherwise (what a read passes over, :func:`row_problem` saying why)."""
    value = loads(text_)
    if type(value) is not dict:
        raise ValueError(NOT_AN_OBJECT)
    return value


def not_text(column: str) -> str:
    """How a reader names a row whose ``column`` holds no UTF-8 text: a BLOB, or bytes that are not
    UTF-8 (SQLite keeps either in a text column, whatever its declared type)."""
    return f"its {column} is not UTF-8 text"


STAMP_PROBLEM = "its recorded_at is not a timestamp (ISO 8601 with a UTC offset)"


def stamp_problem(value: Any) -> str | None:
    """Why a row's ``recorded_at`` is no timestamp as diagevo's appends write it, or None: ISO 8601
    with a UTC offset (PostgreSQL's insert check refuses another; SQLite keeps any value)."""
    if type(value) is not str:
        return STAMP_PROBLEM
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return STAMP_PROBLEM
    return None if when.tzinfo is not None else STAMP_PROBLEM


def column_problem(round_: Any, version: Any = 1) -> str | None:
    """Why every reader passes over a stored row for its columns, or None: its round or its
    ``schema_version`` no whole number (SQLite keeps a value of any type in any column, whatever
    the column's declared type), its round below 0."""
    if type(round_) is not int:
        return "its round is not a whole number"
    if round_ < 0:
        return NEGATIVE_ROUND
    if type(version) is not int:
        return "its schema_version is not a whole number"
    return None


def row_problem(round_: Any, data: str | None, version: Any = 1) -> str | None:
    """Why every reader passes over a stored row (its columns, :func:`column_problem`; its data
    past the readers' bounds or no JSON object), or None: what a read says of a row it could not
    make (``data`` None: a read of no data)."""
    why = column_problem(round_, version)
    if why is not None:
        return why
    if data is None:
        return None
    try:
        value = loads(data)
    except ValueError as exc:
        return f"{UNREADABLE}{exc}"
    return None if type(value) is dict else NOT_AN_OBJECT


def loads_state(text_: str) -> Any:
    """Parse a view's saved state: written by diagevo's own writers alone (a reader uses only the
    states of a writer it trusts) and large (a memory of many causes), so parsed by orjson with its
    own bound (1,024 levels), without the walk :func:`loads` adds for rows anyone may insert."""
    try:
        return _orjson_loads(text_)
    except ValueError as exc:
        raise _past_bounds(str(exc)) from None


def _past_bounds(said: str) -> ValueError:
    """orjson's refusal, as the bound it names."""
    if "depth" in said:
        return ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    if "infinity" in said:
        return ValueError("a number beyond a double's range")
    return ValueError(f"not JSON ({said.split(':')[0]})")


DIGITS = re.compile(rb"[0-9]{309}")  # a number beyond a double's range has at least 309 digits


def unreadable(data_json: bytes) -> str | None:
    """Why :func:`loads` would refuse this JSON (the writer stores nothing its readers refuse)."""
    try:
        loads(data_json.decode())
    except ValueError as exc:
        return str(exc)
    return None


def text_refs(type_: str, data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, sha256) of the texts an event's stored data names: a list, built in one pass (a
    story of a cause attributed thousands of times reads tens of thousands of rows)."""
    return [
        (f, key)
        for f in TEXT_FIELDS.get(type_, ())
        if type(v := data.get(f)) is dict and type(key := v.get(ARTIFACT_KEY)) is str
    ]


def text_problems(seq: int, refs: list[tuple[str, str]], column: str | None) -> tuple[list[str], dict[str, Any]]:
    """What is wrong with an event's ``texts`` column against the keys its data names, and the
    column parsed ({} when it is missing or not a JSON object)."""
    if column is None:
        return [f"seq {seq}: text {f} ({sha}) is missing" for f, sha in refs], {}
    try:  # orjson's own bound (1,024 levels) is enough: what is kept of the column is strings alone
        held = _orjson_loads(column)
    except ValueError:
        return [f"seq {seq}: its texts column is not JSON"], {}
    if not isinstance(held, dict):
        return [f"seq {seq}: its texts column is not a JSON object"], {}
    problems = []
    sha256 = hashlib.sha256
    for f, sha in refs:
        t = held.get(f)
        if not isinstance(t, str):
            problems.append(f"seq {seq}: text {f} ({sha}) is missing")
        elif sha256(t.encode()).hexdigest() != sha:
            problems.append(f"seq {seq}: text {f} ({sha}) was altered (it does not hash to its key)")
    return problems, held
