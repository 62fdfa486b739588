"""PostgreSQL: every event type is closed from a version on, and a row's shape is checked at its own.

Ten types (``round.committed``, ``phase.completed``, ``eval.recorded`` ...) carried any field
beyond the ones they declared. Every type now declares its fields (a free-form one, a trainer's
figures, as a declared JSON object) and refuses others; the three that carried free-form figures
hold them in one field from their version 2 on, and their rows of version 1, whose figures are
flat, read through their upcasters. So the shape of a row depends on its version: from this
revision ``event_types`` holds, with each type's shape, the version from which it is closed
(``closed_since``, written by whoever upgrades the database, :mod:`diagevo.log.registry`), and the
chain check (0013, 0015) asks ``events_shape_problem`` of a row's data at its ``schema_version``.
Until the types are written, this revision's stub refuses every row, as 0013's did.

The chain check is the one 0015 left, with the call changed in place (it holds no other).

SQLite has no roles (whoever may write the file may drop a trigger): nothing changes there;
``memory verify`` checks a row at its version on every backend.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CALL = "events_shape_problem(i.type, j.d)"
_VERSIONED_CALL = "events_shape_problem(i.type, i.schema_version, j.d)"
_STUB = """
CREATE FUNCTION events_shape_problem({args}) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 'the event types are not written yet (the schema''s owner upgrades the database)'::text $$
"""


def _call(old: str, new: str) -> None:
    """The chain check as it stands, with its one call of the shape check ``old`` made ``new``."""
    body = str(op.get_bind().exec_driver_sql("SELECT pg_get_functiondef('events_check_chain'::regproc)").scalar())
    assert body.count(old) == 1, "the chain check's call of events_shape_problem moved"
    op.execute(body.replace(old, new))


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE event_types ADD COLUMN closed_since integer NOT NULL DEFAULT 1")
    op.execute(_STUB.format(args="type text, v integer, d jsonb"))
    _call(_CALL, _VERSIONED_CALL)
    op.execute("DROP FUNCTION events_shape_problem(text, jsonb)")


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute(_STUB.format(args="type text, d jsonb"))
    _call(_VERSIONED_CALL, _CALL)
    op.execute("DROP FUNCTION events_shape_problem(text, integer, jsonb)")
    op.execute("ALTER TABLE event_types DROP COLUMN closed_since")
