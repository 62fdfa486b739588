"""What the SQL recorders share (SQLite and PostgreSQL): the schema check on open, transactions,
the append path (serialise outside the lock; decide, number, hash and insert under it), the
indexed reads and the views' saved states. Every dialect difference is a method that
:class:`diagevo.log.sqlite.SQLiteRecorder` and :class:`diagevo.log.postgres.PostgresRecorder`
override: how a writer excludes the others, how rows go in, how a read streams, how the planner
is steered, which saved states a connection trusts."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from diagevo.catalog import type_names
from diagevo.log import revision
from diagevo.log.backends import cannot_open, connect, dialect_of, make_engine, missing_database, sqlalchemy_errors
from diagevo.log.chain import COLUMNS, FIRST_SEQ, GENESIS_HASH, LAST_SEQ, Appended, Pending, Prepared, chain
from diagevo.log.errors import StoreError, UnreadableRowError
from diagevo.log.recorder import (
    FETCH,
    MAX_PARAMS,
    Query,
    Recorder,
    Shape,
    T,
    ViewState,
    encoded_state,
    lookup_keys,
    restore_texts,
    why_unreadable,
)
from diagevo.log.stored import loads_state, not_text
from diagevo.text.parsing import error_line
from diagevo.text.urls import redact_url

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection


EVENT_COLUMNS = ", ".join(COLUMNS)


class SQLRecorder(Recorder):
    """An append-only SQL log with per-run hash chains and the views' saved states."""

    P = "?"  # the DBAPI placeholder (SQLite's; PostgreSQL's is %s)

    def __init__(self, url: str, *, create: bool = True, migrate_empty: bool = True, readonly: bool = False) -> None:
        """Open the log at ``url``. ``create=False`` never creates anything: a missing SQLite
        file is ``no database at PATH`` and an empty database is refused, as it is with
        ``migrate_empty=False``. Only a truly empty database is ever migrated. ``readonly``
        (the read commands) implies ``create=False`` and opens a SQLite file read-only, so a
        log on a read-only mount can be read."""
        self.url = url
        self.read_runs: dict[str, None] = {}
        self.runless: dict[int, str] = {}
        create = create and not readonly
        missing = None if create else missing_database(url)
        if missing is not None:
            raise missing
        self._ours = False  # set once the schema is known to be diagevo's: then WAL may be set
        self._engine = make_engine(url, wal=lambda: self._ours, readonly=readonly)
        try:
            self._ensure_schema(migrate_empty and create)
        except sqlalchemy_errors("DBAPIError") as exc:
            self._engine.dispose()
            raise cannot_open(url, exc) from None
        except StoreError:
            self._engine.dispose()
            raise

    def close(self) -> None:
        self._engine.dispose()

    # --- the dialect's hooks --------------------------------------------------------------------

    def _lock_appends(self, conn: Connection) -> None:
        """Inside a write transaction that appends (PostgreSQL: the append lock, waited for lock_wait_s)."""

    def _open_cursor(self, raw: Any, stream: bool) -> Any:
        """A DBAPI cursor; ``stream``: one that fetches a large result in parts."""
        return raw.cursor()

    def _order(self, after_seq: int, types: Collection[str] | None, in_round: int | None) -> str:
        return "ORDER BY seq"

    def _index(self, types: Collection[str] | None, in_round: int | None) -> str:
        """After ``FROM events``: the index a read of a run (no id lookup) must walk."""
        return ""

    def _key_index(self, field: str) -> str:
        """After ``FROM events``: the index a lookup by ``field`` (an id) must walk."""
        return ""

    def _execute(self, cur: Any, sql: str, params: Any = ()) -> None:
        """Run a read's statement (SQLite: past an index it names that is gone)."""
        cur.execute(sql, params)

    def _decoding_anyway(self, cur: Any, exc: Exception) -> AbstractContextManager[Any] | None:
        """After ``exc`` ended a read: a cursor of the same connection that reads every stored text,
        one that is not UTF-8 as :class:`~diagevo.log.sqlite.NotUTF8`, to read the statement
        again with; None where ``exc`` is something else (PostgreSQL's texts are UTF-8)."""
        return None

    def _insert_rows(self, cur: Any, rows: Iterable[tuple[Any, ...]]) -> None:
        """Insert numbered, hashed event rows."""
        cur.executemany(f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join([self.P] * len(COLUMNS))})", rows)

    def _is_dbapi_error(self, exc: BaseException) -> bool:
        return isinstance(exc, (self._engine.dialect.loaded_dbapi.Error, *sqlalchemy_errors("DBAPIError")))

    def _trusted_writers(self) -> str:
        """A condition on ``views.writer``: the saved states this connection may read."""
        return "1 = 1"

    # --- schema -------------------------------------------------------------------------------

    def _ensure_schema(self, migrate_empty: bool) -> None:
        if revision.revision_if_plain(self._engine, self.url) != revision.HEAD_REVISION:
            self._migrate_if_empty(migrate_empty)
        self._ours = True
        self._engine.dispose()  # connections opened from here on switch the file to WAL

    def _migrate_if_empty(self, migrate_empty: bool) -> None:
        """A database not simply at the head, looked at closer by Alembic (loaded here alone: a
        current database never needs it): migrated where it is empty and ``migrate_empty``,
        else refused unless it is up to date after all."""
        from diagevo.log import schema

        status = schema.consistent_status(self._engine, self.url)
        if status.up_to_date:
            return
        if status.state != "empty" or not migrate_empty:
            raise schema.refusal(status)
        with schema.migration_tx(self._engine, self.url, self.lock_wait_s) as conn:
            status = schema.status_of(conn, self.url)  # another process may have migrated meanwhile
            if status.state == "empty":
                schema.upgrade_in(conn)
            elif not status.up_to_date:
                raise schema.refusal(status)

    # --- transactions -------------------------------------------------------------------------

    @contextmanager
    def _write_tx(self, *, append_lock: bool = False) -> Iterator[Connection]:
        with connect(self._engine, self.url) as conn:
            dialect_of(conn).exclusive(conn)
            try:
                with conn.begin():
                    try:
                        if append_lock:
                            self._lock_appends(conn)
                        yield conn
                    except BaseException as exc:
                        if not isinstance(exc, Exception | GeneratorExit):  # Ctrl-C in a statement
                            conn.invalidate()  # closed, not rolled back: the server may still be answering
                        raise
            except Exception as exc:
                if isinstance(exc, StoreError) or not self._is_dbapi_error(exc):
                    raise
                raise StoreError(f"write to {redact_url(self.url)} failed: {error_line(exc)}") from None

    @contextmanager
    def _cursor(self, *, stream: bool = False) -> Iterator[Any]:
        """A raw DBAPI cursor in a read transaction that is rolled back."""
        try:
            raw = self._engine.raw_connection()
        except sqlalchemy_errors("DBAPIError") as exc:
            raise cannot_open(self.url, exc) from None
        try:
            cur = self._open_cursor(raw, stream)
            try:
                yield cur
            except GeneratorExit:  # a read abandoned half way (its connection may be gone by now)
                _quietly(cur.close, raw.rollback)
                raise
            cur.close()
            raw.rollback()
        except Exception as exc:
            if isinstance(exc, StoreError) or not self._is_dbapi_error(exc):
                raise
            # a lost connection must not go back to the pool: its reset would fail again and
            # the pool would log that failure with a traceback on stderr
            _discard(raw)
            raise StoreError(f"read from {redact_url(self.url)} failed: {error_line(exc)}") from None
        except BaseException as exc:
            # Ctrl-C in the middle of a query leaves the connection in no known state: its reset
            # on the way back to the pool would fail and be logged with a traceback on stderr
            if not isinstance(exc, GeneratorExit):
                _discard(raw)
            raise
        finally:
            _quietly(raw.close)

    # --- append -------------------------------------------------------------------------------

    @contextmanager
    def _appending(self) -> Iterator[Callable[[Pending], Appended]]:
        with self._write_tx(append_lock=True) as conn:  # decide's reads (other connections) see the head
            cur = conn.connection.cursor()
            try:
                yield lambda prepared: self._insert_fresh(cur, prepared)
            finally:
                cur.close()

    def _insert_fresh(self, cur: Any, pending: Pending) -> Appended:
        """Insert the events whose ids their runs do not hold yet.

        Optimistic: the unique index on (run_id, event_id) checks every row as it goes in anyway,
        so the batch is inserted under a savepoint without looking its ids up first; only when
        one is already stored (a retried batch) is that undone, the stored ids looked up and the
        rest inserted. Either way the rows and the chain are those of the fresh events alone."""
        start = {run: self._run_head(cur, run) for run in pending.runs}
        heads = dict(start)
        cur.execute("SAVEPOINT diagevo_append")
        try:
            self._insert(cur, pending, heads)
        except Exception as exc:
            if not isinstance(exc, self._engine.dialect.loaded_dbapi.IntegrityError):
                raise
            cur.execute("ROLLBACK TO SAVEPOINT diagevo_append")
            heads.update(start)
            prepared = pending.all()
            existing = self._existing(cur, prepared)
            fresh = [p for p in prepared if (p[1], p[0]) not in existing]
            if fresh:
                self._insert(cur, fresh, heads)  # another constraint than the ids fails here again
            return fresh, heads
        cur.execute("RELEASE SAVEPOINT diagevo_append")
        return pending.all(), heads

    def _insert(self, cur: Any, fresh: Iterable[Prepared], heads: dict[str, tuple[int, str]]) -> None:
        cur.execute("SELECT COALESCE(MAX(seq), 0) FROM events")
        self._insert_rows(cur, chain(fresh, heads, int(cur.fetchone()[0])))

    def _existing(self, cur: Any, prepared: list[Prepared]) -> set[tuple[str, str]]:
        """Which (run, event_id) pairs of these events are stored: indexed lookups per run."""
        by_run: dict[str, list[str]] = {}
        for p in prepared:
            by_run.setdefault(p[1], []).append(p[0])
        found: set[tuple[str, str]] = set()
        for run, ids in by_run.items():
            for i in range(0, len(ids), MAX_PARAMS):
                chunk = ids[i : i + MAX_PARAMS]
                cur.execute(
                    (
                        f"SELECT event_id FROM events WHERE run_id = {self.P} AND event_id IN "
                        f"({', '.join([self.P] * len(chunk))})"
                    ),
                    [run, *chunk],
                )
                found.update((run, r[0]) for r in cur.fetchall())
        return found

    def _run_head(self, cur: Any, run: str) -> tuple[int, str]:
        """The run's last (seq, hash): what its next event chains onto, so a hash that is no text
        stops the append (:class:`UnreadableRowError`)."""
        sql = f"SELECT seq, hash FROM events WHERE run_id = {self.P} ORDER BY seq DESC LIMIT 1"
        row = self._first(cur, sql, (run,))
        if row is None:
            return 0, GENESIS_HASH
        if type(row[1]) is not str:
            raise UnreadableRowError(
                f"run {run!r} cannot be appended to: its last event, at seq {row[0]}, is unreadable "
                f"({not_text('hash')}; memory verify names it)"
            )
        return int(row[0]), row[1]

    def _batches(self, cur: Any, sql: str, params: Any, size: int = FETCH) -> Iterator[list[Any]]:
        """The rows of a read, ``size`` at a time. A text the database cannot decode does not end
        the read (SQLite keeps any bytes in a text column): the statement is read again, on a
        cursor that decodes it anyway (:meth:`_decoding_anyway`), past the rows given already
        (the first cursor, left open, holds the read's snapshot), and the row is left to its
        reader to pass over: a text of the row that is no ``str``."""
        self._execute(cur, sql, params)
        given = 0
        try:
            while rows := cur.fetchmany(size):
                given += len(rows)
                yield rows
            return
        except Exception as exc:
            anyway = self._decoding_anyway(cur, exc)
            if anyway is None:
                raise
        with anyway as again:
            self._execute(again, sql, params)
            while given > 0:  # the rows given already, fetched again and dropped
                given -= len(again.fetchmany(min(given, size)))
            while rows := again.fetchmany(size):
                yield rows

    def _first(self, cur: Any, sql: str, params: Any = ()) -> Any:
        """The first row of a read (:meth:`_batches`), or None."""
        return next((r for rows in self._batches(cur, sql, params, 1) for r in rows), None)

    # --- reads --------------------------------------------------------------------------------

    def _where(self, q: Query, ordered: bool = True, sort_ids: bool = True) -> Iterator[tuple[str, list[Any]]]:
        """The (WHERE ... ORDER BY, params) of the reads that together select the events: one,
        served by the (run_id, seq), (run_id, type, seq) or (run_id, round, type) index; or, with
        ``keys``, one per key field and chunk of ids through that field's index, the other
        filters applied to the rows it finds (marked so that the planner does not walk a type or
        round index of the whole run instead). Without ``sort_ids`` a lookup of several ids is
        left in the database's order: sorting it there copies every row found, texts and all."""
        p = self.P
        names = None if q.types is None else type_names(q.types)
        if (names is not None and not names) or q.after_seq >= LAST_SEQ or (q.upto_seq or 0) < FIRST_SEQ:
            return  # nothing selected: no type, or a seq range past what a 64-bit integer holds
        q = q._replace(upto_seq=None if q.upto_seq is None else min(q.upto_seq, LAST_SEQ))
        extra, params = "", list[Any]()
        if q.after_seq > 0:  # only then: a seq range lures SQLite's planner off the round/type indexes
            extra += f" AND seq > {p}"
            params.append(q.after_seq)
        if q.in_round is not None:
            extra += f" AND round = {p}"
            params.append(q.in_round)
        if q.upto_seq is not None:
            extra += f" AND seq <= {p}"
            params.append(q.upto_seq)
        if names is not None:
            extra += f" AND type IN ({', '.join([p] * len(names))})"
            params.extend(names)
        if q.keys is None:
            order = " " + self._order(q.after_seq, names, q.in_round) if ordered else ""
            yield f"{self._index(names, q.in_round)} WHERE run_id = {p}{extra}{order}", [q.run, *params]
            return
        for field, values in lookup_keys(q.keys).items():
            for i in range(0, len(values), MAX_PARAMS):
                chunk = values[i : i + MAX_PARAMS]
                where = f"{self._key_index(field)} WHERE run_id = {p} AND {field} IN ({', '.join([p] * len(chunk))})"
                # in seq order (PostgreSQL returns an IN lookup in any order); one id's rows lie in
                # seq order in its index, so a page of them is read without sorting them all
                by_seq = ordered and (sort_ids or len(chunk) == 1)
                yield where + extra + (" ORDER BY seq" if by_seq else ""), [q.run, *chunk, *params]

    def _select(
        self, q: Query, shape: Shape[T], texts: bool, limit: int | None = None, newest: bool = False
    ) -> Iterator[T]:
        self.read_runs[q.run] = None
        if limit is None:
            return self._selected(q, shape, texts, None, newest, [0])
        want = limit
        while True:  # a page holds ``limit`` events, whatever rows among them are passed over
            passed = [0]
            got = list(self._selected(q, shape, texts, want, newest, passed))
            if not passed[0] or len(got) >= limit or len(got) + passed[0] < want:
                return iter((got[-limit:] if limit else []) if newest else got[:limit])
            want = limit + passed[0]

    def _selected(
        self, q: Query, shape: Shape[T], texts: bool, limit: int | None, newest: bool, passed: list[int]
    ) -> Iterator[T]:
        """:meth:`_select`, each row passed over counted in ``passed[0]``."""
        paged = limit is not None
        reads = list(self._where(q, ordered=not (newest and paged), sort_ids=paged))
        if paged:  # each read cut where it is stored: the page lies among the first (last) ``limit`` of each
            cut = f" ORDER BY seq DESC LIMIT {int(limit)}" if newest else f" LIMIT {int(limit)}"  # type: ignore[arg-type]
            reads = [(where + cut, params) for where, params in reads]
        if len(reads) == 1 and (paged or q.keys is None or sum(map(len, q.keys.values())) == 1):
            where, params = reads[0]
            found = self._fetch(shape, where, params, texts, passed)
            return iter(list(found)[::-1]) if newest and paged else found
        # several indexed reads, or a lookup of several ids: the same event may be found twice;
        # merged in seq order here
        merged = {e.seq: e for where, params in reads for e in self._fetch(shape, where, params, texts, passed)}
        picked = [merged[seq] for seq in sorted(merged)]
        if limit is None:
            return iter(picked)
        return iter((picked[-limit:] if limit else []) if newest else picked[:limit])

    def _count(self, q: Query) -> int:
        reads = list(self._where(q, ordered=False))
        with self._cursor() as cur:
            if len(reads) == 1:
                where, params = reads[0]
                self._execute(cur, f"SELECT COUNT(*) FROM events {where}", params)
                return int(cur.fetchone()[0])
            seqs: set[int] = set()  # several indexed reads may find the same event: counted once
            for where, params in reads:
                self._execute(cur, f"SELECT seq FROM events {where}", params)
                seqs.update(int(r[0]) for r in cur.fetchall())
            return len(seqs)

    def _fetch(
        self, shape: Shape[T], where: str, params: list[Any], texts: bool, passed: list[int] | None = None
    ) -> Iterator[T]:
        """Rows of a shape; ``texts``: with the long texts back inline from their ``texts``
        column, checked against their keys. A row no reader can take is left out, and counted in
        ``passed[0]`` (the fold reads it as an :class:`~diagevo.catalog.UnreadableRow`: the run's
        admission names it)."""
        columns, make = shape
        sql = f"SELECT {', '.join(columns)}{', texts' if texts else ''} FROM events {where}"
        with self._cursor(stream=True) as cur:
            for rows in self._batches(cur, sql, params):
                try:
                    batch = [make(r) for r in rows]
                except ValueError:  # a row past the readers' bounds: the others, one by one
                    rows = self._takeable(shape, rows, passed)
                    batch = [make(r) for r in rows]
                if texts:
                    restore_texts(batch, [r[len(columns)] for r in rows])  # type: ignore[arg-type]
                yield from batch

    def _takeable(self, shape: Shape[Any], rows: list[Any], passed: list[int] | None) -> list[Any]:
        """The rows a reader can take; each other one left out (:func:`~diagevo.log.recorder.every_row` gives it)."""
        kept = [r for r in rows if why_unreadable(shape.columns, r) is None]
        if passed is not None:
            passed[0] += len(rows) - len(kept)
        return kept

    def head(self, run: str) -> tuple[int, str]:
        """The run's newest (seq, hash), its data left unread: one indexed row."""
        with self._cursor() as cur:
            return self._run_head(cur, run)

    def last_seq(self, run: str) -> int:
        """The run's newest seq (its hash, whatever it holds, left unread): one indexed row."""
        with self._cursor() as cur:
            cur.execute(f"SELECT MAX(seq) FROM events WHERE run_id = {self.P}", (run,))
            return int(cur.fetchone()[0] or 0)

    def runs(self) -> list[str]:
        """A skip scan of the (run_id, seq) index, one probe per run, never a pass over the events.
        A run id that is no UTF-8 text (SQLite keeps any bytes) names no run a reader can ask for:
        left out, its first row kept in :attr:`runless`."""
        sql = (
            "WITH RECURSIVE r(run_id) AS ("
            " SELECT MIN(run_id) FROM events"
            " UNION ALL SELECT (SELECT MIN(e.run_id) FROM events e WHERE e.run_id > r.run_id)"
            " FROM r WHERE r.run_id IS NOT NULL) "
            "SELECT run_id, (SELECT MIN(e.seq) FROM events e WHERE e.run_id = r.run_id) AS first_seq "
            "FROM r WHERE run_id IS NOT NULL ORDER BY first_seq"
        )
        with self._cursor() as cur:
            found = [r for rows in self._batches(cur, sql, ()) for r in rows]
        for run, first in found:
            if type(run) is not str:
                self.runless[int(first)] = not_text("run_id")
        return [run for run, _ in found if type(run) is str]

    def latest_run(self) -> str | None:
        with self._cursor() as cur:
            row = self._first(cur, "SELECT run_id FROM events ORDER BY seq DESC LIMIT 1")
        if row is None or type(row[0]) is str:
            return None if row is None else row[0]
        return max(self.runs(), key=self.last_seq, default=None)  # the newest row is of no run: the newest run

    # --- the views' saved states --------------------------------------------------------------

    def view_states(
        self, name: str, run: str, *, upto: int | None = None, latest: bool = False, anchored: bool = True
    ) -> list[ViewState]:
        q = self.P
        sql = f"SELECT v.part, v.seq, v.hash, v.state FROM views v WHERE v.name = {q} AND v.run_id = {q}"
        params: list[Any] = [name, run]
        if upto is not None:
            sql += f" AND v.part <= {q}"
            params.append(upto)
        if anchored:
            sql += (
                f" AND {self._trusted_writers()} AND EXISTS (SELECT 1 FROM events e"
                " WHERE e.seq = v.seq AND e.run_id = v.run_id AND e.hash = v.hash)"
            )
        sql += " ORDER BY v.part DESC" + (" LIMIT 1" if latest else "")
        with self._cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()
        states: dict[int, ViewState] = {}
        for part, seq, hash_, state in rows:  # where two writers saved a part, the first trusted
            states.setdefault(int(part), ViewState(name, run, int(part), int(seq), hash_, loads_state(state)))
        return [states[p] for p in sorted(states)]

    def put_view_states(self, states: Sequence[ViewState]) -> None:
        if not states:
            return
        rows = [(s.name, s.run, s.part, s.seq, s.hash, encoded_state(s)) for s in states]
        p = self.P
        with self._write_tx() as conn:
            conn.exec_driver_sql(
                f"INSERT INTO views (name, run_id, part, seq, hash, state) VALUES ({p}, {p}, {p}, {p}, {p}, {p}) "
                "ON CONFLICT (name, run_id, part, writer) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, "
                "state = excluded.state",
                rows,
            )

    def drop_view_states(self, name: str, run: str) -> int:
        with self._write_tx() as conn:
            res = conn.exec_driver_sql(f"DELETE FROM views WHERE name = {self.P} AND run_id = {self.P}", (name, run))
        return int(res.rowcount)


def _quietly(*cleanups: Callable[[], Any]) -> None:
    """Release what a read held, however the database went (closed, lost): nothing left to do."""
    for cleanup in cleanups:
        try:
            cleanup()
        except Exception:  # noqa: BLE001, S110 - cleaning up after a reader that is gone
            pass


def _discard(raw: Any) -> None:
    """Close a pooled DBAPI connection after an error without the pool's reset (a rollback)."""
    try:
        raw.invalidate()
    except Exception:  # noqa: BLE001 - it is being thrown away
        pass
