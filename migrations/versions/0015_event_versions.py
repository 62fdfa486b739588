"""PostgreSQL: each event type's version, and the versions an inserted row may name.

Every stored event keeps the version of its class it was written at (``schema_version``, in
its hash), and a read upcasts it from there. Until now every row was 1, and the chain check
(0013) refused any other. From this revision ``event_types`` holds each type's current version
(``version``, written with the type's shape by whoever upgrades the database,
:mod:`diagevo.log.registry`), and the check refuses, for any inserting role, a row whose
``schema_version`` is below 1 or above its type's version (a type ``event_types`` does not hold:
above 1): a version no reader of this database knows the shape of. The rows stored before keep
their 1.

SQLite has no roles (whoever may write the file may drop a trigger): nothing changes there;
``memory verify`` names such a row on every backend.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ONE = "WHEN i.schema_version <> 1 THEN 'its schema version is not 1'"
_KNOWN = (
    "WHEN i.schema_version < 1 OR i.schema_version > COALESCE(t.version, 1) THEN 'its schema version ' "
    "|| i.schema_version || ' is not a version of ' || i.type || ' this database knows (1 to ' "
    "|| COALESCE(t.version, 1) || '; the schema''s owner registers a newer diagevo''s by upgrading the database)'"
)


def _rule(old: str, new: str) -> None:
    """The chain check as it stands (0013's), with its schema version rule ``old`` made ``new``."""
    body = str(op.get_bind().exec_driver_sql("SELECT pg_get_functiondef('events_check_chain'::regproc)").scalar())
    assert body.count(old) == 1, "the chain check's schema version rule moved"
    op.execute(body.replace(old, new))


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE event_types ADD COLUMN version integer NOT NULL DEFAULT 1")
    _rule(_ONE, _KNOWN)


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    _rule(_KNOWN, _ONE)
    op.execute("ALTER TABLE event_types DROP COLUMN version")
