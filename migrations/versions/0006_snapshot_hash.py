"""Snapshots name the hash of the event they fold up to (the run's ``round.committed``), so that
``memory verify`` can tell a log whose tail was cut off (or replaced) from the snapshot that
summarised it. Nullable: snapshots written before keep NULL and are checked by their seq alone.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("snapshots", sa.Column("hash", sa.String(64), nullable=True))


def downgrade() -> None:
    # SQLite >= 3.35 and PostgreSQL drop a column in place
    op.execute("ALTER TABLE snapshots DROP COLUMN hash")
