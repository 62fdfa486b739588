"""How an event becomes a stored row: its data's canonical JSON (texts kept apart, by hash), its
key columns, and its place on its run's hash chain. Backend-free, so that every backend writes
byte-identical chains."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from diagevo.catalog import KEY_FIELDS, TEXT_FIELDS
from diagevo.log.canonical import canonical_bytes
from diagevo.log.errors import StoreError
from diagevo.log.stored import ARTIFACT_KEY, DIGITS, unreadable
from diagevo.text.parsing import MAX_DEPTH

if TYPE_CHECKING:
    from diagevo.schemas import EventIn

GENESIS_HASH = "0" * 64
FIRST_SEQ, LAST_SEQ = -(2**63), 2**63 - 1
"""The seqs a database keeps (a 64-bit integer): no writer numbers a row past ``LAST_SEQ``, and a
read of a range beyond either end selects nothing (a raw INSERT into SQLite may store either)."""
json_str: Callable[[str], str] = json.encoder.encode_basestring  # a JSON string literal, non-ASCII kept
_orjson_dumps = orjson.dumps


# --- hashing ----------------------------------------------------------------------------------


def canonical_event_json(event_id: str, run: str, t: int, event_type: str, schema_version: int, data_json: str) -> str:
    """Canonical JSON of ``[event_id, run, round, type, schema_version, data]``.

    ``data_json`` is the data exactly as stored (compact, sorted keys), so this equals
    ``json.dumps([...], sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` without
    serialising the data twice.
    """
    return f"[{json_str(event_id)},{json_str(run)},{t},{json_str(event_type)},{schema_version},{data_json}]"


def chain_hash(prev_hash: str, canonical: str) -> str:
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


# --- serialisation, as the rows are taken ---------------------------------------------------------

# (event_id, run, round, type, schema_version, data_json, canonical utf-8 bytes, texts column, key columns)
Prepared = tuple[str, str, int, str, int, str, bytes, str | None, tuple[str | None, ...]]
Appended = tuple[list[Prepared], dict[str, tuple[int, str]]]  # (the fresh events, each run's (last seq, hash))

_KEY_SET = frozenset(KEY_FIELDS)
_STR_OR_NONE = frozenset({str, type(None)})
_NO_KEYS: tuple[str | None, ...] = (None,) * len(KEY_FIELDS)


def key_values(data: Mapping[str, Any]) -> tuple[str | None, ...]:
    """The key columns of an event with this data: each key field's value when it is a string."""
    if _KEY_SET.isdisjoint(data):
        return _NO_KEYS
    values = tuple(map(data.get, KEY_FIELDS))
    if _STR_OR_NONE.issuperset(map(type, values)):
        return values
    return tuple(v if isinstance(v, str) else None for v in values)


def externalise_texts(fields: tuple[str, ...], data: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Replace non-empty texts by ``{"$artifact": sha256}``; returns (data, texts column)."""
    out: dict[str, Any] | None = None
    held: dict[str, str] = {}
    for f in fields:
        value = data.get(f)
        if value and isinstance(value, str):
            if out is None:
                out = dict(data)
            held[f] = value
            out[f] = {ARTIFACT_KEY: hashlib.sha256(value.encode()).hexdigest()}
    if out is None:
        return data, None
    return out, _orjson_dumps(held).decode()


class Pending:
    """One append's events, serialised as they are taken: a backend that streams its rows
    (PostgreSQL's COPY) serialises and hashes event n+1 while the database takes event n, rather
    than the database waiting for the whole batch. In-batch duplicates are dropped (first wins).
    A bad event raises :class:`StoreError` when it is reached, and the transaction it is
    streamed into is rolled back with it.

    The canonical JSON of each event (``canonical_event_json``) is built as bytes around its
    data's canonical JSON; the middle part (run, round, type, schema version) repeats within a
    batch and is cached."""

    __slots__ = ("events", "done", "_rest")

    def __init__(self, events: Sequence[EventIn]) -> None:
        self.events = events
        self.done: list[Prepared] = []  # the events serialised so far, in order
        self._rest = self._serialise()

    @property
    def runs(self) -> set[str]:
        """The runs the events belong to (known before any is serialised)."""
        return {ev.run for ev in self.events}

    def __iter__(self) -> Iterator[Prepared]:
        """The events not taken yet, each serialised as it is taken."""
        return self._rest

    def all(self) -> list[Prepared]:
        """Every fresh event of the batch, serialised."""
        for _ in self._rest:
            pass
        return self.done

    def _serialise(self) -> Iterator[Prepared]:
        seen: set[tuple[str, str]] = set()  # (run, event_id): ids are unique per run
        middles: dict[tuple[str, int, str, int], bytes] = {}  # -> b',"run",round,"type",v,'
        add, keep = seen.add, self.done.append
        text_fields, json_str_, to_json, keys_of = TEXT_FIELDS, json_str, canonical_bytes, key_values
        for ev in self.events:
            eid, run = ev.event_id, ev.run
            if (run, eid) in seen:
                continue
            add((run, eid))
            typ, rnd, data, v = ev.type, ev.round, ev.data, ev.schema_version
            try:
                fields = text_fields.get(typ)
                texts = None
                if fields:
                    data, texts = externalise_texts(fields, data)
                data_b = to_json(data)
            except (TypeError, ValueError, RecursionError) as exc:
                raise StoreError(f"event {eid}: data is not JSON-serialisable: {exc}") from None
            if (data_b.count(b"[") + data_b.count(b"{") > MAX_DEPTH or DIGITS.search(data_b)) and (
                problem := unreadable(data_b)
            ):
                raise StoreError(f"event {eid}: its data is {problem}: no reader would read it")
            middle = middles.get((run, rnd, typ, v))
            if middle is None:
                middle = middles[run, rnd, typ, v] = f",{json_str_(run)},{rnd},{json_str_(typ)},{v},".encode()
            canon = b"[%b%b%b]" % (json_str_(eid).encode(), middle, data_b)
            prepared = (eid, run, rnd, typ, v, data_b.decode(), canon, texts, keys_of(data))
            keep(prepared)
            yield prepared


COLUMNS = (
    "seq", "event_id", "run_id", "round", "type", "schema_version", "data", "recorded_at", "prev_hash", "hash", "texts",
    *KEY_FIELDS,
)  # fmt: skip
"""The ``events`` table's columns, in the order of :func:`chain`'s rows."""


def chain(prepared: Iterable[Prepared], heads: dict[str, tuple[int, str]], last_seq: int) -> Iterator[tuple[Any, ...]]:
    """Number and hash the fresh events after ``last_seq`` (the database's highest seq), each on
    its run's chain, as they are taken; ``heads`` moves on once every row is taken. Rows of
    :data:`COLUMNS`."""
    recorded_at = datetime.now(UTC).isoformat(timespec="microseconds")
    prev = {run: h for run, (_, h) in heads.items()}
    last: dict[str, int] = {}
    sha256 = hashlib.sha256
    seq = last_seq
    for eid, run, rnd, typ, version, data_json, canon, texts, keys in prepared:
        seq += 1
        if seq > LAST_SEQ:
            raise StoreError(
                f"nothing can be appended to the log: its highest seq is {last_seq}, and a seq is a 64-bit integer "
                f"(at most {LAST_SEQ}): no row fits after it"
            )
        p = prev[run]
        h = prev[run] = sha256(p.encode() + canon).hexdigest()  # = chain_hash(p, canonical_event_json(...))
        last[run] = seq
        yield (seq, eid, run, rnd, typ, version, data_json, recorded_at, p, h, texts, *keys)
    for run, run_last in last.items():
        heads[run] = (run_last, prev[run])
