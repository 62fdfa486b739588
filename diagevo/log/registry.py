"""The event types a PostgreSQL log accepts, as rows of its ``event_types`` table.

The database checks every row a role other than the tables' owner inserts (the baseline
migration's insert trigger): a role that may only INSERT into ``events`` must not be able to write
what readers cannot read. The trigger learns the types from ``event_types``, one row per type of
the catalog: its kind, its class's version (the highest ``schema_version`` a row may name), and
the shape of its ``data``: each
declared field's JSON types (and values, for a choice), the required fields, and whether other
fields are refused. The rows are derived here from the catalog and its data models, and written
by whoever migrates the database (``diagevo db upgrade``, or the first writer of an empty one)
after every upgrade, even one with nothing to migrate: a type added to the catalog needs no new
migration, only an upgrade by the schema's owner. Until then the database refuses the new type
by name.

SQLite has no roles (whoever may write the file may drop a trigger): it has no such table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagevo.catalog import CATALOG
from diagevo.catalog.event import JSON_TYPES, json_kinds
from diagevo.log.stored import NOT_AN_OBJECT, UNREADABLE, RawRow, loads
from diagevo.text.parsing import MAX_DEPTH

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection


TABLE = "event_types"
ANY_EVENT_FIELDS = {"cut": {"types": ["object"]}}
"""Fields any event may carry: ``cut`` names the texts stored cut to the limits."""

_JSON_TYPES = frozenset(JSON_TYPES)
BOUNDS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"))
"""A JSON schema's bounds of a number, and the comparison each asks of a value."""


def _field(schema: dict[str, Any]) -> dict[str, Any]:
    """The check of one field from its JSON schema: ``types`` (absent: any value), for a
    choice of values (a ``Literal``) ``enum``, and for a number with bounds (``Field(ge=0)``)
    ``bounds`` (``minimum`` ... -> the bound)."""
    types: set[str] = set()
    values: list[Any] = []
    bounds: dict[str, Any] = {}
    free = False  # a branch that takes any value of its type
    for b in schema.get("anyOf", [schema]):
        if b.get("type") not in _JSON_TYPES:
            return {}  # a field of any value
        types.add(b["type"])
        bounds |= {key: b[key] for key, _op in BOUNDS if key in b}
        if "enum" in b or "const" in b:
            values += b.get("enum", [b.get("const")])
        elif b["type"] == "null":
            values.append(None)
        else:
            free = True
    out: dict[str, Any] = {"types": sorted(types)}
    if not free:
        out["enum"] = values
    if bounds and len(types & {"integer", "number"}) == 1:  # the one branch of a number bounds it
        out["bounds"] = bounds
    items = schema.get("items", {}).get("type")
    if types == {"array"} and items in _JSON_TYPES - {"integer"}:
        out["items"] = items  # every element of this JSON type (a list of ids)
    return out


def type_spec(name: str) -> dict[str, Any]:
    """What the database checks of an event of type ``name``: ``kind``, ``fields`` (field ->
    its check), ``required`` (fields that must be present), ``closed`` (no other field, in a row
    of version ``closed_since`` or later: an older version may have carried others, which its
    upcaster reads) and ``version`` (its class's: the newest ``schema_version`` a row may name)."""
    model = CATALOG[name]
    schema = model.model_json_schema()
    fields = {f: _field(s) for f, s in schema.get("properties", {}).items()}
    for f in model.texts:  # a long text is stored as {"$artifact": sha256} in data
        if fields.get(f, {}).get("types"):
            fields[f] = {"types": sorted({*fields[f]["types"], "object"})}
    return {
        "kind": model.kind.value,
        "fields": {**fields, **ANY_EVENT_FIELDS},
        "required": sorted(schema.get("required", [])),
        "closed": model.model_config.get("extra") == "forbid",
        "closed_since": model.closed_since,
        "version": model.class_version,
    }


def _q(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _unfit_sql(field: str, check: dict[str, Any]) -> list[str]:
    """SQL conditions over ``d`` (the data, jsonb), each true when the field is present and does
    not pass ``check`` (an absent field makes each NULL). A CASE keeps the order of evaluation: a
    value is cast to a number only once it is one."""
    value, kind = f"d -> {_q(field)}", f"jsonb_typeof(d -> {_q(field)})"
    plain = [t for t in check["types"] if t != "integer"]
    other = f"{kind} NOT IN ({', '.join(map(_q, plain))})" if plain else f"{kind} IS NOT NULL"
    if "integer" in check["types"] and "number" not in check["types"]:  # int | float takes either
        number = f"floor(({value})::numeric) <> ({value})::numeric"
        conditions = [f"CASE WHEN {kind} = 'number' THEN {number} ELSE {other} END"]
    else:
        conditions = [other]
    if "enum" in check:
        conditions.append(f"{value} NOT IN ({', '.join(f'{_q(json.dumps(v))}::jsonb' for v in check['enum'])})")
    if "items" in check:
        path = _q(f'$[*] ? (@.type() != "{check["items"]}")')
        conditions.append(f"{kind} = 'array' AND jsonb_path_exists({value}, {path})")
    if "bounds" in check:  # last: the bounds of a number of its type
        bounds = check["bounds"]
        within = " AND ".join(f"({value})::numeric {op} {bounds[key]}" for key, op in BOUNDS if key in bounds)
        conditions.append(f"CASE WHEN {kind} = 'number' THEN NOT ({within}) ELSE false END")
    return conditions


def _type_problem(name: str, spec: dict[str, Any]) -> str:
    """A SQL expression over ``d``: what is wrong with the data of an event of type ``name``
    (one short phrase), or NULL."""
    whens = []
    if spec["required"]:
        first = " ".join(f"WHEN NOT d ? {_q(f)} THEN {_q(f'its data lacks {f}')}" for f in spec["required"])
        whens.append(f"WHEN NOT d ?& ARRAY[{', '.join(map(_q, spec['required']))}]::text[] THEN CASE {first} END")
    for field, check in spec["fields"].items():
        if check.get("types"):
            conditions = _unfit_sql(field, check)
            message = _q(f"its data.{field} is not of its type ({name})")
            whens += [f"WHEN {c} THEN {message}" for c in conditions[: len(conditions) - ("bounds" in check)]]
            if "bounds" in check:
                said = _q(f"its data.{field} is out of its range ({name}: {_range(check)})")
                whens.append(f"WHEN {conditions[-1]} THEN {said}")
    if spec["closed"]:
        declared = f"ARRAY[{', '.join(map(_q, spec['fields']))}]::text[]"
        extra = f"(jsonb_path_query_first(d - {declared}, '$.keyvalue().key') #>> '{{}}')"
        since = f"v >= {int(spec['closed_since'])} AND " if spec["closed_since"] > 1 else ""
        whens.append(
            f"WHEN {since}(d - {declared}) <> '{{}}'::jsonb "
            f"THEN 'its data holds ' || {extra} || {_q(f', no field of {name}')}"
        )
    return f"CASE {' '.join(whens)} END" if whens else "NULL"


def _range(check: dict[str, Any]) -> str:
    """A field's bounds in words: ``>= 0 and <= 1``."""
    bounds = check["bounds"]
    return " and ".join(f"{op} {bounds[key]}" for key, op in BOUNDS if key in bounds)


DOUBLE_OVERFLOW = 2**1024 - 2**970
"""The least number a double cannot hold (halfway past the largest double, 1.7976931348623157e308,
rounds to infinity): a JSON number of this size or more is one no reader parses (orjson refuses it)."""
BEYOND_A_DOUBLE = "its data holds a number beyond a double's range"
_BEYOND = f'strict $.** ? (@.type() == "number" && (@ >= {DOUBLE_OVERFLOW} || @ <= -{DOUBLE_OVERFLOW}))'
TOO_DEEP = f"its data is JSON nested deeper than {MAX_DEPTH} levels"
_DEEP = f'strict $.**{{{MAX_DEPTH}}} ? (@.type() == "array" || @.type() == "object")'
"""A container at level ``MAX_DEPTH`` (the data itself is level 0): what no reader parses."""


def shape_function(specs: dict[str, dict[str, Any]]) -> str:
    """``events_shape_problem(type, v, d)``: the database's check of an event's data ``d``, stored
    at version ``v`` (what is wrong with it, or NULL), generated from the types' shapes: what a
    reader can parse (a JSON object, nested at most :data:`~diagevo.text.parsing.MAX_DEPTH`
    levels, every number in it within a double's range, its value compared: the way it is spelt
    does not matter, ``1`` and 248 zeros ``e99`` is refused as ``1e400`` is), then its type's
    shape. A SQL function of one expression, which the planner inlines into the
    insert trigger's query: no call, no JSON parsed twice."""
    branches = " ".join(f"WHEN {_q(name)} THEN {_type_problem(name, spec)}" for name, spec in sorted(specs.items()))
    return (
        "CREATE OR REPLACE FUNCTION events_shape_problem(type text, v integer, d jsonb) RETURNS text "
        "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $shape$ SELECT CASE WHEN jsonb_typeof(d) <> 'object' "
        f"THEN {_q(NOT_AN_OBJECT)} WHEN jsonb_path_exists(d, {_q(_DEEP)}) THEN {_q(TOO_DEEP)} "
        f"WHEN jsonb_path_exists(d, {_q(_BEYOND)}) THEN {_q(BEYOND_A_DOUBLE)} "
        f"ELSE CASE type {branches} END END $shape$"
    )


def catalog_specs() -> dict[str, dict[str, Any]]:
    """Every type of the catalog -> :func:`type_spec`."""
    return {name: type_spec(name) for name in CATALOG}


FieldCheck = tuple[frozenset[type], frozenset[str], dict[str, Any], Callable[[Any], bool] | None]


Checker = tuple[frozenset[str], dict[str, FieldCheck], int | None, int]


SHAPES = Path(__file__).with_name("shapes.json")
""":func:`catalog_specs` as of the last :func:`write_shapes`: every reader tests each row it takes
against its type's shape, and deriving a shape from its class's JSON schema takes milliseconds a
type, which a read command would pay again in every process (``tests/test_log_shapes.py`` holds
the file equal to the catalog)."""


def write_shapes(path: Path = SHAPES) -> None:
    """Write :data:`SHAPES` from the catalog (after a change to an event class's fields)."""
    path.write_text(json.dumps(catalog_specs(), indent=1, sort_keys=True) + "\n", encoding="utf-8")


@cache
def _stored_specs() -> dict[str, dict[str, Any]]:
    """:data:`SHAPES` as read (empty where it is missing: each shape is then derived)."""
    try:
        return dict(json.loads(SHAPES.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _spec(type_: str) -> dict[str, Any]:
    """:func:`type_spec` of a type of the catalog, from :data:`SHAPES` where it holds the type (a
    class defined outside the catalog's package, a test's, is derived)."""
    stored = _stored_specs().get(type_)
    model = CATALOG[type_]
    if stored is not None and model.__module__.startswith("diagevo.catalog."):
        return stored
    return type_spec(type_)


@cache
def _checker(type_: str) -> Checker | None:
    """Type ``type_``'s (required fields, field -> (the Python types that pass at once, the texts
    that pass at once, its check, the test of its bounds), the version from which it is closed,
    None if never, its class's version): the shape of :func:`type_spec`, made quick to test a row
    against; None for a type the catalog does not hold. Made the first time a row of the type is tested (every read
    tests each row it takes: a command builds only the checks of the types it reads)."""
    if type_ not in CATALOG:
        return None
    spec = _spec(type_)
    fields = {}
    for f, check in spec["fields"].items():
        quick: frozenset[type] = frozenset()
        if "types" in check and not check.keys() & {"enum", "items"}:  # a bound is tested after its type
            quick = frozenset(t for kind in check["types"] for t in JSON_TYPES[kind])
        words = frozenset(v for v in check.get("enum", ()) if isinstance(v, str))  # a choice's texts
        fields[f] = (quick, words, check, _bounds_test(check["bounds"]) if "bounds" in check else None)
    closed_since = spec["closed_since"] if spec["closed"] else None
    return frozenset(spec["required"]), fields, closed_since, CATALOG[type_].class_version


def shape_problem(type_: str, data: dict[str, Any], version: int) -> str | None:
    """What the database's check (the insert trigger's) would say of an event's type and data, stored
    at ``version``, for a row stored without it (SQLite, or a log older than the check); None
    when it fits. A version its class does not have is refused before the data is looked at
    (:func:`version_refused`)."""
    checker = _checker(type_)
    if checker is None:
        return f"out of shape: {type_[:64]!r} is not an event type"
    required, fields, closed_since, newest = checker
    if not 1 <= version <= newest:
        return version_refused(type_, version, newest, data.get("diagevo"))
    closed = closed_since is not None and version >= closed_since
    if not data.keys() >= required:
        return f"out of shape: {type_} data lacks {', '.join(sorted(required - data.keys()))}"
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            if closed:
                return f"out of shape: {type_} data holds {key[:64]!r}, no field of {type_}"
            continue
        quick, words, check, within = field
        if type(value) not in quick and not (type(value) is str and value in words) and not _fits(check, value):
            return f"out of shape: {type_} data.{key} is not of its type ({', '.join(check['types'])})"
        if within is not None and not within(value):
            return f"out of shape: {type_} data.{key} is out of its range ({_range(check)})"
    return None


def version_refused(type_: str, version: int, newest: int, wrote: Any = None) -> str:
    """Why every reader passes over a row of ``type_`` at ``version`` (its class reads versions 1
    to ``newest``): one above was written by a newer diagevo (``wrote``: its version, where the
    row records it), whose shape of it this one cannot know."""
    if version > newest:
        by = f" ({wrote[:40]!r})" if isinstance(wrote, str) else ""
        return f"written by a newer diagevo{by}: {type_} version {version} (this diagevo reads up to version {newest})"
    return f"its schema_version {version} is not a version of {type_} (a whole number from 1)"


def _bounds_test(bounds: dict[str, Any]) -> Callable[[Any], bool]:
    """:func:`_within` of these bounds, their comparisons bound once: every read tests the bounded
    fields of every row it takes (a question's scores, an attribution's similarity)."""
    tests = [(_COMPARE[key], bound) for key, bound in bounds.items()]
    numbers = (int, float)  # what JSON numbers parse to: compared at once, anything else as _within says

    def within(value: Any) -> bool:
        if type(value) not in numbers:
            return _within(bounds, value)
        for compare, bound in tests:
            if not compare(value, bound):
                return False
        return True

    return within


_COMPARE = {
    "minimum": lambda v, b: v >= b,
    "exclusiveMinimum": lambda v, b: v > b,
    "maximum": lambda v, b: v <= b,
    "exclusiveMaximum": lambda v, b: v < b,
}


def _within(bounds: dict[str, Any], value: Any) -> bool:
    """Whether a value of a bounded field is within its bounds, as the database compares them (a
    value of another type is its type check's)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    return all(_COMPARE[key](value, bound) for key, bound in bounds.items())


def stored_problem(row: RawRow) -> tuple[dict[str, Any] | None, str | None]:
    """A stored row's data as its readers take it, and what they refuse of it (None: nothing):
    data past their bounds or no JSON object (then the data is None), or out of its type's
    shape (:func:`shape_problem`): the one rule of ``verify_chain`` and of the look for the row
    a reader failed on."""
    try:
        data = loads(row.data)
    except ValueError as exc:
        return None, f"{UNREADABLE}{exc}"
    if not isinstance(data, dict):
        return None, NOT_AN_OBJECT
    return data, shape_problem(row.type, data, row.schema_version)


def _fits(check: dict[str, Any], value: Any) -> bool:
    """Whether ``value`` passes a field's check as the database tests it: its JSON type (an
    integer is a number without a fractional part), its choice of values, its elements' type."""
    types = check.get("types")
    if types is None:
        return True
    if json_kinds(value).isdisjoint(types):
        return False
    if "enum" in check and value not in check["enum"]:
        return False
    items = check.get("items")
    if items is None or not isinstance(value, list):
        return True
    quick = _QUICK_ITEMS[items]  # the values of exactly these types pass at once (an array of ids: texts)
    return all(type(v) in quick for v in value) or all(_fits({"types": [items]}, v) for v in value)


_QUICK_ITEMS = {kind: frozenset(ts) for kind, ts in JSON_TYPES.items()}


def has_table(conn: Connection) -> bool:
    """Whether the schema holds ``event_types`` as this diagevo writes it (with ``closed_since``):
    a database at a revision without it keeps the types it has."""
    return bool(
        conn.exec_driver_sql(
            f"SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            f"AND table_name = '{TABLE}' AND column_name = 'closed_since')"
        ).scalar()
    )


def register_types(conn: Connection) -> list[str]:
    """Write the catalog's types into ``event_types`` (a type known already gets this version's
    shape; a type no longer in the catalog stays, as old logs hold it) and the check generated
    from them (:func:`shape_function`). Returns the types whose row changed. Needs a migrated
    PostgreSQL schema (``event_types`` present)."""
    changed = []
    for name, spec in catalog_specs().items():
        row = conn.exec_driver_sql(
            f"INSERT INTO {TABLE} (type, kind, fields, required, closed, closed_since, version) "
            "VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s) ON CONFLICT (type) DO UPDATE SET kind = excluded.kind, "
            "fields = excluded.fields, required = excluded.required, closed = excluded.closed, "
            f"closed_since = excluded.closed_since, version = excluded.version WHERE ({TABLE}.kind, {TABLE}.fields, "
            f"{TABLE}.required, {TABLE}.closed, {TABLE}.closed_since, {TABLE}.version) IS DISTINCT FROM "
            "(excluded.kind, excluded.fields, excluded.required, excluded.closed, excluded.closed_since, "
            "excluded.version) RETURNING type",
            (name, spec["kind"], json.dumps(spec["fields"]), spec["required"], spec["closed"])
            + (spec["closed_since"], spec["version"]),
        ).fetchone()
        if row is not None:
            changed.append(name)
    conn.exec_driver_sql(shape_function(registered_specs(conn)).replace("%", "%%"))
    return changed


def registered_specs(conn: Connection) -> dict[str, dict[str, Any]]:
    """The rows of ``event_types``, as :func:`type_spec` gives them."""
    rows = conn.exec_driver_sql(
        f"SELECT type, kind, fields, required, closed, closed_since, version FROM {TABLE}"
    ).fetchall()
    return {
        r[0]: {"kind": r[1], "fields": r[2], "required": sorted(r[3]), "closed": r[4], "closed_since": r[5]}
        | {"version": r[6]}
        for r in rows
    }
