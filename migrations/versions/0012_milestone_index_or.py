"""SQLite: the milestone index's predicate as ``type = 'a' OR type = 'b' ...`` instead of
``type IN ('a', 'b', ...)``.

SQLite evaluates a partial index's ``IN (list)`` for every inserted row by filling an ephemeral
b-tree with the list: 5,041 b-trees opened for 5,000 appended events, about a sixth of an
append's instructions (``benchmarks/measure_append_work.py``). The OR chain is the same set of
rows, tested with plain comparisons. PostgreSQL keeps its ``IN``: it compares against an array,
with no per-row cost. The index keeps its name, columns and rows; the upgrade and the downgrade
rebuild it, nothing else.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MILESTONES = ("run.started", "round.started", "promotions.decided", "round.committed")  # as in 0009, frozen here
_COLUMNS = "CREATE UNIQUE INDEX uq_events_milestones ON events (run_id, type, round) WHERE "
_OR = " OR ".join(f"type = '{t}'" for t in sorted(MILESTONES))
_IN = "type IN (" + ", ".join(f"'{t}'" for t in MILESTONES) + ")"


def _rebuild(predicate: str) -> None:
    if op.get_context().dialect.name != "sqlite":
        return
    op.execute("DROP INDEX uq_events_milestones")
    op.execute(_COLUMNS + predicate)


def upgrade() -> None:
    _rebuild(_OR)


def downgrade() -> None:
    _rebuild(_IN)
