"""The projections' caches in SQL: snapshots of M_t per committed round (with the seq and hash
of the commit they fold up to) and checkpoints of rebuildable projections (the vector index).
Both are caches: always rebuildable from the log, written after the events committed, never a
reason for a command to fail (see :func:`diagevo.replay.refresh_snapshots`). The read models of
``stats``/``why``/``events`` are folds over the recorder's indexed reads (:mod:`diagevo.replay`,
:mod:`diagevo.queries`)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from diagevo.events.recorder import json_or_error, loads

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine


class SQLProjections:
    """Snapshots and checkpoints of a SQL recorder (a mixin: the recorder gives its placeholder,
    its read cursor and its write transaction). Reads go through the DBAPI cursor, as the log's
    reads do; writes through SQLAlchemy's transaction."""

    url: str
    P: str
    _engine: Engine

    @abstractmethod
    def _write_tx(self, *, append_lock: bool = False) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _cursor(self, *, stream: bool = False) -> AbstractContextManager[Any]: ...

    def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Rows of a small read; ``?`` in ``sql`` stands for the backend's placeholder."""
        with self._cursor() as cur:
            cur.execute(sql.replace("?", self.P), params)
            return list(cur.fetchall())

    def _upsert(self, conn: Connection, table: str, keys: tuple[str, ...], values: dict[str, Any]) -> None:
        from sqlalchemy import text

        cols = ", ".join(values)
        binds = ", ".join(f":{c}" for c in values)
        sets = ", ".join(f"{c} = excluded.{c}" for c in values if c not in keys)
        conn.execute(
            text(f"INSERT INTO {table} ({cols}) VALUES ({binds}) ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}"),
            values,
        )

    def put_snapshot(self, run: str, round: int, seq: int, state: dict[str, Any], hash: str | None = None) -> None:
        """Store (or replace) the cached memory of ``run`` at committed ``round``, folded up to
        the event at ``seq`` whose hash is ``hash`` (looked up when not given)."""
        from sqlalchemy import text

        state_json = json_or_error(state, "snapshot state")
        with self._write_tx() as conn:
            if hash is None:
                hash = conn.execute(
                    text("SELECT hash FROM events WHERE seq = :seq AND run_id = :run"), {"seq": seq, "run": run}
                ).scalar()
            self._upsert(
                conn, "snapshots", ("run_id", "round"),
                {"run_id": run, "round": round, "seq": seq, "state": state_json, "hash": hash},
            )

    def snapshot_anchors(self, run: str) -> list[tuple[int, int, str | None]]:
        """(round, seq, hash) of every snapshot of the run, by round: what each one claims the
        log holds (hash None for snapshots written before migration 0006)."""
        rows = self._rows("SELECT round, seq, hash FROM snapshots WHERE run_id = ? ORDER BY round", (run,))
        return [(int(r[0]), int(r[1]), r[2]) for r in rows]

    def checkpoints(self, run: str) -> dict[str, int]:
        """Projection name -> last seq it applied, for the run."""
        return {r[0]: int(r[1]) for r in self._rows("SELECT name, seq FROM checkpoints WHERE run_id = ?", (run,))}

    def get_snapshot(self, run: str, round: int) -> tuple[int, dict[str, Any]] | None:
        """(seq, state) of the snapshot at ``round``, or None."""
        rows = self._rows("SELECT seq, state FROM snapshots WHERE run_id = ? AND round = ?", (run, round))
        return (int(rows[0][0]), loads(rows[0][1])) if rows else None

    def latest_snapshot(self, run: str, upto_round: int | None = None) -> tuple[int, int, dict[str, Any]] | None:
        """(round, seq, state) of the latest snapshot at or before ``upto_round``."""
        sql, params = "SELECT round, seq, state FROM snapshots WHERE run_id = ?", list[Any]([run])
        if upto_round is not None:
            sql, params = sql + " AND round <= ?", [run, upto_round]
        rows = self._rows(sql + " ORDER BY round DESC LIMIT 1", params)
        return (int(rows[0][0]), int(rows[0][1]), loads(rows[0][2])) if rows else None

    def snapshots(self, run: str) -> list[tuple[int, int, dict[str, Any]]]:
        """(round, seq, state) of every snapshot of the run, by round."""
        rows = self._rows("SELECT round, seq, state FROM snapshots WHERE run_id = ? ORDER BY round", (run,))
        return [(int(r[0]), int(r[1]), loads(r[2])) for r in rows]

    def drop_snapshots(self, run: str) -> int:
        """Delete the run's snapshots (they are a cache); returns how many were dropped."""
        from sqlalchemy import text

        with self._write_tx() as conn:
            res = conn.execute(text("DELETE FROM snapshots WHERE run_id = :run"), {"run": run})
        return int(res.rowcount)

    def get_checkpoint(self, name: str, run: str) -> int:
        """Last seq applied by projection ``name`` for ``run``; 0 when none."""
        rows = self._rows("SELECT seq FROM checkpoints WHERE name = ? AND run_id = ?", (name, run))
        return int(rows[0][0]) if rows else 0

    def checkpoint_info(self, name: str, run: str) -> dict[str, Any]:
        """The ``info`` stored with a checkpoint (e.g. the embed model name); {} when none."""
        rows = self._rows("SELECT info FROM checkpoints WHERE name = ? AND run_id = ?", (name, run))
        return loads(rows[0][0]) if rows else {}

    def set_checkpoint(self, name: str, run: str, seq: int, info: dict[str, Any] | None = None) -> None:
        info_json = json_or_error(info or {}, "checkpoint info")
        with self._write_tx() as conn:
            self._upsert(
                conn, "checkpoints", ("name", "run_id"), {"name": name, "run_id": run, "seq": seq, "info": info_json}
            )
