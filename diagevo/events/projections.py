"""The projections' caches in SQL: snapshots of M_t per committed round (with the seq and hash
of the commit they fold up to) and checkpoints of rebuildable projections (the vector index).
Both are caches: always rebuildable from the log, written after the events committed, never a
reason for a command to fail (see :func:`diagevo.replay.refresh_snapshots`). The read models of
``stats``/``why``/``events`` are folds over the recorder's indexed reads (:mod:`diagevo.replay`,
:mod:`diagevo.queries`)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from diagevo.events.backends import connect
from diagevo.events.recorder import StoreError, json_or_error, loads, one_line
from diagevo.urls import redact_url


class SQLProjections:
    """Snapshots and checkpoints of a SQL recorder (a mixin: the recorder gives the engine and
    its write transaction)."""

    url: str
    _engine: Engine

    @abstractmethod
    def _write_tx(self, *, append_lock: bool = False) -> AbstractContextManager[Connection]: ...

    def _upsert(self, conn: Connection, table: str, keys: tuple[str, ...], values: dict[str, Any]) -> None:
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
        with self._read_conn() as conn:
            rows = conn.execute(
                text("SELECT round, seq, hash FROM snapshots WHERE run_id = :run ORDER BY round"), {"run": run}
            ).all()
        return [(int(r[0]), int(r[1]), r[2]) for r in rows]

    def checkpoints(self, run: str) -> dict[str, int]:
        """Projection name -> last seq it applied, for the run."""
        with self._read_conn() as conn:
            rows = conn.execute(text("SELECT name, seq FROM checkpoints WHERE run_id = :run"), {"run": run}).all()
        return {r[0]: int(r[1]) for r in rows}

    def get_snapshot(self, run: str, round: int) -> tuple[int, dict[str, Any]] | None:
        """(seq, state) of the snapshot at ``round``, or None."""
        with self._read_conn() as conn:
            row = conn.execute(
                text("SELECT seq, state FROM snapshots WHERE run_id = :run AND round = :round"),
                {"run": run, "round": round},
            ).first()
        return (int(row[0]), loads(row[1])) if row else None

    def latest_snapshot(self, run: str, upto_round: int | None = None) -> tuple[int, int, dict[str, Any]] | None:
        """(round, seq, state) of the latest snapshot at or before ``upto_round``."""
        sql = "SELECT round, seq, state FROM snapshots WHERE run_id = :run"
        params: dict[str, Any] = {"run": run}
        if upto_round is not None:
            sql += " AND round <= :upto"
            params["upto"] = upto_round
        with self._read_conn() as conn:
            row = conn.execute(text(sql + " ORDER BY round DESC LIMIT 1"), params).first()
        return (int(row[0]), int(row[1]), loads(row[2])) if row else None

    def snapshots(self, run: str) -> list[tuple[int, int, dict[str, Any]]]:
        """(round, seq, state) of every snapshot of the run, by round."""
        with self._read_conn() as conn:
            rows = conn.execute(
                text("SELECT round, seq, state FROM snapshots WHERE run_id = :run ORDER BY round"), {"run": run}
            ).all()
        return [(int(r[0]), int(r[1]), loads(r[2])) for r in rows]

    def drop_snapshots(self, run: str) -> int:
        """Delete the run's snapshots (they are a cache); returns how many were dropped."""
        with self._write_tx() as conn:
            res = conn.execute(text("DELETE FROM snapshots WHERE run_id = :run"), {"run": run})
        return int(res.rowcount)

    def get_checkpoint(self, name: str, run: str) -> int:
        """Last seq applied by projection ``name`` for ``run``; 0 when none."""
        with self._read_conn() as conn:
            row = conn.execute(
                text("SELECT seq FROM checkpoints WHERE name = :name AND run_id = :run"), {"name": name, "run": run}
            ).first()
        return int(row[0]) if row else 0

    def checkpoint_info(self, name: str, run: str) -> dict[str, Any]:
        """The ``info`` stored with a checkpoint (e.g. the embed model name); {} when none."""
        with self._read_conn() as conn:
            row = conn.execute(
                text("SELECT info FROM checkpoints WHERE name = :name AND run_id = :run"), {"name": name, "run": run}
            ).first()
        return loads(row[0]) if row else {}

    def set_checkpoint(self, name: str, run: str, seq: int, info: dict[str, Any] | None = None) -> None:
        info_json = json_or_error(info or {}, "checkpoint info")
        with self._write_tx() as conn:
            self._upsert(
                conn, "checkpoints", ("name", "run_id"), {"name": name, "run_id": run, "seq": seq, "info": info_json}
            )

    @contextmanager
    def _read_conn(self) -> Iterator[Connection]:
        try:
            with connect(self._engine, self.url) as conn:
                yield conn
        except sa_exc.DBAPIError as exc:
            raise StoreError(f"read from {redact_url(self.url)} failed: {one_line(exc)}") from None
