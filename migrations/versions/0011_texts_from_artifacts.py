"""The texts of events appended before 0008 move from ``artifacts`` into their events' ``texts``
column, and ``artifacts`` goes: every text lies in its event's row, and reads and ``verify``
have one place to look. The data keeps naming each text by its sha256, so no hash changes; a
text missing from ``artifacts`` stays missing (``verify`` reports it, as before).

``events`` is append-only by trigger; this migration (run by the schema's owner) lifts the
UPDATE guard for the one statement that fills the column and puts it back.

The downgrade recreates ``artifacts`` (empty, append-only again): the texts stay in their rows,
where the revisions from 0008 on read them first, so nothing is lost either way.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# diagevo.catalog.TEXT_FIELDS as it stood when these events were written, frozen here
TEXT_FIELDS = {
    "question.generated": ("text",),
    "question.scored": ("reference",),
    "failure.recorded": ("response", "reference"),
    "failure.diagnosed": ("raw",),
    "diagnosis.failed": ("raw",),
    "llm.called": ("raw",),
}
_SQLITE_NO_UPDATE = (
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END"
)


def _legacy_texts(conn: sa.Connection) -> list[dict[str, object]]:
    """{seq, texts} of every event that names texts but holds none in its row."""
    types = ", ".join(f"'{t}'" for t in TEXT_FIELDS)
    rows = conn.exec_driver_sql(
        f"SELECT seq, type, data FROM events WHERE texts IS NULL AND type IN ({types})"
    ).fetchall()
    refs: dict[int, dict[str, str]] = {}
    for seq, typ, data in rows:
        named = json.loads(data)
        for field in TEXT_FIELDS[typ]:
            ref = named.get(field)
            if isinstance(ref, dict) and isinstance(ref.get("$artifact"), str):
                refs.setdefault(int(seq), {})[field] = ref["$artifact"]
    shas = sorted({sha for fields in refs.values() for sha in fields.values()})
    stored: dict[str, str] = {}
    for i in range(0, len(shas), 500):
        chunk = shas[i : i + 500]
        stmt = sa.text("SELECT sha256, text FROM artifacts WHERE sha256 IN :shas").bindparams(
            sa.bindparam("shas", expanding=True)
        )
        stored.update(
            {
                sha: text
                for sha, text in conn.execute(stmt, {"shas": chunk})
                if hashlib.sha256(text.encode()).hexdigest() == sha
            }
        )
    out = []
    for seq, fields in refs.items():
        held = {field: stored[sha] for field, sha in fields.items() if sha in stored}
        if held:
            out.append({"seq": seq, "texts": json.dumps(held, ensure_ascii=False, separators=(",", ":"))})
    return out


def upgrade() -> None:
    conn = op.get_bind()
    updates = _legacy_texts(conn)
    postgres = op.get_context().dialect.name == "postgresql"
    if updates:
        if postgres:
            op.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
        else:
            op.execute("DROP TRIGGER events_no_update")
        conn.execute(sa.text("UPDATE events SET texts = :texts WHERE seq = :seq"), updates)
        if postgres:
            op.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
        else:
            op.execute(_SQLITE_NO_UPDATE)
    if postgres:
        op.execute("DROP TRIGGER IF EXISTS artifacts_no_truncate ON artifacts")
        op.execute("DROP TRIGGER IF EXISTS artifacts_append_only ON artifacts")
        op.execute("DROP FUNCTION IF EXISTS artifacts_append_only()")
    op.drop_table("artifacts")  # its SQLite triggers go with it


def downgrade() -> None:
    op.create_table(
        "artifacts",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("text", sa.Text(), nullable=False),
    )
    if op.get_context().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION artifacts_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'artifacts are append-only: % refused', TG_OP USING ERRCODE = 'restrict_violation'; END $$"
        )
        op.execute(
            "CREATE TRIGGER artifacts_append_only BEFORE UPDATE OR DELETE ON artifacts "
            "FOR EACH ROW EXECUTE FUNCTION artifacts_append_only()"
        )
        op.execute(
            "CREATE TRIGGER artifacts_no_truncate BEFORE TRUNCATE ON artifacts "
            "FOR EACH STATEMENT EXECUTE FUNCTION artifacts_append_only()"
        )
    else:
        op.execute(
            "CREATE TRIGGER artifacts_no_update BEFORE UPDATE ON artifacts "
            "BEGIN SELECT RAISE(ABORT, 'artifacts are append-only: UPDATE refused'); END"
        )
        op.execute(
            "CREATE TRIGGER artifacts_no_delete BEFORE DELETE ON artifacts "
            "BEGIN SELECT RAISE(ABORT, 'artifacts are append-only: DELETE refused'); END"
        )
