"""The in-memory backend, whole: the event log in this process's memory (``memory://NAME``), for
tests and fast simulator runs. The same contract as the SQL recorders (the same serialisation
and hash chain, so an exported log is byte-identical; ids idempotent per run; decisions under one
lock), nothing written to disk: the log lives as long as the process, and every
``open_log("memory://NAME")`` of one process opens the same log.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from diagevo.catalog import type_names
from diagevo.log.chain import COLUMNS, GENESIS_HASH, Appended, Pending, chain
from diagevo.log.errors import MissingDatabase
from diagevo.log.recorder import (
    LOOKUP_FIELDS,
    Query,
    Recorder,
    Shape,
    T,
    ViewState,
    busy,
    encoded_state,
    lookup_keys,
    restore_texts,
)
from diagevo.log.stored import loads_state

if TYPE_CHECKING:
    from sqlalchemy.engine import URL


Row = tuple[Any, ...]  # the values of COLUMNS
_COLUMN = {c: i for i, c in enumerate(COLUMNS)}
_LOOKUP_INDEX = {f: _COLUMN[f] for f in LOOKUP_FIELDS}
_TEXTS = _COLUMN["texts"]
_SEQ = itemgetter(0)


@dataclass
class _Log:
    lock: threading.RLock = field(default_factory=threading.RLock)
    last_seq: int = 0
    runs: dict[str, list[Row]] = field(default_factory=dict)  # rows of each run, in seq order
    ids: set[tuple[str, str]] = field(default_factory=set)
    latest_run: str | None = None
    leases: dict[str, str] = field(default_factory=dict)  # run -> holder
    views: dict[tuple[str, str, int], tuple[int, str, str]] = field(default_factory=dict)  # -> (seq, hash, state)


_LOGS: dict[str, _Log] = {}
_LOGS_LOCK = threading.Lock()


def _name(url: str) -> str:
    return url.split("://", 1)[1] if "://" in url else url


class InMemoryRecorder(Recorder):
    """The event log in memory."""

    persistent = False

    def __init__(self, url: str, *, create: bool = True, migrate_empty: bool = True, readonly: bool = False) -> None:
        self.url = url
        with _LOGS_LOCK:
            log = _LOGS.get(_name(url))
            if log is None:
                if readonly or not create:
                    raise MissingDatabase(f"no database at {url}")
                log = _LOGS[_name(url)] = _Log()
        self._log = log

    # --- append -------------------------------------------------------------------------------

    @contextmanager
    def _appending(self) -> Iterator[Callable[[Pending], Appended]]:
        with self._log.lock:  # re-entrant: decide reads through this recorder
            yield self._store

    def _store(self, pending: Pending) -> Appended:
        log = self._log
        fresh = [p for p in pending.all() if (p[1], p[0]) not in log.ids]
        heads = {run: self.head(run) for run in pending.runs}
        for row in chain(fresh, heads, log.last_seq):
            log.runs.setdefault(row[2], []).append(row)
            log.ids.add((row[2], row[1]))
            log.last_seq, log.latest_run = row[0], row[2]
        return fresh, heads

    def head(self, run: str) -> tuple[int, str]:
        with self._log.lock:
            rows = self._log.runs.get(run)
            return (rows[-1][0], rows[-1][9]) if rows else (0, GENESIS_HASH)

    # --- reads --------------------------------------------------------------------------------

    def _rows(self, q: Query, limit: int | None = None, newest: bool = False) -> list[Row]:
        """The run's rows that pass the filters, in seq order: the first ``limit``, or with
        ``newest`` the last ``limit`` (found walking back from the end)."""
        wanted = None if q.types is None else set(type_names(q.types))
        lookups = None if q.keys is None else {_LOOKUP_INDEX[f]: set(v) for f, v in lookup_keys(q.keys).items()}
        with self._log.lock:  # rows are only ever appended: the span stays what it is
            rows = self._log.runs.get(q.run, [])
            first = bisect_right(rows, q.after_seq, key=_SEQ) if q.after_seq > 0 else 0
            stop = bisect_right(rows, q.upto_seq, key=_SEQ) if q.upto_seq is not None else len(rows)
        out: list[Row] = []
        for at in range(stop - 1, first - 1, -1) if newest else range(first, stop):
            if limit is not None and len(out) >= limit:
                break
            row = rows[at]
            if wanted is not None and row[4] not in wanted or q.in_round is not None and row[3] != q.in_round:
                continue
            if lookups is not None and not any(row[col] in ids for col, ids in lookups.items()):
                continue
            out.append(row)
        return out[::-1] if newest else out

    def _select(
        self, q: Query, shape: Shape[T], texts: bool, limit: int | None = None, newest: bool = False
    ) -> Iterator[T]:
        rows = self._rows(q, limit, newest and limit is not None)
        pick = itemgetter(*(_COLUMN[c] for c in shape.columns))
        out = [shape.make(pick(r)) for r in rows]
        if texts:
            restore_texts(out, [r[_TEXTS] for r in rows])  # type: ignore[arg-type]
        return iter(out)

    def _count(self, q: Query) -> int:
        return len(self._rows(q))

    def runs(self) -> list[str]:
        with self._log.lock:
            return [run for run, rows in sorted(self._log.runs.items(), key=lambda kv: kv[1][0][0])]

    def latest_run(self) -> str | None:
        return self._log.latest_run

    # --- one writer of a run at a time -------------------------------------------------------

    @contextmanager
    def lease(self, run: str, holder: str) -> Iterator[None]:
        with self._log.lock:
            if run in self._log.leases:
                raise busy(run, self._log.leases[run])
            self._log.leases[run] = holder
        try:
            yield
        finally:
            with self._log.lock:
                self._log.leases.pop(run, None)

    def lease_holder(self, run: str) -> str | None:
        return self._log.leases.get(run)

    # --- the views' saved states --------------------------------------------------------------

    def view_states(
        self, name: str, run: str, *, upto: int | None = None, latest: bool = False, anchored: bool = True
    ) -> list[ViewState]:
        with self._log.lock:
            held = sorted((p, v) for (n, r, p), v in self._log.views.items() if n == name and r == run)
        out = []
        for part, (seq, hash_, state) in held:
            if upto is not None and part > upto:
                continue
            if anchored:
                at = self.event_at(run, seq)
                if at is None or at.hash != hash_:
                    continue
            out.append(ViewState(name, run, part, seq, hash_, loads_state(state)))
        return out[-1:] if latest else out

    def put_view_states(self, states: Sequence[ViewState]) -> None:
        encoded = [(s, encoded_state(s)) for s in states]
        with self._log.lock:
            for s, state in encoded:
                self._log.views[s.name, s.run, s.part] = (s.seq, s.hash, state)

    def drop_view_states(self, name: str, run: str) -> int:
        with self._log.lock:
            keys = [k for k in self._log.views if k[0] == name and k[1] == run]
            for k in keys:
                del self._log.views[k]
        return len(keys)


RECORDER = InMemoryRecorder


def missing_database(u: URL) -> MissingDatabase | None:
    name = u.render_as_string().split("://", 1)[1]
    return None if name in _LOGS else MissingDatabase(f"no database at memory://{name}")
