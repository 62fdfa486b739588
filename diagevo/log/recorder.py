"""The recorder: the roles a backend of the log plays, and what every backend shares.

A writer appends events to per-run hash chains (ids idempotent per run; a decision taken under
the append lock, so that no writer appends between what it read and what it writes); a reader
reads them back by run, seq range, round, type and the ids they name; an operator verifies the
chain and keeps the views' saved states (a cache each view checks out against the log). What the
events mean is for :mod:`diagevo.views` and :mod:`diagevo.memory`. :class:`Recorder`, all three
roles, is what each backend implements; everything here is backend-free, so that every backend
writes byte-identical chains.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Self, TypedDict, TypeVar, Unpack

from diagevo.catalog import (
    CATALOG,
    KEY_FIELDS,
    EventTypes,
    Stamp,
    StoredEvent,
    UnreadableRow,
)
from diagevo.errors import Call
from diagevo.log.chain import (
    Appended,
    Pending,
)
from diagevo.log.errors import ConflictError, RunBusy, StoreError, UnreadableRowError
from diagevo.log.registry import shape_problem
from diagevo.log.stored import (
    RawRow,
    column_problem,
    loads_data,
    not_text,
    row_problem,
    text_problems,
    text_refs,
)
from diagevo.text.urls import redact_url

if TYPE_CHECKING:
    from diagevo.schemas import EventIn

FETCH = 4096  # rows per DBAPI fetch on the read paths
MAX_PARAMS = 500  # values per IN (...) list
LOOKUP_FIELDS = ("event_id", *KEY_FIELDS)
"""What ``read(keys=...)`` looks events up by: their id, or an id their data names."""


compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


# --- public types -----------------------------------------------------------------------------


def payload(e: StoredEvent) -> dict[str, Any]:
    """An event's data as stored (its long texts inline where the read put them back), for what
    copies or shows the stored bytes (the JSONL interchange, a fork's or a what-if's copy,
    ``memory events``); what reads an event's meaning reads :attr:`StoredEvent.event`."""
    if e._data is None:
        raise LookupError(f"the event at seq {e.seq} was read without its data (rows(data=False))")
    return e._data


@dataclass(frozen=True)
class ViewState:
    """A view's saved state for one run: what it had made of the log up to the event at ``seq``,
    whose hash was ``hash``. ``part`` tells states of one view apart (the round of a memory
    snapshot; 0 for a view with one state per run)."""

    name: str
    run: str
    part: int
    seq: int
    hash: str
    state: dict[str, Any]


@dataclass(frozen=True)
class AppendResult:
    """What an append did: how many events it stored and skipped (ids the run held), the seq of
    the batch's run after it, and the events decided (``events``: what a decision returned, so
    its caller reads what was decided from the result, not from a list the decision filled)."""

    appended: int
    skipped: int
    last_seq: int  # last seq of the batch's run after the append (0 for an empty batch)
    events: tuple[EventIn, ...] = dataclass_field(default=(), compare=False)  # what was decided; the counts compare


def _round(round_: Any, version: Any) -> int:
    """A row's round, checked with its version column (:func:`column_problem`): a row whose
    columns no reader can take is a :class:`ValueError`, which the read turns into the row
    passed over."""
    why = column_problem(round_, version)
    if why is not None:
        raise ValueError(why)
    return int(round_)


def event_data(type_: str, text: str, version: int) -> dict[str, Any]:
    """An event's stored data as every reader takes it (:func:`~diagevo.log.stored.loads_data`),
    in its type's shape: a declared field of another JSON type, a required field missing, a
    bound broken (what PostgreSQL's insert check refuses, :func:`~diagevo.log.registry.shape_problem`;
    SQLite has no such check) is a :class:`ValueError` naming it, which the read turns into the
    row passed over (:func:`read_problem`). A type the catalog does not hold is left to the
    readers that name it."""
    data = loads_data(text)
    problem = shape_problem(type_, data, version) if type_ in CATALOG else None
    if problem is not None:
        raise ValueError(problem)
    return data


def read_problem(round_: int, data: str | None, type_: str | None = None, version: int | None = None) -> str | None:
    """Why every reader passes over a stored row, or None: its round below 0, its data past the
    readers' bounds or no JSON object (:func:`~diagevo.log.stored.row_problem`), or (``type_``
    and ``version`` given) out of its type's shape or at a version its class does not have
    (:func:`event_data`)."""
    why = row_problem(round_, data, 1 if version is None else version)
    if why is not None or data is None or type_ is None or version is None:
        return why
    try:
        event_data(type_, data, version)
    except ValueError as exc:
        return str(exc)
    return None


TEXTS_READ = frozenset(("type", "data", "event_id", "recorded_at", "prev_hash", "hash"))
"""The text columns a read checks of each row it selects them of: what the row means (its type,
its data) and where it lies in the log (its id, its stamp, its hashes). SQLite keeps a BLOB, or
bytes that are not UTF-8, in any of them: such a row is passed over by each read that selects
the column, and refused by the run's admission, whose read (the fold's) selects all six."""


def why_unreadable(columns: Sequence[str], row: Sequence[Any]) -> str | None:
    """Why no reader takes ``row``, read as these ``columns`` (a :class:`Shape`'s), or None: one
    of :data:`TEXTS_READ` no UTF-8 text (:func:`~diagevo.log.stored.not_text`), or what
    :func:`read_problem` says. Asked where a read could not make a row, to name it."""
    got = dict(zip(columns, row, strict=False))
    return not_texts(columns, row) or read_problem(
        got["round"], got.get("data"), got["type"], got.get("schema_version", 1)
    )


def not_texts(columns: Sequence[str], row: Sequence[Any]) -> str | None:
    """Which of :data:`TEXTS_READ` of ``row`` (read as these ``columns``) is no UTF-8 text, named
    (:func:`~diagevo.log.stored.not_text`); None when each is one."""
    for name, value in zip(columns, row, strict=False):
        if type(value) is not str and name in TEXTS_READ:
            return not_text(name)
    return None


# --- texts --------------------------------------------------------------------------------------


T = TypeVar("T", StoredEvent, RawRow, StoredEvent | UnreadableRow)  # what a read makes of a row


def restore_texts(batch: Sequence[StoredEvent], columns: Sequence[str | None]) -> list[StoredEvent]:
    """Put each event's texts back inline from its ``texts`` column, each checked against the
    key its data names: an altered or missing text is refused, never shown."""
    for ev, column in zip(batch, columns, strict=True):
        data = payload(ev)
        refs = text_refs(ev.type, data)
        if not refs:
            continue
        problems, held = text_problems(ev.seq, refs, column)
        if problems:
            raise UnreadableRowError(
                f"the texts of the event at seq {ev.seq} are missing or altered (they do not hash to the keys "
                "in its data): run",
                Call("verify_run", "diagevo.verify_run(store, run)"),
            )
        for f, _sha in refs:
            data[f] = held[f]
    return list(batch)


def encoded_state(s: ViewState) -> str:
    """A view's saved state as it is stored: compact JSON."""
    try:
        return compact(s.state)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"the saved state of view {s.name!r} is not JSON-serialisable: {exc}") from None


def lookup_keys(keys: Mapping[str, Collection[str]]) -> dict[str, list[str]]:
    """``keys`` checked (fields the log can look events up by) and deduplicated."""
    out: dict[str, list[str]] = {}
    for field, values in keys.items():
        if field not in LOOKUP_FIELDS:
            raise StoreError(f"events cannot be looked up by {field!r}: use one of {', '.join(LOOKUP_FIELDS)}")
        out[field] = list(dict.fromkeys(values))
    return out


# --- the interface: one role each -------------------------------------------------------------


LOCK_WAIT_S = 60.0
"""How long an append waits for the append lock by default (where the backend bounds it)."""


class Query(NamedTuple):
    """Which of a run's events a read selects: those after ``after_seq`` and up to ``upto_seq``,
    of these ``types``, of round ``in_round``, naming one of these ids (``keys``: a field of
    :data:`LOOKUP_FIELDS` -> ids; any field may match)."""

    run: str
    after_seq: int = 0
    upto_seq: int | None = None
    types: EventTypes | None = None
    in_round: int | None = None
    keys: Mapping[str, Collection[str]] | None = None


class Filters(TypedDict, total=False):
    """A read's filters: :class:`Query`'s fields but the run."""

    after_seq: int
    upto_seq: int | None
    types: EventTypes | None
    in_round: int | None
    keys: Mapping[str, Collection[str]] | None


class Shape(NamedTuple, Generic[T]):
    """What a read makes of a row: the columns it reads, and what their values become."""

    columns: tuple[str, ...]
    make: Callable[[Any], T]


# a row no reader can take (:func:`why_unreadable`) is a ValueError here, which the read turns
# into the row passed over; its texts (:data:`TEXTS_READ`) are tested first, in one chained test
# (a row diagevo wrote holds texts there: the one test every row pays)
def _whole(r: Any) -> StoredEvent:
    if not (type(r[1]) is type(r[4]) is type(r[6]) is type(r[7]) is type(r[8]) is type(r[9]) is str):
        raise ValueError("a column is not UTF-8 text")
    return StoredEvent(r[0], _round(r[3], r[5]), r[4], r[5], event_data(r[4], r[6], r[5]), Stamp(r[1], r[2], *r[7:10]))


def _row(r: Any) -> StoredEvent:
    if not (type(r[2]) is type(r[4]) is str):
        raise ValueError("a column is not UTF-8 text")
    return StoredEvent(r[0], _round(r[1], r[3]), r[2], r[3], event_data(r[2], r[4], r[3]))


def _meta(r: Any) -> StoredEvent:
    if type(r[2]) is not str:
        raise ValueError("its type is not UTF-8 text")
    return StoredEvent(r[0], _round(r[1], r[3]), r[2], r[3])


WHOLE = Shape(
    ("seq", "event_id", "run_id", "round", "type", "schema_version", "data", "recorded_at", "prev_hash", "hash"),
    _whole,
)
ROW = Shape(("seq", "round", "type", "schema_version", "data"), _row)
META = Shape(("seq", "round", "type", "schema_version"), _meta)


def _row_or_unreadable(r: Any) -> StoredEvent | UnreadableRow:
    """:data:`ROW`'s event, its stamp's texts checked too, or the row no reader can take in its
    place, said why (:func:`why_unreadable`)."""
    try:
        if not (type(r[5]) is type(r[6]) is type(r[7]) is type(r[8]) is str):
            raise ValueError("a column is not UTF-8 text")
        return _row(r)
    except ValueError as exc:
        return UnreadableRow(r[0], shown_type(r[2]), why_unreadable(ROW_OR_UNREADABLE.columns, r) or str(exc))


ROW_OR_UNREADABLE = Shape((*ROW.columns, "event_id", "recorded_at", "prev_hash", "hash"), _row_or_unreadable)
"""The fold's read (:func:`every_row`): :data:`ROW`'s columns and the texts of the row's stamp, so
that the run's admission refuses every row a read of any column refuses (a read of fewer columns,
:data:`ROW` or :data:`META`, leaves to the admission what it does not select, as it leaves the data)."""


TYPE_SHOWN = 64
"""How much of an unreadable row's type column its refusal keeps (the column is anyone's text)."""


def shown_type(type_: Any) -> str:
    """An unreadable row's type as its refusal keeps it: the text, cut to :data:`TYPE_SHOWN`; for
    a type that is no UTF-8 text, what Python would spell of it (a refusal is saved and shown)."""
    return (type_ if type(type_) is str else ascii(type_))[:TYPE_SHOWN]


RAW = Shape(
    (
        "seq",
        "event_id",
        "round",
        "type",
        "schema_version",
        "data",
        "prev_hash",
        "hash",
        "texts",
        *KEY_FIELDS,
        "recorded_at",
    ),
    lambda r: RawRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], tuple(r[9:-1]), r[-1]),
)


class Stored(ABC):
    """What every role stands on: the log at ``url`` and the one selection every read is made of."""

    url: str

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redact_url(self.url)!r})"

    def close(self) -> None:  # noqa: B027 - a backend without connections has nothing to release
        """Release connections (the log stays)."""

    @abstractmethod
    def _select(
        self, q: Query, shape: Shape[T], texts: bool, limit: int | None = None, newest: bool = False
    ) -> Iterator[T]:
        """The events ``q`` selects, in seq order, as ``shape`` makes them; ``texts``: with the
        long texts back inline, checked against their keys. ``limit``: the first that many, or
        with ``newest`` the last that many."""


class EventWriter(Stored):
    """What a writer of the log needs: append (a decision taken under the append lock), the head
    of a run, and the run's writer lease."""

    lock_wait_s = LOCK_WAIT_S  # the longest an append waits for the append lock (limits.lock_wait_s)

    @abstractmethod
    def _appending(self) -> AbstractContextManager[Callable[[Pending], Appended]]:
        """One transaction under the append lock, yielding what stores serialised events there:
        it returns those whose ids their runs did not hold, and each run's head after them."""

    @abstractmethod
    def head(self, run: str) -> tuple[int, str]:
        """(last seq, last hash) of the run; (0, the genesis hash) for a run with no events."""

    @abstractmethod
    def lease(self, run: str, holder: str) -> AbstractContextManager[None]:
        """Hold the run's writer lease while the context is open: one long writer of a run at a
        time (a training process). ``holder`` says who (host, pid, since when) for the error a
        second writer gets (:class:`RunBusy`). The lease ends with the context or with its
        process: a crashed writer leaves nothing to clear by hand."""

    @abstractmethod
    def lease_holder(self, run: str) -> str | None:
        """Who holds the run's writer lease now, or None."""

    def append_decided(self, decide: Callable[[], Sequence[EventIn]]) -> AppendResult:
        """Append the events ``decide`` returns, in one transaction, with the append lock held
        while it decides: whatever it reads through this recorder is the log's current head, and
        no writer appends between those reads and the write. Ids a run already holds are skipped
        (ids are unique per run). ``decide`` raising stores nothing. The result's ``last_seq`` is
        that of the last event's run (0 when there was nothing to append)."""
        with self._appending() as store:
            events = list(decide())
            if not events:
                return AppendResult(0, 0, 0)
            pending = Pending(events)
            fresh, heads = store(pending)
        return AppendResult(len(fresh), len(events) - len(fresh), heads[events[-1].run][0], tuple(events))

    def append(self, events: Sequence[EventIn], *, expected_last_seq: int | None = None) -> AppendResult:
        """Append a batch in one transaction (ids a run holds already are skipped silently);
        ``expected_last_seq`` (a batch of one run) raises :class:`ConflictError` when the run is
        elsewhere, storing nothing."""
        if not events:
            return AppendResult(0, 0, 0)
        if expected_last_seq is None:
            return self.append_decided(lambda: events)
        runs = {ev.run for ev in events}
        if len(runs) > 1:
            raise StoreError("expected_last_seq needs a batch of a single run")
        (run,) = runs

        def check() -> Sequence[EventIn]:
            at = self.last_seq(run)
            if at != expected_last_seq:
                raise ConflictError(f"run {run!r} is at seq {at}, expected {expected_last_seq}")
            return events

        return self.append_decided(check)

    def last_seq(self, run: str) -> int:
        """The run's last seq (0 for a run with no events)."""
        return self.head(run)[0]


class EventReader(Stored):
    """What a reader of the log needs: a run's events (each filter an indexed read), how many
    there are, and which runs there are. A backend implements the two selections (``_select``,
    ``_count``) and the run list; the filters are spelled once, here."""

    persistent = True  # whether the log outlives this process (False: the in-memory recorder)
    read_runs: Mapping[str, None] = MappingProxyType({})
    """The runs whose events this recorder has read, in order (a SQL backend's): those whose
    refused rows a command names once it is done (:mod:`diagevo.views.admission`)."""
    runless: Mapping[int, str] = MappingProxyType({})
    """Rows of no run a reader can ask for, met by :meth:`runs` (a SQL backend's: a run id that is
    no UTF-8 text, which SQLite keeps): the first seq of each such run id -> why, named by the
    command that listed the runs."""

    @abstractmethod
    def _count(self, q: Query) -> int:
        """How many events ``q`` selects, counted where they are stored."""

    @abstractmethod
    def runs(self) -> list[str]:
        """Run ids in order of their first event."""

    @abstractmethod
    def latest_run(self) -> str | None:
        """The run of the most recently appended event."""

    def read(
        self,
        run: str,
        *,
        texts: bool = False,
        limit: int | None = None,
        newest: bool = False,
        **filters: Unpack[Filters],
    ) -> Iterator[StoredEvent]:
        """A run's events in seq order, selected as :class:`Query` says. ``texts=True`` puts the
        long texts back inline (checked against their keys). ``limit``: the first that many, or
        with ``newest`` the last that many (still in seq order; a SQL backend reads only those
        rows when one index serves the read)."""
        return self._select(Query(run, **filters), WHOLE, texts, limit, newest)

    def rows(
        self,
        run: str,
        *,
        texts: bool = False,
        data: bool = True,
        limit: int | None = None,
        newest: bool = False,
        **filters: Unpack[Filters],
    ) -> Iterator[StoredEvent]:
        """:meth:`read`'s events without their :class:`Stamp`: what a fold or a count needs (a SQL
        backend reads only those columns; ``data=False`` leaves the data out, and so the event)."""
        return self._select(Query(run, **filters), ROW if data else META, texts and data, limit, newest)

    def count(self, run: str, **filters: Unpack[Filters]) -> int:
        """How many events :meth:`read` gives with these filters (a SQL backend returns one
        number; no event is read)."""
        return self._count(Query(run, **filters))

    def has_run(self, run: str) -> bool:
        return next(self._select(Query(run), META, False, 1), None) is not None

    def existing_ids(self, run: str, ids: Collection[str]) -> set[str]:
        """Which of these event ids the run already holds."""
        if not ids:
            return set()
        return {e.event_id for e in self.read(run, keys={"event_id": ids})}

    def event_at(self, run: str, seq: int) -> StoredEvent | None:
        """The run's event at ``seq``, or None."""
        return next(self.read(run, after_seq=seq - 1, upto_seq=seq), None)


def every_row(
    store: EventReader, run: str, after_seq: int = 0, upto_seq: int | None = None
) -> Iterator[StoredEvent | UnreadableRow]:
    """:meth:`~EventReader.rows` of every type after ``after_seq`` (up to ``upto_seq``), a row no
    reader can take given in its place as an :class:`~diagevo.catalog.UnreadableRow` (every other
    read leaves it out): what the fold reads, so that the run's admission names every row it does
    not take (:data:`ROW_OR_UNREADABLE`)."""
    return store._select(Query(run, after_seq=after_seq, upto_seq=upto_seq), ROW_OR_UNREADABLE, False)


class LogOperator(Stored):
    """What an operator of the log needs: the rows exactly as stored (verification, export), the
    check of a run's chain, and the views' saved states (a cache each view checks out against
    the log)."""

    @abstractmethod
    def view_states(
        self, name: str, run: str, *, upto: int | None = None, latest: bool = False, anchored: bool = True
    ) -> list[ViewState]:
        """The saved states of view ``name`` for ``run``, by part (those at or below part
        ``upto``; only the last with ``latest``). With ``anchored`` (every read but
        verification's), only states whose (seq, hash) is an event of the run's log, written by a
        writer this connection trusts (on PostgreSQL: itself or the owner of the schema's
        tables): a state the log does not vouch for is never read."""

    @abstractmethod
    def put_view_states(self, states: Sequence[ViewState]) -> None:
        """Store (or replace) these states, in one transaction."""

    @abstractmethod
    def drop_view_states(self, name: str, run: str) -> int:
        """Delete a view's states for a run (they are a cache); returns how many."""

    def raw(self, run: str, **filters: Unpack[Filters]) -> Iterator[RawRow]:
        """A run's rows exactly as stored, in seq order (what verification recomputes, and what
        a check of the stored bytes reads)."""
        return self._select(Query(run, **filters), RAW, False)


class Recorder(EventWriter, EventReader, LogOperator):
    """The event log of one database, every role at once: what each backend implements
    (``tests/test_recorder_contract.py`` holds each backend to it). A caller is typed against the
    role it uses."""


def busy(run: str, holder: str | None) -> RunBusy:
    """The error a second writer of ``run`` gets."""
    who = holder or "another process"
    return RunBusy(f"run {run!r} is being written by {who}: wait for it to finish, or stop it and resume the run")
