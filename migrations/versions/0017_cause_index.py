"""The index of the events that name a cause holds their seq and type: ``ix_events_cause_id`` on
``(run_id, cause_id, seq, type)`` instead of ``(run_id, cause_id)``; on SQLite it replaces 0014's
``ix_events_cause_changes``, which goes.

A busy cause is named by tens of thousands of ``failure.attributed`` events and a handful of
others. ``memory why`` shows its creation, promotions and reactivations whole and only its most
recent attributions, with how many there are: with the type in the index, those are read from
index entries alone (a count, a walk back from the newest entry, a filter of the entries), where
before every event naming the cause was read from the table to learn its type; ``memory events
--cause`` reads the first page of them in seq order without sorting them all. The index keeps its
name, its predicate and its rows (one entry per event naming a cause).

A cause's changes (its creation, promotions, reactivations) are those entries of the cause whose
type is one of the three, so on SQLite ``ix_events_cause_changes`` serves no read any more and
goes: an append's work per event stays where it was (the wider cause index costs what the dropped
one did, ``benchmarks/measure_append_work.py``). PostgreSQL keeps it: its rules trigger (0014)
looks a cause's state up there.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHANGES = "type IN ('cause.created', 'cause.promoted', 'cause.reactivated')"  # as in 0014, frozen here


def _rebuild(columns: list[str]) -> None:
    op.drop_index("ix_events_cause_id", table_name="events")
    where = sa.text("cause_id IS NOT NULL")
    op.create_index("ix_events_cause_id", "events", columns, sqlite_where=where, postgresql_where=where)


def upgrade() -> None:
    _rebuild(["run_id", "cause_id", "seq", "type"])
    if op.get_context().dialect.name == "sqlite":
        op.drop_index("ix_events_cause_changes", table_name="events")


def downgrade() -> None:
    if op.get_context().dialect.name == "sqlite":
        changes = sa.text(_CHANGES)
        op.create_index("ix_events_cause_changes", "events", ["run_id", "cause_id", "seq"], sqlite_where=changes)
    _rebuild(["run_id", "cause_id"])
