"""The views' saved states in one table: ``snapshots`` (the memory at each committed round) and
``checkpoints`` (the stats read model, the vector index) become rows of ``views`` (name, run,
part, writer; seq, hash, state). Every state names the seq and hash of the event it folded up
to, and a reader uses only a state whose event the log still holds with that hash. ``writer``
is the role that saved the state (PostgreSQL sets it by trigger to ``current_user``, whatever
the row said; '' on SQLite): a reader trusts its own states and the owner's, so a role allowed
to write caches cannot plant one the owner reads.

The partial index ``ix_events_retained`` goes: retained questions are counted by the stats view.
States that no event anchors (a log cut off under its snapshots) are not carried over: they are
caches, rebuilt on the next write.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MEMORY = "memory"  # the view name of the memory snapshots (diagevo.views.memory.VIEW, frozen here)

_PG_WRITER = """
CREATE FUNCTION views_writer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.writer := current_user;
    RETURN NEW;
END
$$;
CREATE TRIGGER views_writer BEFORE INSERT OR UPDATE ON views FOR EACH ROW EXECUTE FUNCTION views_writer()
"""

_RETAINED = {
    "sqlite": "type = 'question.scored' AND json_extract(data, '$.retained') = 1",
    "postgresql": "type = 'question.scored' AND (data::json ->> 'retained') = 'true'",
}


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    writer = "current_user" if dialect == "postgresql" else "''"
    op.create_table(
        "views",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("part", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("writer", sa.String(), primary_key=True, server_default=sa.text(writer)),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
    )
    op.execute(
        "INSERT INTO views (name, run_id, part, seq, hash, state) "
        f"SELECT '{MEMORY}', s.run_id, s.round, s.seq, e.hash, s.state FROM snapshots s "
        "JOIN events e ON e.seq = s.seq AND e.run_id = s.run_id WHERE s.hash IS NULL OR s.hash = e.hash"
    )
    op.execute(
        "INSERT INTO views (name, run_id, part, seq, hash, state) "
        "SELECT c.name, c.run_id, 0, c.seq, e.hash, c.info FROM checkpoints c "
        "JOIN events e ON e.seq = c.seq AND e.run_id = c.run_id"
    )
    op.drop_table("snapshots")
    op.drop_table("checkpoints")
    op.drop_index("ix_events_retained", table_name="events")
    if dialect == "postgresql":
        op.execute(_PG_WRITER)


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    op.execute(f"CREATE INDEX ix_events_retained ON events (run_id, round) WHERE {_RETAINED[dialect]}")
    op.create_table(
        "snapshots",
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("round", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=True),
    )
    op.create_table(
        "checkpoints",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("info", sa.Text(), nullable=False, server_default="{}"),
    )
    # one state per key where several writers saved one: the owner's (the migrating role) first
    owner = "current_user" if dialect == "postgresql" else "''"
    for mine in (f"writer = {owner}", f"writer <> {owner}"):
        op.execute(
            "INSERT INTO snapshots (run_id, round, seq, state, hash) SELECT run_id, part, seq, state, hash FROM views "
            f"WHERE name = '{MEMORY}' AND {mine} ON CONFLICT DO NOTHING"
        )
        op.execute(
            "INSERT INTO checkpoints (name, run_id, seq, info) SELECT name, run_id, seq, state FROM views "
            f"WHERE name <> '{MEMORY}' AND part = 0 AND {mine} ON CONFLICT DO NOTHING"
        )
    if dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS views_writer ON views")
        op.execute("DROP FUNCTION IF EXISTS views_writer()")
    op.drop_table("views")
