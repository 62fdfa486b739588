"""The recorder: the interface every backend of the event log implements, and what they share.

A recorder appends events to per-run hash chains (ids idempotent per run, an expected position
for optimistic concurrency, a decide-then-append under the append lock), reads them back by run,
round, type and the ids they name, keeps long texts named by their sha256 (artifacts), verifies the
chain, and holds the projections' caches (snapshots, checkpoints). One module per backend:
:mod:`diagevo.events.sqlite`, :mod:`diagevo.events.postgres` (both on :mod:`diagevo.events.sql`)
and :mod:`diagevo.events.inmemory`. ``EventStore(url)`` (= ``Recorder(url)``) opens the one the
URL names: ``sqlite:///FILE``, ``postgresql+psycopg://...`` or ``memory://NAME``.

Everything here is backend-free: the event serialisation and hashing (so every backend writes
byte-identical chains), the public types and errors.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
import json
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

import orjson

from diagevo.errors import Conflict, DiagevoError, NotADiagevoDatabase, NotFound
from diagevo.events.canonical import canonical_bytes
from diagevo.events.keys import KEY_FIELDS, SCHEMA_VERSION, TEXT_FIELDS, key_values

if TYPE_CHECKING:
    from diagevo.events.schemas import EventIn

GENESIS_HASH = "0" * 64
ARTIFACT_KEY = "$artifact"
FETCH = 4096  # rows per DBAPI fetch on the read paths
MAX_PARAMS = 500  # ids per IN (...) list


def loads(text_: str) -> Any:
    """Parse stored JSON: orjson is about 4x faster than ``json.loads`` here (and a quarter
    faster than pydantic-core's parser, which this used before)."""
    try:
        return _orjson_loads(text_)
    except ValueError:  # anything it is stricter about than the stdlib (integers beyond 64 bits)
        return json.loads(text_)


json_str: Callable[[str], str] = json.encoder.encode_basestring  # a JSON string literal, non-ASCII kept
_orjson_dumps = orjson.dumps
_orjson_loads = orjson.loads
compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


# --- public types -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    event_id: str
    run: str
    round: int
    type: str
    schema_version: int
    data: dict[str, Any]
    recorded_at: str
    prev_hash: str
    hash: str


class EventRow(NamedTuple):
    """(seq, round, type, data) of a stored event: what a fold reads, lighter than a StoredEvent."""

    seq: int
    round: int
    type: str
    data: dict[str, Any]


class _HasTexts(Protocol):
    @property
    def seq(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def data(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class AppendResult:
    appended: int
    skipped: int
    last_seq: int  # last seq of the batch's run after the append (0 for an empty batch)


# what ``append_checked`` hands its decide function: read(types, *, round=None, after_seq=0)
CheckedReader = Callable[..., list[tuple[int, int, str, dict[str, Any]]]]


class StoreError(DiagevoError):
    """Base of the store's errors; the message is one line meant for the user."""


class ConflictError(StoreError, Conflict):
    """``expected_last_seq`` did not match: the run moved on. Nothing was stored."""


class MissingDatabase(StoreError, NotFound):
    """The SQLite file a read names does not exist (nothing is created)."""


class SchemaOutdated(StoreError, NotADiagevoDatabase):
    """The database is at an older revision (or empty and auto-migration is off)."""


# --- hashing ----------------------------------------------------------------------------------


def canonical_prefix(event_id: str, run: str, round: int, type: str, schema_version: int) -> str:
    return f"[{json_str(event_id)},{json_str(run)},{round},{json_str(type)},{schema_version},"


def canonical_event_json(
    event_id: str, run: str, round: int, type: str, schema_version: int, data_json: str
) -> str:
    """Canonical JSON of ``[event_id, run, round, type, schema_version, data]``.

    ``data_json`` is the data exactly as stored (compact, sorted keys), so this equals
    ``json.dumps([...], sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` without
    serialising the data twice.
    """
    return canonical_prefix(event_id, run, round, type, schema_version) + data_json + "]"


def chain_hash(prev_hash: str, canonical: str) -> str:
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


# --- errors -----------------------------------------------------------------------------------


def one_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    return lines[0] if lines else type(orig).__name__




# (event_id, run, round, type, data_json, canonical utf-8 bytes, [(field, sha, text), ...], key columns)
Prepared = tuple[str, str, int, str, str, bytes, list[tuple[str, str, str]], tuple[str | None, ...]]


_KEY_COLUMNS = ", ".join(KEY_FIELDS)
_NO_ARTIFACTS: list[tuple[str, str, str]] = []  # shared, never mutated


def externalise_texts(
    fields: tuple[str, ...], data: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """Replace non-empty texts by ``{"$artifact": sha256}``; returns (data, [(field, sha, text)])."""
    out: dict[str, Any] | None = None
    arts = _NO_ARTIFACTS
    for f in fields:
        value = data.get(f)
        if value and isinstance(value, str):
            sha = hashlib.sha256(value.encode()).hexdigest()
            if out is None:
                out, arts = dict(data), []
            arts.append((f, sha, value))
            out[f] = {ARTIFACT_KEY: sha}
    return (data if out is None else out), arts


def texts_json(arts: list[tuple[str, str, str]]) -> str | None:
    """The ``texts`` column of an event: ``{field: text}`` of the texts its data names (None: none)."""
    if not arts:
        return None
    return _orjson_dumps({f: t for f, _, t in arts}).decode()


def prepare(events: Sequence[EventIn]) -> tuple[list[Prepared], int]:
    """Serialise outside the lock; drops in-batch duplicates (first wins). Returns (rows, dups).

    The canonical JSON of each event (``canonical_event_json``) is built as bytes around its
    data's canonical JSON; the middle part (run, round, type, schema version) repeats within a
    batch and is cached."""
    seen: set[tuple[str, str]] = set()  # (run, event_id): ids are unique per run
    add = seen.add
    rows: list[Prepared] = []
    append = rows.append
    middles: dict[tuple[str, int, str], bytes] = {}  # (run, round, type) -> b',"run",round,"type",v,'
    text_fields, json_str_, to_json, keys_of = TEXT_FIELDS, json_str, canonical_bytes, key_values
    eid = ""
    try:
        for ev in events:
            eid, run = ev.event_id, ev.run
            if (run, eid) in seen:
                continue
            add((run, eid))
            typ, rnd, data = ev.type, ev.round, ev.data
            fields = text_fields.get(typ)
            if fields:
                data, arts = externalise_texts(fields, data)
            else:
                arts = _NO_ARTIFACTS
            data_b = to_json(data)
            middle = middles.get((run, rnd, typ))
            if middle is None:
                middle = middles[run, rnd, typ] = f",{json_str_(run)},{rnd},{json_str_(typ)},{SCHEMA_VERSION},".encode()
            canon = b"[%b%b%b]" % (json_str_(eid).encode(), middle, data_b)
            append((eid, run, rnd, typ, data_b.decode(), canon, arts, keys_of(data)))
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(f"event {eid}: data is not JSON-serialisable: {exc}") from None
    return rows, len(events) - len(rows)




def chain(
    prepared: list[Prepared], heads: dict[str, tuple[int, str]], last_seq: int
) -> tuple[list[tuple[Any, ...]], dict[str, str]]:
    """Number and hash the fresh events after ``last_seq`` (the database's highest seq), each on
    its run's chain; ``heads`` moves on. Returns (rows, artifacts): rows are (seq, event_id, run,
    round, type, schema_version, data, recorded_at, prev_hash, hash, texts, *key columns), and
    artifacts {sha: text} of every text they hold (what a store without a ``texts`` column keeps)."""
    recorded_at = datetime.now(UTC).isoformat(timespec="microseconds")
    prev = {run: h for run, (_, h) in heads.items()}
    last: dict[str, int] = {}
    sha256 = hashlib.sha256
    rows: list[tuple[Any, ...]] = []
    artifacts: dict[str, str] = {}
    seq = last_seq
    for eid, run, rnd, typ, data_json, canon, arts, keys in prepared:
        seq += 1
        p = prev[run]
        h = sha256(p.encode() + canon).hexdigest()  # = chain_hash(p, canonical_event_json(...))
        rows.append((seq, eid, run, rnd, typ, SCHEMA_VERSION, data_json, recorded_at, p, h, texts_json(arts), *keys))
        for _f, sha, t in arts:
            artifacts[sha] = t
        prev[run] = h
        last[run] = seq
    for run, run_last in last.items():
        heads[run] = (run_last, prev[run])
    return rows, artifacts


def check_artifacts(texts: dict[str, str]) -> None:
    """An artifact is shown only as the text its key names: an edited one is refused."""
    sha256 = hashlib.sha256
    for sha, text_ in texts.items():
        if sha256(text_.encode()).hexdigest() != sha:
            raise StoreError(f"artifact {sha} was altered (its text does not hash to its key): run `diagevo memory verify`")


def inline_problems(seq: int, refs: list[tuple[str, str]], column: str) -> tuple[list[str], dict[str, Any]]:
    """What is wrong with an event's ``texts`` column against the keys its data names, and the
    column parsed ({} when it is not a JSON object)."""
    try:
        held = loads(column)
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


E = TypeVar("E", bound=_HasTexts)


def restore_inline(batch: Sequence[E], columns: Sequence[str | None]) -> list[E]:
    """Put each event's texts back inline from its ``texts`` column, checked against the keys
    its data names; returns the events that name texts but have no such column (appended
    before migration 0008: their texts are in the artifacts table)."""
    rest: list[E] = []
    for ev, column in zip(batch, columns, strict=True):
        refs = list(text_refs(ev.type, ev.data))
        if not refs:
            continue
        if column is None:
            rest.append(ev)
            continue
        problems, held = inline_problems(ev.seq, refs, column)
        if problems:
            raise StoreError(
                f"the texts of the event at seq {ev.seq} were altered (they do not hash to the keys "
                "in its data): run `diagevo memory verify`"
            )
        for f, _sha in refs:
            ev.data[f] = held[f]
    return rest


def json_or_error(obj: Any, what: str) -> str:
    try:
        return compact(obj)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON-serialisable: {exc}") from None


def text_refs(type_: str, data: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(field, sha256) of the texts an event's stored data names as artifacts."""
    for f in TEXT_FIELDS.get(type_, ()):
        v = data.get(f)
        if isinstance(v, dict) and isinstance(v.get(ARTIFACT_KEY), str):
            yield f, v[ARTIFACT_KEY]


# --- the interface ----------------------------------------------------------------------------


class Recorder(ABC):
    """The event log of one database. ``Recorder(url)`` opens the backend the URL names; each
    backend implements every abstract method below (checked for all of them by
    ``tests/test_recorder_contract.py``)."""

    url: str
    persistent = True  # whether the log outlives this process (False: the in-memory recorder)

    def __new__(cls, url: str, *args: Any, **kwargs: Any) -> Recorder:
        if cls is Recorder or getattr(cls, "_dispatch", False):
            from diagevo.events.backends import recorder_class

            cls = recorder_class(url)
        return super().__new__(cls)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        from diagevo.urls import redact_url

        return f"EventStore({redact_url(self.url)!r})"

    def close(self) -> None:  # noqa: B027 - a backend without connections has nothing to release
        """Release connections (the log stays)."""

    # --- append ---------------------------------------------------------------------------------

    @abstractmethod
    def append(self, events: Sequence[EventIn], *, expected_last_seq: int | None = None) -> AppendResult:
        """Append a batch in one transaction. Event ids the run already holds are skipped
        silently (ids are unique per run: the same id in another run is another event);
        ``expected_last_seq`` (a batch of one run) raises :class:`ConflictError` when the run
        is elsewhere, storing nothing."""
        ...

    @abstractmethod
    def append_checked(self, run: str, decide: Callable[[CheckedReader], Sequence[EventIn]]) -> AppendResult:
        """Append the events ``decide`` returns, having let it read ``run``'s events, under the
        append lock in one transaction: no writer appends between its reads and the write.
        ``decide`` gets ``read(types, *, round=None, after_seq=0)`` -> [(seq, round, type, data)]
        (texts as artifact refs); ``decide`` raising stores nothing."""
        ...

    # --- reads ----------------------------------------------------------------------------------

    @abstractmethod
    def iter_rows(
        self, run: str, *, after_seq: int = 0, types: Collection[str] | None = None, round: int | None = None
    ) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
        """(seq, round, type, data) in seq order, texts left as artifact refs: the replay path."""
        ...

    @abstractmethod
    def read(
        self,
        run: str,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        types: Collection[str] | None = None,
        round: int | None = None,
        texts: bool = False,
        limit: int | None = None,
    ) -> Iterator[StoredEvent]:
        """Events of a run in seq order; ``texts=True`` puts artifact texts back inline."""
        ...

    @abstractmethod
    def read_naming(
        self,
        run: str,
        keys: dict[str, Collection[str]],
        *,
        types: Collection[str] | None = None,
        round: int | None = None,
        texts: bool = False,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Events of a run whose data names one of the given ids in one of the given fields
        (:data:`diagevo.events.keys.KEY_FIELDS`), in seq order."""
        ...

    def naming_rows(
        self, run: str, keys: dict[str, Collection[str]], *, types: Collection[str] | None = None, texts: bool = False
    ) -> list[EventRow]:
        """:meth:`read_naming`'s events as (seq, round, type, data): what a fold needs (a SQL
        backend reads only those columns)."""
        return [EventRow(e.seq, e.round, e.type, e.data) for e in self.read_naming(run, keys, types=types, texts=texts)]

    @abstractmethod
    def artifact_texts(self, shas: Collection[str]) -> dict[str, str]:
        """The stored texts of these artifact keys, as stored (unchecked); absent keys left out."""
        ...

    @abstractmethod
    def last_seq(self, run: str) -> int:
        """The run's last seq (0 for a run with no events)."""
        ...

    @abstractmethod
    def runs(self) -> list[str]:
        """Run ids in order of their first event."""
        ...

    @abstractmethod
    def existing_keys(self, keys: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of these (run, event_id) pairs are already stored."""
        ...

    @abstractmethod
    def retained_counts(self, run: str) -> dict[int, int]:
        """Per round, how many ``question.scored`` events say ``retained: true``."""
        ...

    @abstractmethod
    def type_counts(
        self, run: str, round: int | None = None, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> dict[tuple[int, str], int]:
        """Events per (round, type) of a run, or of one round; of the events in (after_seq, upto_seq]."""
        ...

    @abstractmethod
    def latest_run(self) -> str | None:
        """The run of the most recently appended event."""
        ...

    @abstractmethod
    def event_at(self, run: str, seq: int) -> tuple[int, str, str] | None:
        """(round, type, hash) of the run's event at ``seq``, or None."""
        ...

    @abstractmethod
    def verify_chain(self, run: str) -> list[str]:
        """Recompute the run's hash chain; one line per problem (empty: intact)."""
        ...

    def artifact(self, sha256: str) -> str:
        found = self.artifact_texts([sha256])
        if sha256 not in found:
            raise StoreError(f"unknown artifact {sha256}")
        check_artifacts(found)
        return found[sha256]

    def has_run(self, run: str) -> bool:
        return self.last_seq(run) > 0

    def existing_ids(self, run: str, ids: Collection[str]) -> set[str]:
        """Which of these event ids the run already holds (ids are unique per run)."""
        return {eid for _, eid in self.existing_keys([(run, eid) for eid in ids])}

    def verify_artifacts(self, run: str) -> list[str]:
        """Every text the run's events name is stored and hashes to its key (the key is in the
        chained data, so an edited text cannot hide); one line per problem."""
        named: dict[str, int] = {}  # sha -> first seq naming it
        for seq, _rnd, typ, data in self.iter_rows(run, types=list(TEXT_FIELDS)):
            for _f, sha in text_refs(typ, data):
                named.setdefault(sha, seq)
        return self._verify_stored(named)

    def _verify_stored(self, named: dict[str, int]) -> list[str]:
        """Check texts looked up by key (:meth:`artifact_texts`); ``named``: sha -> first seq naming it."""
        problems: list[str] = []
        shas = list(named)
        for i in range(0, len(shas), MAX_PARAMS):
            chunk = shas[i : i + MAX_PARAMS]
            texts = self.artifact_texts(chunk)
            for sha in chunk:
                if sha not in texts:
                    problems.append(f"seq {named[sha]}: artifact {sha} is missing")
                elif hashlib.sha256(texts[sha].encode()).hexdigest() != sha:
                    problems.append(f"seq {named[sha]}: artifact {sha} was altered (its text does not hash to its key)")
        return problems

    def restore_texts(
        self, batch: Sequence[_HasTexts], fetch: Callable[[Collection[str]], dict[str, str]] | None = None
    ) -> None:
        """Put the artifact texts the events name back inline (checked against their keys);
        ``fetch`` reads them (default: :meth:`artifact_texts`)."""
        refs = [(ev.data, f, sha) for ev in batch for f, sha in text_refs(ev.type, ev.data)]
        if not refs:
            return
        texts = (fetch or self.artifact_texts)({sha for _, _, sha in refs})
        check_artifacts(texts)
        for data, f, sha in refs:
            try:
                data[f] = texts[sha]
            except KeyError:
                raise StoreError(f"artifact {sha} is missing from the database") from None

    # --- projections' caches: snapshots and checkpoints -------------------------------------------

    @abstractmethod
    def put_snapshot(self, run: str, round: int, seq: int, state: dict[str, Any], hash: str | None = None) -> None:
        """Store (or replace) the cached memory of ``run`` at committed ``round``, folded up to
        the event at ``seq`` whose hash is ``hash`` (looked up when not given)."""
        ...

    @abstractmethod
    def get_snapshot(self, run: str, round: int) -> tuple[int, dict[str, Any]] | None:
        """(seq, state) of the snapshot at ``round``, or None."""
        ...

    @abstractmethod
    def latest_snapshot(self, run: str, upto_round: int | None = None) -> tuple[int, int, dict[str, Any]] | None:
        """(round, seq, state) of the latest snapshot at or before ``upto_round``."""
        ...

    @abstractmethod
    def snapshots(self, run: str) -> list[tuple[int, int, dict[str, Any]]]:
        """(round, seq, state) of every snapshot of the run, by round."""
        ...

    @abstractmethod
    def snapshot_anchors(self, run: str) -> list[tuple[int, int, str | None]]:
        """(round, seq, hash) of every snapshot of the run, by round (hash None when unknown)."""
        ...

    @abstractmethod
    def drop_snapshots(self, run: str) -> int:
        """Delete the run's snapshots (they are a cache); returns how many were dropped."""
        ...

    @abstractmethod
    def get_checkpoint(self, name: str, run: str) -> int:
        """Last seq applied by projection ``name`` for ``run``; 0 when none."""
        ...

    @abstractmethod
    def checkpoint_info(self, name: str, run: str) -> dict[str, Any]:
        """The ``info`` stored with a checkpoint; {} when none."""
        ...

    @abstractmethod
    def set_checkpoint(self, name: str, run: str, seq: int, info: dict[str, Any] | None = None) -> None:
        """Store (or move) projection ``name``'s checkpoint for ``run``."""
        ...

    @abstractmethod
    def checkpoints(self, run: str) -> dict[str, int]:
        """Projection name -> last seq it applied, for the run."""
        ...
