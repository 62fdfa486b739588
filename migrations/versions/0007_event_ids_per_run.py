"""Event ids are unique per run, not per database: ``UNIQUE (event_id)`` becomes a unique index
on ``(run_id, event_id)``. The same id in two runs is two events (a run ingested under another
name, a protocol id ``RUN/T/KEY`` that happens to equal another run's); re-appending an id to its
own run stays a no-op. Every stored row keeps its seq, hash and chain.

On SQLite a table constraint cannot be dropped, so ``events`` is rebuilt in place (same columns,
same rows, its indexes and append-only triggers recreated from their stored SQL).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_CONSTRAINT = "CONSTRAINT uq_events_event_id UNIQUE (event_id)"
_NEW_INDEX = "CREATE UNIQUE INDEX uq_events_run_event_id ON events (run_id, event_id)"


def _rebuild_sqlite(add_constraint: bool) -> None:
    """Recreate ``events`` with or without the database-wide ``UNIQUE (event_id)``."""
    conn = op.get_bind()
    (table_sql,) = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").one()
    others = [
        r[0]
        for r in conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'events' AND type IN ('index', 'trigger') "
            "AND sql IS NOT NULL AND name <> 'uq_events_run_event_id' ORDER BY type, name"
        )
    ]
    body = re.sub(r",\s*CONSTRAINT uq_events_event_id UNIQUE \(event_id\)", "", table_sql)
    if add_constraint:
        body = body.rstrip()[:-1].rstrip() + f", \n\t{_OLD_CONSTRAINT}\n)"
    new_sql = re.sub(r"^CREATE TABLE \"?events\"?", "CREATE TABLE events_rebuilt", body, count=1)
    conn.exec_driver_sql(new_sql)
    conn.exec_driver_sql("INSERT INTO events_rebuilt SELECT * FROM events")
    conn.exec_driver_sql("DROP TABLE events")  # its indexes and triggers go with it (no trigger fires)
    conn.exec_driver_sql("ALTER TABLE events_rebuilt RENAME TO events")
    for sql in others:
        conn.exec_driver_sql(sql)


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute("ALTER TABLE events DROP CONSTRAINT uq_events_event_id")
    else:
        _rebuild_sqlite(add_constraint=False)
    op.execute(_NEW_INDEX)


def downgrade() -> None:
    op.execute("DROP INDEX uq_events_run_event_id")
    if op.get_context().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE events ADD {_OLD_CONSTRAINT}")
    else:
        _rebuild_sqlite(add_constraint=True)
