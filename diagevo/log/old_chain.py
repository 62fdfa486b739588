"""A database of the migration chain before the baseline, carried over to it.

Until 209e07d diagevo's schema grew by migrations ``0001_event_log`` ... ``0019_evidence_rules``;
the baseline (``migrations/versions/0001_baseline.py``) replaced them with the schema they had
built, at a new revision ``0001``. Alembic cannot walk from one chain to the other (the ids
overlap: the old ``0001`` is not the baseline), so such a database is recognised by its schema
and carried over whole by :func:`diagevo.log.schema.upgrade`:

1. its events are copied into a temporary table in the baseline's columns: the key columns
   (added by the old 0004) filled from the data as 0004 filled them where the table has none,
   each event's texts (the old 0008) taken from ``artifacts`` where an older revision kept them
   there, as the old 0011 moved them;
2. every object of the old chain goes (its tables, triggers, functions, the Alembic revision);
   the saved views' states go with them: caches, rebuilt by the next writer;
3. the baseline is created, and the rows are appended to it with their seq, ids, data, timestamps
   and hashes as they were, so the chain, ``memory export`` and ``memory verify`` read as before.
   On PostgreSQL the rows pass the baseline's chain check, which assigns seq: the carry-over is
   refused (nothing changes) if it would renumber a seq.

All in the caller's transaction: an error leaves the old database as it was.

How the old chain is told apart: its ``events`` table has no ``texts`` column (revisions
0001-0007) or has it after the key columns (0008-0019: 0008 added it after 0004's); the baseline
holds ``texts`` before them. The revision alone cannot tell: the old and the new chain share
``0001``, and a newer diagevo may reuse the old chain's later ids.
"""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import bindparam, inspect, text
from sqlalchemy.engine import Connection

from diagevo.log.errors import StoreError

REVISIONS = frozenset(f"{n:04d}" for n in range(1, 20))  # 0001_event_log ... 0019_evidence_rules
HOLD = "old_chain_events"  # the temporary table the rows wait in

# the data fields the key columns copy (the old 0004 and the baseline alike, frozen here)
KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")
BASE_COLUMNS = (
    "seq",
    "event_id",
    "run_id",
    "round",
    "type",
    "schema_version",
    "data",
    "recorded_at",
    "prev_hash",
    "hash",
)
COLUMNS = (*BASE_COLUMNS, "texts", *KEY_FIELDS)
# the texts an event of the revisions before 0008 named in ``artifacts`` (the old 0011's TEXT_FIELDS)
TEXT_FIELDS = {
    "question.generated": ("text",),
    "question.scored": ("reference",),
    "failure.recorded": ("response", "reference"),
    "failure.diagnosed": ("raw",),
    "diagnosis.failed": ("raw",),
    "llm.called": ("raw",),
}
# every table of the old chain (0002's snapshots and checkpoints became 0010's views; 0011 dropped
# artifacts; 0013 added event_types and events_append_lock on PostgreSQL)
TABLES = (
    "events",
    "artifacts",
    "snapshots",
    "checkpoints",
    "views",
    "event_types",
    "events_append_lock",
    "alembic_version",
)
# PostgreSQL: the old chain's functions (a table's triggers and indexes, and the seq's sequence,
# go with it)
FUNCTIONS = (
    "events_append_only()",
    "artifacts_append_only()",
    "views_writer()",
    "events_begin_insert()",
    "events_check_chain()",
    "events_check_rules()",
    "events_check_usable()",
    "events_check_evidence()",
    "events_is_timestamp(text)",
    "events_config_problem(jsonb)",
    "events_shape_problem(text, jsonb)",
    "events_shape_problem(text, integer, jsonb)",
)


def _event_columns(conn: Connection) -> list[str]:
    return [c["name"] for c in inspect(conn).get_columns("events")]


def holds(conn: Connection, revision: str | None) -> bool:
    """Whether the database (its ``events`` table diagevo's) is of the old chain: a revision of
    it, and ``texts`` missing or after the key columns."""
    if revision not in REVISIONS:
        return False
    columns = _event_columns(conn)
    if "texts" not in columns or not set(KEY_FIELDS) <= set(columns):
        return True
    return columns.index("texts") > max(columns.index(f) for f in KEY_FIELDS)


def hold_rows(conn: Connection) -> tuple[int, list[str]]:
    """Copy the events, in the baseline's columns, into the temporary table: their count, and a
    line naming each row whose data the carry-over could not read (carried as it is: every reader
    passes it over)."""
    present = set(_event_columns(conn))
    missing = [c for c in ("texts", *KEY_FIELDS) if c not in present]
    picked = [*BASE_COLUMNS, *(f"CAST(NULL AS TEXT) AS {c}" if c in missing else c for c in ("texts", *KEY_FIELDS))]
    conn.exec_driver_sql(f"CREATE TEMPORARY TABLE {HOLD} AS SELECT {', '.join(picked)} FROM events")
    unread = [
        f"run {run!r}, seq {seq}: its data is no JSON object; carried as it is, every reader passes it over"
        for seq, run, data in conn.exec_driver_sql(f"SELECT seq, run_id, data FROM {HOLD} ORDER BY seq")
        if _named(data) is None
    ]
    if set(KEY_FIELDS) & set(missing):
        _keys_from_data(conn)
    if _has_table(conn, "artifacts"):
        _texts_from_artifacts(conn)
    return int(conn.exec_driver_sql(f"SELECT count(*) FROM {HOLD}").scalar_one()), unread


def _named(data: object) -> dict[str, object] | None:
    """A row's data as the JSON object it holds, None where it holds none (a raw write's list,
    a text that is no JSON, bytes that are no UTF-8)."""
    try:
        named = json.loads(data)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return named if isinstance(named, dict) else None


def _keys_from_data(conn: Connection) -> None:
    """The key columns of a revision before 0004, as 0004 filled them: each field's value in the
    data where it is a string."""
    rows = conn.exec_driver_sql(f"SELECT seq, data FROM {HOLD}").fetchall()
    updates = []
    for seq, data in rows:
        named = _named(data) or {}
        keys = {f: v if isinstance(v := named.get(f), str) else None for f in KEY_FIELDS}
        if any(v is not None for v in keys.values()):
            updates.append({"seq": int(seq), **keys})
    if updates:
        sets = ", ".join(f"{f} = :{f}" for f in KEY_FIELDS)
        conn.execute(text(f"UPDATE {HOLD} SET {sets} WHERE seq = :seq"), updates)


def _has_table(conn: Connection, name: str) -> bool:
    return bool(inspect(conn).has_table(name))


def _texts_from_artifacts(conn: Connection) -> None:
    """The texts of the events that name some but hold none in their row, from ``artifacts``
    where its text has its key's sha256 (the old 0011; a text it lacks stays missing, as there)."""
    types = ", ".join(f"'{t}'" for t in TEXT_FIELDS)
    rows = conn.exec_driver_sql(f"SELECT seq, type, data FROM {HOLD} WHERE texts IS NULL AND type IN ({types})")
    refs: dict[int, dict[str, str]] = {}
    for seq, typ, data in rows.fetchall():
        named = _named(data) or {}
        for field in TEXT_FIELDS[typ]:
            ref = named.get(field)
            if isinstance(ref, dict) and isinstance(ref.get("$artifact"), str):
                refs.setdefault(int(seq), {})[field] = ref["$artifact"]
    shas = sorted({sha for fields in refs.values() for sha in fields.values()})
    stored: dict[str, str] = {}
    pick = text("SELECT sha256, text FROM artifacts WHERE sha256 IN :shas").bindparams(
        bindparam("shas", expanding=True)
    )
    for i in range(0, len(shas), 500):
        for sha, body in conn.execute(pick, {"shas": shas[i : i + 500]}):
            if hashlib.sha256(body.encode()).hexdigest() == sha:
                stored[sha] = body
    updates = []
    for seq, fields in refs.items():
        held = {field: stored[sha] for field, sha in fields.items() if sha in stored}
        if held:
            updates.append({"seq": seq, "texts": json.dumps(held, ensure_ascii=False, separators=(",", ":"))})
    if updates:
        conn.execute(text(f"UPDATE {HOLD} SET texts = :texts WHERE seq = :seq"), updates)


def drop_old(conn: Connection) -> None:
    """Every object of the old chain (the held rows stay)."""
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        conn.exec_driver_sql("DROP VIEW IF EXISTS events_bound")  # it names events
    for table in TABLES:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
    if postgres:
        for function in FUNCTIONS:
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {function}")


def append_held(conn: Connection, count: int) -> None:
    """The held rows appended to the baseline's ``events`` in seq order, then the holding table
    dropped. PostgreSQL assigns the seqs (its chain check refuses one given): each must come out
    as it was, or the carry-over fails."""
    postgres = conn.dialect.name == "postgresql"
    columns = ", ".join(COLUMNS[1:] if postgres else COLUMNS)
    conn.exec_driver_sql(f"INSERT INTO events ({columns}) SELECT {columns} FROM {HOLD} ORDER BY seq")
    same = conn.exec_driver_sql(
        f"SELECT count(*) FROM events e JOIN {HOLD} h ON h.seq = e.seq AND h.run_id = e.run_id "
        "AND h.event_id = e.event_id AND h.hash = e.hash"
    ).scalar_one()
    if int(same) != count:
        raise StoreError(
            f"the earlier diagevo's log cannot be carried over as it is: {count - int(same)} of its {count} "
            "events would change their seq (its seqs are not 1, 2, 3, ... in order); nothing was changed"
        )
    conn.exec_driver_sql(f"DROP TABLE {HOLD}")
