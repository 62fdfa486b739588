"""Indexes for the reads that must not scan a whole run: by type, by round (covering the type),
and by the ids events name (cause, failure, question) as partial expression indexes over the
JSON data, on SQLite and PostgreSQL alike.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# the data fields that name a cause, a failure or a question (diagevo.events.keys.KEY_FIELDS; a
# migration keeps its own copy)
KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")


_RETAINED = {
    "sqlite": "type = 'question.scored' AND json_extract(data, '$.retained') = 1",
    "postgresql": "type = 'question.scored' AND (data::json ->> 'retained') = 'true'",
}


def _expr(dialect: str, field: str) -> str:
    if dialect == "postgresql":
        return f"((data::json ->> '{field}'))"
    return f"json_extract(data, '$.{field}')"


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    op.create_index("ix_events_run_type_seq", "events", ["run_id", "type", "seq"])
    op.drop_index("ix_events_run_round", table_name="events")
    op.create_index("ix_events_run_round_type", "events", ["run_id", "round", "type"])
    for field in KEY_FIELDS:
        expr = _expr(dialect, field)
        op.execute(f"CREATE INDEX ix_events_{field} ON events (run_id, {expr}) WHERE {expr} IS NOT NULL")
    # retained questions per round (``memory stats`` of a log whose commits carry no summary)
    op.execute(f"CREATE INDEX ix_events_retained ON events (run_id, round) WHERE {_RETAINED[dialect]}")


def downgrade() -> None:
    op.drop_index("ix_events_retained", table_name="events")
    for field in KEY_FIELDS:
        op.drop_index(f"ix_events_{field}", table_name="events")
    op.drop_index("ix_events_run_round_type", table_name="events")
    op.create_index("ix_events_run_round", "events", ["run_id", "round"])
    op.drop_index("ix_events_run_type_seq", table_name="events")
