"""The ids events name (cause, failure, question) become columns of their own, which the store
fills from ``data`` at append time, replacing 0003's expression indexes over the JSON: a plain
column costs an append almost nothing, an expression index parsed the JSON once per index and
row. Existing rows are filled from their JSON here, with the append-only triggers lifted for that
one statement only; the hash chain covers ``data`` alone, so it is unaffected.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# the data fields that name a cause, a failure or a question (a migration keeps its own copy of
# diagevo.events.keys.KEY_FIELDS)
KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")

_SQLITE_UPDATE_TRIGGER = (
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END"
)


def _extract(dialect: str, field: str) -> str:
    if dialect == "postgresql":
        return f"CASE WHEN json_typeof(data::json -> '{field}') = 'string' THEN data::json ->> '{field}' END"
    return f"CASE WHEN json_type(data, '$.{field}') = 'text' THEN json_extract(data, '$.{field}') END"


def _json_expr(dialect: str, field: str) -> str:
    """The expression 0003 indexed."""
    if dialect == "postgresql":
        return f"((data::json ->> '{field}'))"
    return f"json_extract(data, '$.{field}')"


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    for field in KEY_FIELDS:
        op.drop_index(f"ix_events_{field}", table_name="events")
        op.add_column("events", sa.Column(field, sa.String(), nullable=True))
    sets = ", ".join(f"{f} = {_extract(dialect, f)}" for f in KEY_FIELDS)
    if dialect == "postgresql":
        op.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
        op.execute(f"UPDATE events SET {sets}")
        op.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
    else:
        op.execute("DROP TRIGGER events_no_update")
        op.execute(f"UPDATE events SET {sets}")
        op.execute(_SQLITE_UPDATE_TRIGGER)
    for field in KEY_FIELDS:
        op.create_index(
            f"ix_events_{field}",
            "events",
            ["run_id", field],
            sqlite_where=sa.text(f"{field} IS NOT NULL"),
            postgresql_where=sa.text(f"{field} IS NOT NULL"),
        )


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    for field in KEY_FIELDS:
        op.drop_index(f"ix_events_{field}", table_name="events")
        # SQLite >= 3.35 and PostgreSQL drop a column in place (the triggers are kept)
        op.execute(f"ALTER TABLE events DROP COLUMN {field}")
        expr = _json_expr(dialect, field)
        op.execute(f"CREATE INDEX ix_events_{field} ON events (run_id, {expr}) WHERE {expr} IS NOT NULL")
