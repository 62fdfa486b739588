"""Texts are kept with their events: a nullable ``texts`` column holds ``{field: text}`` of the
texts an event's data names as ``{"$artifact": sha256}``, written in the same row as the event.

The data keeps naming each text by its sha256, so the hash chain still commits to every text and
``verify`` checks each one against its key, as before. What changes is where the text lies: one
row appended at the end of ``events`` instead of a second row in ``artifacts`` at a random place
of its key index (``benchmarks/bench_store.py`` (d): the rows of 28,000 realistic events go in at
9.0 instead of 11.3 µs an event, and the store appends at 14.2 instead of 17.1). The column is
outside the chained data; the append-only triggers of ``events`` guard it like every other column.

Rows appended before this revision keep their texts in ``artifacts`` (``texts`` is NULL) and are
read and verified from there; ``artifacts`` stays append-only. The downgrade copies the texts of
newer rows into ``artifacts`` first, so no text is lost.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("events", sa.Column("texts", sa.Text(), nullable=True))  # in place on both backends


def downgrade() -> None:
    conn = op.get_bind()
    rows = conn.exec_driver_sql("SELECT data, texts FROM events WHERE texts IS NOT NULL")
    insert = sa.text("INSERT INTO artifacts (sha256, text) VALUES (:sha, :text) ON CONFLICT (sha256) DO NOTHING")
    while batch := rows.fetchmany(4096):
        arts = {}
        for data, texts in batch:
            refs = json.loads(data)
            for field, text in json.loads(texts).items():
                ref = refs.get(field)
                if isinstance(ref, dict) and isinstance(ref.get("$artifact"), str):
                    arts[ref["$artifact"]] = text
        if arts:
            conn.execute(insert, [{"sha": s, "text": t} for s, t in arts.items()])
    # SQLite >= 3.35 and PostgreSQL drop a column in place (the triggers are kept)
    op.execute("ALTER TABLE events DROP COLUMN texts")
