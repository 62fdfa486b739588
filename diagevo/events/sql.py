"""What the SQL recorders share (SQLite and PostgreSQL): the schema check on open, transactions,
the append path (prepare outside the lock, number and hash under it, insert optimistically), the
indexed reads and the chain check. Every dialect difference is a hook that
:class:`diagevo.events.sqlite.SQLiteRecorder` and :class:`diagevo.events.postgres.PostgresRecorder`
implement: how a writer excludes the others, how rows go in, how ids are looked
up, how a read streams."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, cast

from diagevo.events.backends import make_engine, missing_database
from diagevo.events.keys import KEY_FIELDS
from diagevo.events.projections import SQLProjections
from diagevo.events.recorder import (
    FETCH,
    GENESIS_HASH,
    MAX_PARAMS,
    AppendResult,
    CheckedReader,
    ConflictError,
    E,
    EventRow,
    Prepared,
    Recorder,
    SchemaOutdated,
    StoredEvent,
    StoreError,
    canonical_event_json,
    chain,
    chain_hash,
    loads,
    inline_problems,
    one_line,
    prepare,
    restore_inline,
    text_refs,
)
from diagevo.events.keys import TEXT_FIELDS
from diagevo.lazy import sa_exc
from diagevo.urls import redact_url

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from diagevo.events.schemas import EventIn

APPEND_LOCK_KEY = int.from_bytes(b"diagevo1", "big")  # the appenders' lock (where the backend has one)
EVENT_COLUMNS = "seq, event_id, run_id, round, type, schema_version, data, recorded_at, prev_hash, hash, texts, " + ", ".join(KEY_FIELDS)
N_COLUMNS = 11 + len(KEY_FIELDS)


# what a read fetches: whole events, or the (seq, round, type, data) a fold needs
_WHOLE: tuple[str, Callable[[Any], StoredEvent]] = (
    "seq, event_id, run_id, round, type, schema_version, data, recorded_at, prev_hash, hash",
    lambda r: StoredEvent(r[0], r[1], r[2], r[3], r[4], r[5], loads(r[6]), r[7], r[8], r[9]),
)
_ROW: tuple[str, Callable[[Any], EventRow]] = ("seq, round, type, data", lambda r: EventRow(r[0], r[1], r[2], loads(r[3])))


class SQLRecorder(SQLProjections, Recorder):
    """An append-only SQL log with per-run hash chains, artifacts, snapshots and checkpoints."""

    P = "?"  # the DBAPI placeholder
    NO_INDEX = ""  # before a column: a condition on it that the planner must not pick an index for
    RETAINED = ""  # the condition of the partial index ix_events_retained, spelled as migration 0003 did

    def __init__(self, url: str, *, create: bool = True, migrate_empty: bool = True, readonly: bool = False) -> None:
        """Open the log at ``url``. ``create=False`` never creates anything: a missing SQLite
        file is ``no database at PATH`` and an empty database is refused, as it is with
        ``migrate_empty=False``. Only a truly empty database is ever migrated. ``readonly``
        (the read commands) implies ``create=False`` and opens a SQLite file read-only, so a
        log on a read-only mount can be read."""
        self.url = url
        create = create and not readonly
        missing = None if create else missing_database(url)
        if missing is not None:
            raise missing
        self._ours = False  # set once the schema is known to be diagevo's: then WAL may be set
        self._engine = make_engine(url, wal=lambda: self._ours, readonly=readonly)
        try:
            self._ensure_schema(migrate_empty and create)
        except sa_exc.DBAPIError as exc:
            self._engine.dispose()
            raise StoreError(f"cannot open database {redact_url(url)}: {one_line(exc)}") from None
        except StoreError:
            self._engine.dispose()
            raise

    def close(self) -> None:
        self._engine.dispose()

    # --- the dialect's hooks --------------------------------------------------------------------

    def _exclusive(self, conn: Connection) -> None:
        """Before a write transaction begins (SQLite: take the write lock at BEGIN)."""

    def _lock_appends(self, conn: Connection) -> None:
        """Inside a write transaction that appends (PostgreSQL: the appenders' advisory lock)."""

    def _open_cursor(self, raw: Any, stream: bool) -> Any:
        """A DBAPI cursor; ``stream``: one that fetches a large result in parts."""
        return raw.cursor()

    def _order(self, after_seq: int, types: Collection[str] | None, round: int | None) -> str:
        return "ORDER BY seq"

    def _by_seq(self) -> str:
        """After ``FROM events``: read a tail of a run through the (run_id, seq) index."""
        return ""

    @abstractmethod
    def _insert_rows(self, cur: Any, rows: list[tuple[Any, ...]]) -> None:
        """Insert numbered, hashed event rows (their texts in their ``texts`` column)."""

    @abstractmethod
    def _existing_in_run(self, cur: Any, run: str, ids: list[str]) -> set[str]:
        """Which of these ids the run holds."""

    @abstractmethod
    def _is_dbapi_error(self, exc: BaseException) -> bool: ...

    @abstractmethod
    def _is_integrity_error(self, exc: BaseException) -> bool: ...

    # --- schema -------------------------------------------------------------------------------

    def _ensure_schema(self, migrate_empty: bool) -> None:
        from diagevo.events import ownership

        if ownership.revision_if_plain(self._engine, self.url) == ownership.HEAD_REVISION:
            status = None
        else:
            status = ownership.consistent_status(self._engine, self.url)
        if status is not None and not status.up_to_date:
            if status.state != "empty" or not migrate_empty:
                raise SchemaOutdated(ownership.refusal(status, self.url))
            with ownership.migration_tx(self._engine, self.url) as conn:
                status = ownership.status_of(conn, self.url)  # another process may have migrated meanwhile
                if status.state == "empty":
                    ownership.upgrade_in(conn)
                elif not status.up_to_date:
                    raise SchemaOutdated(ownership.refusal(status, self.url))
        self._ours = True
        self._engine.dispose()  # connections opened from here on switch the file to WAL

    # --- transactions -------------------------------------------------------------------------

    @contextmanager
    def _write_tx(self, *, append_lock: bool = False) -> Iterator[Connection]:
        try:
            conn_cm = self._engine.connect()
        except sa_exc.DBAPIError as exc:
            raise StoreError(f"cannot open database {redact_url(self.url)}: {one_line(exc)}") from None
        with conn_cm as conn:
            self._exclusive(conn)
            try:
                with conn.begin():
                    if append_lock:
                        self._lock_appends(conn)
                    yield conn
            except Exception as exc:
                if isinstance(exc, StoreError) or not self._is_dbapi_error(exc):
                    raise
                raise StoreError(f"write to {redact_url(self.url)} failed: {one_line(exc)}") from None

    @contextmanager
    def _cursor(self, *, stream: bool = False) -> Iterator[Any]:
        """A raw DBAPI cursor in a read transaction that is rolled back."""
        try:
            raw = self._engine.raw_connection()
        except sa_exc.DBAPIError as exc:
            raise StoreError(f"cannot open database {redact_url(self.url)}: {one_line(exc)}") from None
        try:
            cur = self._open_cursor(raw, stream)
            try:
                yield cur
            finally:
                cur.close()
                raw.rollback()
        except Exception as exc:
            if isinstance(exc, StoreError) or not self._is_dbapi_error(exc):
                raise
            # a lost connection must not go back to the pool: its reset would fail again and
            # the pool would log that failure with a traceback on stderr
            _discard(raw)
            raise StoreError(f"read from {redact_url(self.url)} failed: {one_line(exc)}") from None
        finally:
            raw.close()

    # --- append -------------------------------------------------------------------------------

    def append(self, events: Sequence[EventIn], *, expected_last_seq: int | None = None) -> AppendResult:
        if not events:
            return AppendResult(0, 0, 0)
        prepared, dups = prepare(events)
        runs = {p[1] for p in prepared}
        if expected_last_seq is not None and len(runs) > 1:
            raise StoreError("expected_last_seq needs a batch of a single run")
        result_run = prepared[-1][1]
        with self._write_tx(append_lock=True) as conn:
            cur = conn.connection.cursor()
            try:
                heads = {run: self._run_head(cur, run) for run in runs}
                if expected_last_seq is not None and heads[result_run][0] != expected_last_seq:
                    raise ConflictError(
                        f"run {result_run!r} is at seq {heads[result_run][0]}, expected {expected_last_seq}"
                    )
                fresh = self._insert_fresh(cur, prepared, heads)
            finally:
                cur.close()
        return AppendResult(len(fresh), dups + len(prepared) - len(fresh), heads[result_run][0])

    def append_checked(self, run: str, decide: Callable[[CheckedReader], Sequence[EventIn]]) -> AppendResult:
        with self._write_tx(append_lock=True) as conn:
            cur = conn.connection.cursor()
            try:

                def read(
                    types: Collection[str] | None, *, round: int | None = None, after_seq: int = 0
                ) -> list[tuple[int, int, str, dict[str, Any]]]:
                    where, params = self._where(run, after_seq, None, types, round)
                    order = self._order(after_seq, types, round)
                    cur.execute(f"SELECT seq, round, type, data FROM events {where} {order}", params)
                    return [(int(s), int(r), t, loads(d)) for s, r, t, d in cur.fetchall()]

                events = list(decide(read))
                if not events:
                    return AppendResult(0, 0, self._run_head(cur, run)[0])
                prepared, dups = prepare(events)
                runs = {p[1] for p in prepared}
                heads = {r: self._run_head(cur, r) for r in runs}
                fresh = self._insert_fresh(cur, prepared, heads)
            finally:
                cur.close()
        return AppendResult(len(fresh), dups + len(prepared) - len(fresh), heads[prepared[-1][1]][0])

    def _insert_fresh(self, cur: Any, prepared: list[Prepared], heads: dict[str, tuple[int, str]]) -> list[Prepared]:
        """Insert the events whose ids their runs do not hold yet and return them (``heads``
        moves on).

        Optimistic: the unique index on (run_id, event_id) checks every row as it goes in anyway,
        so the batch is inserted under a savepoint without looking its ids up first; only when
        one is already stored (a retried batch) is that undone, the stored ids looked up and the
        rest inserted. Either way the rows and the chain are those of the fresh events alone."""
        start = dict(heads)
        cur.execute("SAVEPOINT diagevo_append")
        try:
            self._insert(cur, prepared, heads)
        except Exception as exc:
            if not self._is_integrity_error(exc):
                raise
            cur.execute("ROLLBACK TO SAVEPOINT diagevo_append")
            heads.update(start)
            existing = self._existing(cur, [(p[1], p[0]) for p in prepared])
            fresh = [p for p in prepared if (p[1], p[0]) not in existing]
            if fresh:
                self._insert(cur, fresh, heads)  # another constraint than the ids fails here again
            return fresh
        cur.execute("RELEASE SAVEPOINT diagevo_append")
        return prepared

    def _insert(self, cur: Any, fresh: list[Prepared], heads: dict[str, tuple[int, str]]) -> None:
        cur.execute("SELECT COALESCE(MAX(seq), 0) FROM events")
        rows, _ = chain(fresh, heads, int(cur.fetchone()[0]))
        self._insert_rows(cur, rows)

    def _existing(self, cur: Any, keys: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which (run, event_id) pairs are stored: one indexed lookup per run (and chunk)."""
        by_run: dict[str, list[str]] = {}
        for run, eid in keys:
            by_run.setdefault(run, []).append(eid)
        return {(run, eid) for run, ids in by_run.items() for eid in self._existing_in_run(cur, run, ids)}

    def _run_head(self, cur: Any, run: str) -> tuple[int, str]:
        """(last seq, last hash) of a run; (0, GENESIS_HASH) when it has no events."""
        cur.execute(f"SELECT seq, hash FROM events WHERE run_id = {self.P} ORDER BY seq DESC LIMIT 1", (run,))
        row = cur.fetchone()
        return (int(row[0]), row[1]) if row else (0, GENESIS_HASH)

    # --- reads --------------------------------------------------------------------------------

    def _where(
        self,
        run: str,
        after_seq: int,
        upto_seq: int | None,
        types: Collection[str] | None,
        round: int | None = None,
    ) -> tuple[str, list[Any]]:
        """WHERE clause selecting a run's events (served by the (run_id, seq), (run_id, type, seq)
        or (run_id, round, type) index)."""
        q = self.P
        sql = f"WHERE run_id = {q}"
        params: list[Any] = [run]
        if after_seq > 0:  # only then: a seq range lures SQLite's planner off the round/type indexes
            sql += f" AND seq > {q}"
            params.append(after_seq)
        if round is not None:
            sql += f" AND round = {q}"
            params.append(round)
        if upto_seq is not None:
            sql += f" AND seq <= {q}"
            params.append(upto_seq)
        if types is not None:
            types = list(types)
            if not types:
                sql += " AND 1 = 0"
            else:
                sql += f" AND type IN ({', '.join([q] * len(types))})"
                params.extend(types)
        return sql, params

    def iter_rows(
        self, run: str, *, after_seq: int = 0, types: Collection[str] | None = None, round: int | None = None
    ) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
        with self._cursor(stream=True) as cur:
            where, params = self._where(run, after_seq, None, types, round)
            cur.execute(f"SELECT seq, round, type, data FROM events {where} {self._order(after_seq, types, round)}", params)
            while rows := cur.fetchmany(FETCH):
                for seq, rnd, typ, data in rows:
                    yield seq, rnd, typ, loads(data)

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
        where, params = self._where(run, after_seq, upto_seq, types, round)
        where += " " + self._order(after_seq, types, round)
        if limit:
            where += f" LIMIT {int(limit)}"
        return self._select(where, params, texts)

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
        """Indexed reads, one per field, never a scan of the run."""
        found = {e.seq: e for where, params in self._naming(run, keys, types, round) for e in self._select(where, params, texts)}
        picked = [found[seq] for seq in sorted(found)]
        return picked[:limit] if limit else picked

    def naming_rows(
        self, run: str, keys: dict[str, Collection[str]], *, types: Collection[str] | None = None, texts: bool = False
    ) -> list[EventRow]:
        found = {r.seq: r for where, params in self._naming(run, keys, types, None) for r in self._select_rows(where, params, texts)}
        return [found[seq] for seq in sorted(found)]

    def _naming(
        self, run: str, keys: dict[str, Collection[str]], types: Collection[str] | None, round: int | None
    ) -> Iterator[tuple[str, list[Any]]]:
        """(WHERE, params) of the indexed reads of the events naming these ids: the ids through
        their index; the types and the round filter the rows it finds, marked so that the planner
        does not walk a type or round index of the whole run instead."""
        extra, extra_params = "", list[Any]()
        if types is not None:
            types = list(types)
            if not types:
                return
            extra += f" AND {self.NO_INDEX}type IN ({', '.join([self.P] * len(types))})"
            extra_params += types
        if round is not None:
            extra += f" AND {self.NO_INDEX}round = {self.P}"
            extra_params.append(round)
        for field, values in keys.items():
            if field not in KEY_FIELDS:
                raise StoreError(f"events cannot be looked up by {field!r}: use one of {', '.join(KEY_FIELDS)}")
            values = list(dict.fromkeys(values))
            for i in range(0, len(values), MAX_PARAMS):
                chunk = values[i : i + MAX_PARAMS]
                where = f"WHERE run_id = {self.P} AND {field} IN ({', '.join([self.P] * len(chunk))}){extra}"
                yield where, [run, *chunk, *extra_params]

    def _select(self, where: str, params: list[Any], texts: bool) -> Iterator[StoredEvent]:
        return self._fetch(_WHOLE, where, params, texts)

    def _select_rows(self, where: str, params: list[Any], texts: bool) -> Iterator[EventRow]:
        return self._fetch(_ROW, where, params, texts)

    def _fetch(self, shape: tuple[str, Callable[[Any], E]], where: str, params: list[Any], texts: bool) -> Iterator[E]:
        """Events of a shape (its columns, and what a row becomes); ``texts``: with their texts
        back inline, from their ``texts`` column or, for events appended before migration 0008,
        the artifacts table."""
        columns, make = shape
        at = columns.count(",") + 1  # where the texts column comes
        with self._cursor(stream=True) as cur, (self._cursor() if texts else nullcontext()) as art_cur:
            cur.execute(f"SELECT {columns}{', texts' if texts else ''} FROM events {where}", params)
            while rows := cur.fetchmany(FETCH):
                batch = [make(r) for r in rows]
                if texts:
                    legacy = restore_inline(batch, [r[at] for r in rows])
                    if legacy:
                        self.restore_texts(legacy, lambda shas: self._artifacts(art_cur, list(shas)))
                yield from batch

    def _artifacts(self, cur: Any, shas: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for i in range(0, len(shas), MAX_PARAMS):
            chunk = shas[i : i + MAX_PARAMS]
            cur.execute(
                f"SELECT sha256, text FROM artifacts WHERE sha256 IN ({', '.join([self.P] * len(chunk))})", chunk
            )
            out.update(cur.fetchall())
        return out

    def artifact_texts(self, shas: Collection[str]) -> dict[str, str]:
        """Texts by key: the artifacts table (events appended before migration 0008), then the
        ``texts`` column of the events whose data names the key. The column has no index by key
        (appends stay lean), so that second look is a scan: an audit lookup, not a read path."""
        with self._cursor() as cur:
            found = self._artifacts(cur, list(shas))
            for sha in set(shas) - found.keys():
                if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
                    continue  # not a key (and no LIKE pattern characters in what is)
                cur.execute(f"SELECT type, data, texts FROM events WHERE texts IS NOT NULL AND data LIKE {self.P}",
                            (f"%{sha}%",))
                for typ, data, column in cur.fetchall():
                    field = next((f for f, s in text_refs(typ, loads(data)) if s == sha), None)
                    held = loads(column) if field else None
                    if isinstance(held, dict) and isinstance(held.get(field), str):
                        found[sha] = held[field]
                        break
            return found

    def last_seq(self, run: str) -> int:
        with self._cursor() as cur:
            return self._run_head(cur, run)[0]

    def runs(self) -> list[str]:
        """A skip scan of the (run_id, seq) index, one probe per run, never a pass over the events."""
        with self._cursor() as cur:
            cur.execute(
                "WITH RECURSIVE r(run_id) AS ("
                " SELECT MIN(run_id) FROM events"
                " UNION ALL SELECT (SELECT MIN(e.run_id) FROM events e WHERE e.run_id > r.run_id)"
                " FROM r WHERE r.run_id IS NOT NULL) "
                "SELECT run_id, (SELECT MIN(e.seq) FROM events e WHERE e.run_id = r.run_id) AS first_seq "
                "FROM r WHERE run_id IS NOT NULL ORDER BY first_seq"
            )
            return [r[0] for r in cur.fetchall()]

    def existing_keys(self, keys: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        with self._cursor() as cur:
            return self._existing(cur, list(keys))

    def retained_counts(self, run: str) -> dict[int, int]:
        """Read from the partial index ``ix_events_retained`` alone."""
        with self._cursor() as cur:
            cur.execute(f"SELECT round, COUNT(*) FROM events WHERE run_id = {self.P} AND {self.RETAINED} GROUP BY round", (run,))
            return {int(r[0]): int(r[1]) for r in cur.fetchall()}

    def type_counts(
        self, run: str, round: int | None = None, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> dict[tuple[int, str], int]:
        """Read from the (run_id, round, type) index alone; after a seq, from the rows after it
        (a tail: the (run_id, seq) index, never a pass over the run)."""
        where, params = f"WHERE run_id = {self.P}", [cast(Any, run)]
        hint = ""
        if after_seq > 0:
            where += f" AND seq > {self.P}"
            params.append(after_seq)
            hint = self._by_seq()
        if upto_seq is not None:
            where += f" AND seq <= {self.P}"
            params.append(upto_seq)
        if round is not None:
            where += f" AND round = {self.P}"
            params.append(round)
        with self._cursor() as cur:
            cur.execute(f"SELECT round, type, COUNT(*) FROM events{hint} {where} GROUP BY round, type", params)
            return {(int(r[0]), r[1]): int(r[2]) for r in cur.fetchall()}

    def latest_run(self) -> str | None:
        with self._cursor() as cur:
            cur.execute("SELECT run_id FROM events ORDER BY seq DESC LIMIT 1")
            row = cur.fetchone()
        return row[0] if row else None

    def event_at(self, run: str, seq: int) -> tuple[int, str, str] | None:
        with self._cursor() as cur:
            cur.execute(f"SELECT round, type, hash FROM events WHERE seq = {self.P} AND run_id = {self.P}", (seq, run))
            row = cur.fetchone()
        return (int(row[0]), row[1], row[2]) if row else None

    def verify_artifacts(self, run: str) -> list[str]:
        """Each event's ``texts`` column against the keys its data names; the texts of events
        appended before migration 0008 against the artifacts table."""
        problems: list[str] = []
        legacy: dict[str, int] = {}  # sha -> first seq naming it
        types = list(TEXT_FIELDS)
        with self._cursor(stream=True) as cur:
            where, params = self._where(run, 0, None, types)
            cur.execute(f"SELECT seq, type, data, texts FROM events {where} {self._order(0, types, None)}", params)
            while rows := cur.fetchmany(FETCH):
                for seq, typ, data, column in rows:
                    refs = list(text_refs(typ, loads(data)))
                    if not refs:
                        continue
                    if column is None:
                        for _f, sha in refs:
                            legacy.setdefault(sha, seq)
                    else:
                        problems += inline_problems(seq, refs, column)[0]
        return sorted(problems + self._verify_stored(legacy), key=lambda p: int(p.split(":")[0].split()[1]))

    # --- hash chain ---------------------------------------------------------------------------

    def verify_chain(self, run: str) -> list[str]:
        problems: list[str] = []
        prev = GENESIS_HASH
        with self._cursor(stream=True) as cur:
            where, params = self._where(run, 0, None, None)
            cur.execute(
                "SELECT seq, event_id, run_id, round, type, schema_version, data, prev_hash, hash "
                f"FROM events {where} ORDER BY seq",
                params,
            )
            while rows := cur.fetchmany(FETCH):
                for seq, eid, run_id, rnd, typ, sv, data, stored_prev, stored_hash in rows:
                    if stored_prev != prev:
                        problems.append(f"seq {seq}: prev_hash does not match the hash of the run's previous event")
                    want = chain_hash(stored_prev, canonical_event_json(eid, run_id, rnd, typ, sv, data))
                    if want != stored_hash:
                        problems.append(f"seq {seq}: hash mismatch (event {eid} was altered)")
                    prev = stored_hash
        return problems


def _discard(raw: Any) -> None:
    """Close a pooled DBAPI connection after an error without the pool's reset (a rollback)."""
    try:
        raw.invalidate()
    except Exception:  # noqa: BLE001 - it is being thrown away
        pass
