"""Artifacts become append-only as events are: UPDATE, DELETE (and on PostgreSQL TRUNCATE) of
``artifacts`` are refused by the database. Their key is already the sha256 of the text, so an
existing log needs no data change; ``memory verify`` checks each referenced text against its key.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_TRIGGERS = [
    "CREATE TRIGGER artifacts_no_update BEFORE UPDATE ON artifacts "
    "BEGIN SELECT RAISE(ABORT, 'artifacts are append-only: UPDATE refused'); END",
    "CREATE TRIGGER artifacts_no_delete BEFORE DELETE ON artifacts "
    "BEGIN SELECT RAISE(ABORT, 'artifacts are append-only: DELETE refused'); END",
]

_PG_FUNCTION = """
CREATE FUNCTION artifacts_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'artifacts are append-only: % refused', TG_OP USING ERRCODE = 'restrict_violation';
END
$$
"""

_PG_TRIGGERS = [
    "CREATE TRIGGER artifacts_append_only BEFORE UPDATE OR DELETE ON artifacts "
    "FOR EACH ROW EXECUTE FUNCTION artifacts_append_only()",
    "CREATE TRIGGER artifacts_no_truncate BEFORE TRUNCATE ON artifacts "
    "FOR EACH STATEMENT EXECUTE FUNCTION artifacts_append_only()",
]


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        for stmt in _PG_TRIGGERS:
            op.execute(stmt)
    else:
        for stmt in _SQLITE_TRIGGERS:
            op.execute(stmt)


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS artifacts_no_truncate ON artifacts")
        op.execute("DROP TRIGGER IF EXISTS artifacts_append_only ON artifacts")
        op.execute("DROP FUNCTION IF EXISTS artifacts_append_only()")
    else:
        op.execute("DROP TRIGGER IF EXISTS artifacts_no_update")
        op.execute("DROP TRIGGER IF EXISTS artifacts_no_delete")
