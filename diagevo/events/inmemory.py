"""The in-memory backend, whole: the event log in this process's memory (``memory://NAME``), for
tests and fast simulator runs. Same contract as the SQL recorders (the same serialisation and hash
chain, so an exported log is byte-identical; ids idempotent per run; expected position; a
decide-then-append under one lock), nothing written to disk: the log lives as long as the process.
Every ``EventStore("memory://NAME")`` of one process opens the same log.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL

from diagevo.events.keys import KEY_FIELDS
from diagevo.events.recorder import (
    GENESIS_HASH,
    AppendResult,
    CheckedReader,
    ConflictError,
    MissingDatabase,
    Prepared,
    Recorder,
    StoredEvent,
    StoreError,
    canonical_event_json,
    chain,
    chain_hash,
    json_or_error,
    loads,
    prepare,
)

Row = tuple[Any, ...]  # (seq, event_id, run, round, type, schema_version, data_json, recorded_at, prev_hash, hash, *keys)
if TYPE_CHECKING:
    from diagevo.events.schemas import EventIn

_KEY_INDEX = {f: 11 + i for i, f in enumerate(KEY_FIELDS)}  # row: ..., hash, texts, *keys


@dataclass
class _Log:
    lock: threading.RLock = field(default_factory=threading.RLock)
    last_seq: int = 0
    runs: dict[str, list[Row]] = field(default_factory=dict)  # rows of each run, in seq order
    seqs: dict[str, list[int]] = field(default_factory=dict)  # their seqs (for bisect)
    ids: set[tuple[str, str]] = field(default_factory=set)
    latest_run: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    snapshots: dict[tuple[str, int], tuple[int, str, str | None]] = field(default_factory=dict)
    checkpoints: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)


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

    def append(self, events: Sequence[EventIn], *, expected_last_seq: int | None = None) -> AppendResult:
        if not events:
            return AppendResult(0, 0, 0)
        prepared, dups = prepare(events)
        runs = {p[1] for p in prepared}
        if expected_last_seq is not None and len(runs) > 1:
            raise StoreError("expected_last_seq needs a batch of a single run")
        result_run = prepared[-1][1]
        with self._log.lock:
            heads = {run: self._head(run) for run in runs}
            if expected_last_seq is not None and heads[result_run][0] != expected_last_seq:
                raise ConflictError(f"run {result_run!r} is at seq {heads[result_run][0]}, expected {expected_last_seq}")
            fresh = self._insert(prepared, heads)
        return AppendResult(len(fresh), dups + len(prepared) - len(fresh), heads[result_run][0])

    def append_checked(self, run: str, decide: Callable[[CheckedReader], Sequence[EventIn]]) -> AppendResult:
        with self._log.lock:

            def read(
                types: Collection[str] | None, *, round: int | None = None, after_seq: int = 0
            ) -> list[tuple[int, int, str, dict[str, Any]]]:
                return list(self.iter_rows(run, after_seq=after_seq, types=types, round=round))

            events = list(decide(read))
            if not events:
                return AppendResult(0, 0, self._head(run)[0])
            prepared, dups = prepare(events)
            heads = {r: self._head(r) for r in {p[1] for p in prepared}}
            fresh = self._insert(prepared, heads)
        return AppendResult(len(fresh), dups + len(prepared) - len(fresh), heads[prepared[-1][1]][0])

    def _insert(self, prepared: list[Prepared], heads: dict[str, tuple[int, str]]) -> list[Prepared]:
        log = self._log
        fresh = [p for p in prepared if (p[1], p[0]) not in log.ids]
        if not fresh:
            return fresh
        rows, artifacts = chain(fresh, heads, log.last_seq)
        for row in rows:
            log.runs.setdefault(row[2], []).append(row)
            log.seqs.setdefault(row[2], []).append(row[0])
            log.ids.add((row[2], row[1]))
        for sha, text in artifacts.items():
            log.artifacts.setdefault(sha, text)
        log.last_seq = rows[-1][0]
        log.latest_run = rows[-1][2]
        return fresh

    def _head(self, run: str) -> tuple[int, str]:
        rows = self._log.runs.get(run)
        return (rows[-1][0], rows[-1][9]) if rows else (0, GENESIS_HASH)

    # --- reads --------------------------------------------------------------------------------

    def _rows(
        self, run: str, after_seq: int = 0, upto_seq: int | None = None,
        types: Collection[str] | None = None, round: int | None = None,
    ) -> Iterator[Row]:
        with self._log.lock:
            rows = self._log.runs.get(run, [])
            start = bisect_right(self._log.seqs.get(run, []), after_seq) if after_seq > 0 else 0
            picked = rows[start:]
        wanted = None if types is None else set(types)
        for row in picked:
            if upto_seq is not None and row[0] > upto_seq:
                break
            if (wanted is None or row[4] in wanted) and (round is None or row[3] == round):
                yield row

    @staticmethod
    def _event(row: Row) -> StoredEvent:
        return StoredEvent(row[0], row[1], row[2], row[3], row[4], row[5], loads(row[6]), row[7], row[8], row[9])

    def iter_rows(
        self, run: str, *, after_seq: int = 0, types: Collection[str] | None = None, round: int | None = None
    ) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
        for row in self._rows(run, after_seq, None, types, round):
            yield row[0], row[3], row[4], loads(row[6])

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
        out: list[StoredEvent] = []
        for row in self._rows(run, after_seq, upto_seq, types, round):
            out.append(self._event(row))
            if limit and len(out) >= limit:
                break
        if texts:
            self.restore_texts(out)
        return iter(out)

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
        for f in keys:
            if f not in _KEY_INDEX:
                raise StoreError(f"events cannot be looked up by {f!r}: use one of {', '.join(KEY_FIELDS)}")
        wanted = {_KEY_INDEX[f]: set(v) for f, v in keys.items()}
        picked = [
            self._event(row) for row in self._rows(run, 0, None, types, round)
            if any(row[i] in values for i, values in wanted.items())
        ]
        if limit:
            picked = picked[:limit]
        if texts and picked:
            self.restore_texts(picked)
        return picked

    def artifact_texts(self, shas: Collection[str]) -> dict[str, str]:
        arts = self._log.artifacts
        return {sha: arts[sha] for sha in shas if sha in arts}

    def last_seq(self, run: str) -> int:
        with self._log.lock:
            return self._head(run)[0]

    def runs(self) -> list[str]:
        with self._log.lock:
            return [run for run, rows in sorted(self._log.runs.items(), key=lambda kv: kv[1][0][0])]

    def existing_keys(self, keys: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        with self._log.lock:
            return {k for k in keys if k in self._log.ids}

    def retained_counts(self, run: str) -> dict[int, int]:
        counts: Counter[int] = Counter()
        for row in self._rows(run, types=("question.scored",)):
            if loads(row[6]).get("retained") is True:
                counts[row[3]] += 1
        return dict(counts)

    def type_counts(
        self, run: str, round: int | None = None, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> dict[tuple[int, str], int]:
        return dict(Counter((row[3], row[4]) for row in self._rows(run, after_seq, upto_seq, round=round)))

    def latest_run(self) -> str | None:
        return self._log.latest_run

    def event_at(self, run: str, seq: int) -> tuple[int, str, str] | None:
        with self._log.lock:
            seqs = self._log.seqs.get(run, [])
            i = bisect_right(seqs, seq) - 1
            if i < 0 or seqs[i] != seq:
                return None
            row = self._log.runs[run][i]
        return row[3], row[4], row[9]

    def verify_chain(self, run: str) -> list[str]:
        problems: list[str] = []
        prev = GENESIS_HASH
        for seq, eid, run_id, rnd, typ, sv, data, _at, stored_prev, stored_hash, *_ in self._rows(run):
            if stored_prev != prev:
                problems.append(f"seq {seq}: prev_hash does not match the hash of the run's previous event")
            if chain_hash(stored_prev, canonical_event_json(eid, run_id, rnd, typ, sv, data)) != stored_hash:
                problems.append(f"seq {seq}: hash mismatch (event {eid} was altered)")
            prev = stored_hash
        return problems

    # --- projections' caches ------------------------------------------------------------------

    def put_snapshot(self, run: str, round: int, seq: int, state: dict[str, Any], hash: str | None = None) -> None:
        state_json = json_or_error(state, "snapshot state")
        if hash is None:
            at = self.event_at(run, seq)
            hash = at[2] if at else None
        with self._log.lock:
            self._log.snapshots[run, round] = (seq, state_json, hash)

    def _snaps(self, run: str) -> list[tuple[int, tuple[int, str, str | None]]]:
        with self._log.lock:
            return sorted((rnd, v) for (r, rnd), v in self._log.snapshots.items() if r == run)

    def get_snapshot(self, run: str, round: int) -> tuple[int, dict[str, Any]] | None:
        snap = self._log.snapshots.get((run, round))
        return (snap[0], loads(snap[1])) if snap else None

    def latest_snapshot(self, run: str, upto_round: int | None = None) -> tuple[int, int, dict[str, Any]] | None:
        snaps = [(rnd, v) for rnd, v in self._snaps(run) if upto_round is None or rnd <= upto_round]
        if not snaps:
            return None
        rnd, (seq, state, _h) = snaps[-1]
        return rnd, seq, loads(state)

    def snapshots(self, run: str) -> list[tuple[int, int, dict[str, Any]]]:
        return [(rnd, seq, loads(state)) for rnd, (seq, state, _h) in self._snaps(run)]

    def snapshot_anchors(self, run: str) -> list[tuple[int, int, str | None]]:
        return [(rnd, seq, h) for rnd, (seq, _s, h) in self._snaps(run)]

    def drop_snapshots(self, run: str) -> int:
        with self._log.lock:
            keys = [k for k in self._log.snapshots if k[0] == run]
            for k in keys:
                del self._log.snapshots[k]
        return len(keys)

    def get_checkpoint(self, name: str, run: str) -> int:
        cp = self._log.checkpoints.get((name, run))
        return cp[0] if cp else 0

    def checkpoint_info(self, name: str, run: str) -> dict[str, Any]:
        cp = self._log.checkpoints.get((name, run))
        return loads(cp[1]) if cp else {}

    def set_checkpoint(self, name: str, run: str, seq: int, info: dict[str, Any] | None = None) -> None:
        info_json = json_or_error(info or {}, "checkpoint info")
        with self._log.lock:
            self._log.checkpoints[name, run] = (seq, info_json)

    def checkpoints(self, run: str) -> dict[str, int]:
        with self._log.lock:
            return {name: seq for (name, r), (seq, _i) in self._log.checkpoints.items() if r == run}


RECORDER = InMemoryRecorder


def missing_database(u: URL) -> MissingDatabase | None:
    name = u.render_as_string().split("://", 1)[1]
    return None if name in _LOGS else MissingDatabase(f"no database at memory://{name}")


def forget(url: str) -> None:
    """Drop an in-memory log (tests)."""
    with _LOGS_LOCK:
        _LOGS.pop(_name(url), None)
