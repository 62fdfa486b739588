"""The baseline: the whole schema of diagevo's first release, created at once.

The database keeps the log whole, whoever writes it; the Python rules decide what a row means.
What the database enforces here, on both backends:

- ``events`` is append-only (no UPDATE or DELETE; on PostgreSQL no TRUNCATE either);
- an event id is unique per run; a run holds at most one ``run.started`` and a round at most one
  ``round.started``, ``promotions.decided`` and ``round.committed`` (``uq_events_milestones``).

On PostgreSQL, where a role may be granted INSERT alone (the trainer's), an INSERT statement's
triggers, run as the schema's owner, also keep:

- the order: every appender takes the append lock (``EXCLUSIVE`` on ``events_append_lock``, which
  a role that may only read cannot take), and the database assigns ``seq`` (the log continues
  after the highest), so seq order is commit order;
- the chain: each row's ``prev_hash`` is its run's last hash, its ``hash`` the sha256 of
  ``prev_hash`` and the canonical event (:func:`diagevo.log.canonical`); ids, round, type and
  ``recorded_at`` in shape;
- for every role but the tables' owner and superusers (``events_bound``; the owner migrates and
  may repair, a superuser may lift any trigger): the type and version from ``event_types`` (the
  catalog's, written by ``db upgrade``), the data a reader can read (a JSON object, nested at most
  64 levels, every number within a double's range, each declared field of its JSON type), the
  key columns its data's ids, and a run that opens with its ``run.started`` in round 0. The data's
  check is generated from the event classes at every upgrade (:mod:`diagevo.log.registry`);
  until then this revision's stub refuses every row of a bound role.

No rule of the memory, the counting or the checkpoints is stated here: a row the database takes
and the rules refuse is passed over by every reader, named (:mod:`diagevo.memory.fold`).
SQLite has no roles (whoever may write the file may drop a trigger): only the append-only
triggers and the indexes apply there.

Later migrations are literal: each states its own SQL, never reads another's text or edits a
live function's.

Revision ID: 0001
Revises:
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# the data fields that name a cause, a failure or a question, copied into columns of their own
# at append time (diagevo.catalog.KEY_FIELDS, frozen here)
KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")
MILESTONES = ("promotions.decided", "round.committed", "round.started", "run.started")
# SQLite fills an ephemeral b-tree with an IN list for every inserted row: an OR chain instead
_MILESTONES = {
    "sqlite": " OR ".join(f"type = '{t}'" for t in MILESTONES),
    "postgresql": "type IN (" + ", ".join(f"'{t}'" for t in MILESTONES) + ")",
}

_SQLITE_TRIGGERS = """
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE refused'); END
"""

# ids: non-empty, no control character, at most 512 characters (an event id four times that)
_CONTROL = r"[\x01-\x1f\x7f-\x9f\u2028\u2029]"
# what diagevo writes (datetime.isoformat with microseconds and +00:00), and what Python reads back
_STAMP = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"
)

_PG_TABLES = """
ALTER TABLE events ALTER COLUMN seq SET DEFAULT nextval('events_seq_assigned');
ALTER SEQUENCE events_seq_assigned OWNED BY events.seq;
CREATE TABLE event_types (
    type text PRIMARY KEY,
    kind text NOT NULL,
    fields jsonb NOT NULL,
    required text[] NOT NULL,
    closed boolean NOT NULL,
    version integer NOT NULL DEFAULT 1,
    closed_since integer NOT NULL DEFAULT 1
);
CREATE TABLE events_append_lock ();
REVOKE ALL ON events_append_lock FROM PUBLIC;
-- whom the checks of the data bind: every role but the tables' owner and superusers (who may
-- lift any trigger, so a check of theirs would guard nothing)
CREATE VIEW events_bound AS
    SELECT session_user <> pg_get_userbyid(c.relowner) AND NOT r.rolsuper AS bound
    FROM pg_class c, pg_roles r WHERE c.oid = 'events'::regclass AND r.rolname = session_user
"""

_PG_APPEND_ONLY = """
CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only: % refused', TG_OP USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_append_only();
-- the role that saved a view's state, whatever the row said: a reader trusts its own and the owner's
CREATE FUNCTION views_writer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.writer := current_user;
    RETURN NEW;
END
$$;
CREATE TRIGGER views_writer BEFORE INSERT OR UPDATE ON views FOR EACH ROW EXECUTE FUNCTION views_writer()
"""

# what each type's data must look like is generated from the event classes when the types are
# written (diagevo.log.registry.shape_function, after every upgrade); until then nothing fits
_SHAPE_STUB = """
CREATE FUNCTION events_shape_problem(type text, v integer, d jsonb) RETURNS text LANGUAGE sql IMMUTABLE
PARALLEL SAFE AS $$ SELECT 'the event types are not written yet (the schema''s owner upgrades the database)'::text $$
"""

_STAMP_FUNCTION = r"""
CREATE FUNCTION events_is_timestamp(stamp text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF stamp IS NULL OR stamp !~ '{stamp}' THEN
        RETURN false;
    END IF;
    PERFORM stamp::timestamptz;  -- a date the pattern lets through and the calendar does not (02-30)
    RETURN true;
EXCEPTION WHEN others THEN
    RETURN false;
END
$$;
REVOKE ALL ON FUNCTION events_is_timestamp(text) FROM PUBLIC
"""

# before each INSERT statement: the appenders' lock, then the seqs continue after the highest
_BEGIN = """
CREATE FUNCTION events_begin_insert() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = {schema}, pg_temp AS $$
BEGIN
    LOCK TABLE events_append_lock IN EXCLUSIVE MODE;
    PERFORM setval('events_seq_assigned', COALESCE((SELECT max(seq) FROM events), 0) + 1, false);
    RETURN NULL;
END
$$;
CREATE TRIGGER events_begin_insert BEFORE INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION events_begin_insert();
REVOKE ALL ON FUNCTION events_begin_insert() FROM PUBLIC
"""

# after each INSERT statement, the rows it inserted: seqs handed out by the sequence, every row
# in shape and extending its run's chain, each run opened by its start; or the statement (and its
# transaction) fails
_CHECK = r"""
CREATE FUNCTION events_check_chain() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = {schema}, pg_temp SET jit = off AS $$
DECLARE
    bad record;
    n bigint;
    lo bigint;
    hi bigint;
    last bigint;
    called boolean;
    stamp text;
BEGIN  -- (the queries take no parameter: each is planned once a session, not once a call)
    SELECT count(*), min(seq), max(seq) INTO n, lo, hi FROM inserted;
    IF n = 0 THEN
        RETURN NULL;  -- an INSERT of no rows: a writer taking the append lock
    END IF;
    SELECT last_value, is_called INTO last, called FROM events_seq_assigned;
    IF NOT (called AND hi = last AND hi - lo + 1 = n) THEN
        RAISE EXCEPTION 'diagevo: refused: seq is assigned by the database (leave the column out)'
            USING ERRCODE = 'check_violation';
    END IF;
    FOR stamp IN SELECT DISTINCT recorded_at FROM inserted LOOP  -- one value per append of diagevo's
        IF NOT events_is_timestamp(stamp) THEN
            SELECT i.event_id INTO bad FROM inserted i WHERE i.recorded_at = stamp ORDER BY i.seq LIMIT 1;
            RAISE EXCEPTION 'diagevo: refused event %: its recorded_at is not a timestamp (ISO 8601 with a UTC offset)',
                left(bad.event_id, 80) USING ERRCODE = 'check_violation';
        END IF;
    END LOOP;
    SELECT r.event_id, r.reason INTO bad FROM (
        WITH who AS MATERIALIZED (SELECT bound FROM events_bound),
        -- each run's log before this statement: whether it holds an event already
        base AS MATERIALIZED (
            SELECT f.run_id, EXISTS (SELECT 1 FROM events e WHERE e.run_id = f.run_id AND e.seq < f.first) AS started
            FROM (SELECT run_id, min(seq) AS first FROM inserted GROUP BY run_id) f
        )
        SELECT i.event_id, i.seq, CASE
            WHEN i.run_id = '' OR length(i.run_id) > 512 OR i.run_id ~ '{control}'
                THEN 'the run id is empty, longer than 512 characters or holds a control character'
            WHEN i.event_id = '' OR length(i.event_id) > 2048 OR i.event_id ~ '{control}'
                THEN 'the event id is empty, longer than 2048 characters or holds a control character'
            WHEN i.round < 0 THEN 'its round is negative'
            WHEN i.type !~ '^[a-z_]+(\.[a-z_]+)+$' OR length(i.type) > 64 THEN 'its type is not an event type'
            WHEN wh.bound AND t.type IS NULL THEN 'its type ' || i.type || ' is not an event type this database knows '
                '(the schema''s owner registers the types of a newer diagevo by upgrading the database)'
            WHEN i.schema_version < 1 OR i.schema_version > COALESCE(t.version, 1) THEN 'its schema version '
                || i.schema_version || ' is not a version of ' || i.type || ' this database knows (1 to '
                || COALESCE(t.version, 1) || '; the schema''s owner registers a newer diagevo''s by upgrading the database)'
            WHEN i.texts IS NOT NULL AND json_typeof(i.texts::json) <> 'object' THEN 'its texts are not a JSON object'
            WHEN sp.problem IS NOT NULL THEN sp.problem
            WHEN wh.bound AND (num_nonnulls({key_columns}) > 0 OR j.d ?| ARRAY[{key_names}]) AND ({key_differs})
                THEN 'its key columns are not the ids its data names'
            WHEN wh.bound AND NOT (b.started OR row_number() OVER w > 1)
                    IS DISTINCT FROM (i.type = 'run.started' AND (i.round = 0 OR b.started OR row_number() OVER w > 1))
                THEN 'run ' || left(i.run_id, 80) || ' opens with its one run.started, in round 0'
            WHEN i.prev_hash IS DISTINCT FROM COALESCE(
                    lag(i.hash) OVER w,
                    (SELECT e.hash FROM events e WHERE e.run_id = i.run_id AND e.seq < i.seq ORDER BY e.seq DESC LIMIT 1),
                    repeat('0', 64))
                THEN 'its prev_hash is not the hash of the last event of its run'
            -- the canonical JSON: ids hold no control character (above), so a JSON string of one
            -- escapes only the backslash and the quote; a type holds neither
            WHEN i.hash IS DISTINCT FROM encode(sha256(convert_to(
                    i.prev_hash || '["' || replace(replace(i.event_id, '\', '\\'), '"', '\"')
                    || '","' || replace(replace(i.run_id, '\', '\\'), '"', '\"') || '",' || i.round
                    || ',"' || i.type || '",' || i.schema_version || ',' || i.data || ']', 'UTF8')), 'hex')
                THEN 'its hash is not the sha256 of its prev_hash and canonical JSON'
        END AS reason
        FROM inserted i
        CROSS JOIN who wh
        JOIN base b ON b.run_id = i.run_id
        LEFT JOIN event_types t ON t.type = i.type
        -- a bound role's row: its data parsed once, and what its type's shape says of it
        LEFT JOIN LATERAL (SELECT i.data::jsonb AS d WHERE wh.bound OFFSET 0) j ON true
        LEFT JOIN LATERAL (SELECT events_shape_problem(i.type, i.schema_version, j.d) AS problem WHERE wh.bound) sp ON true
        WINDOW w AS (PARTITION BY i.run_id ORDER BY i.seq)  -- the run's events before this one in the statement
    ) r WHERE r.reason IS NOT NULL ORDER BY r.seq LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'diagevo: refused event %: %', left(bad.event_id, 80), bad.reason
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_check_chain AFTER INSERT ON events REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION events_check_chain();
REVOKE ALL ON FUNCTION events_check_chain() FROM PUBLIC
"""  # noqa: E501


def _keys() -> dict[str, str]:
    """The key columns are the ids their data names: a field's value when it is a string, else
    NULL (as the store fills them)."""
    differs = " OR ".join(
        f"(i.{f} IS DISTINCT FROM j.d ->> '{f}' AND (i.{f} IS NOT NULL OR jsonb_typeof(j.d -> '{f}') = 'string'))"
        for f in KEY_FIELDS
    )
    return {
        "key_columns": ", ".join(f"i.{f}" for f in KEY_FIELDS),
        "key_names": ", ".join(f"'{f}'" for f in KEY_FIELDS),
        "key_differs": differs,
    }


def _tables(dialect: str) -> None:
    seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite: INTEGER PRIMARY KEY is the rowid
    op.create_table(
        "events",
        sa.Column("seq", seq, primary_key=True, autoincrement=False),
        sa.Column("event_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("texts", sa.Text(), nullable=True),  # {field: text} of the texts data names by sha256
        *(sa.Column(f, sa.String(), nullable=True) for f in KEY_FIELDS),
    )
    op.create_index("uq_events_run_event_id", "events", ["run_id", "event_id"], unique=True)
    op.create_index("ix_events_run_seq", "events", ["run_id", "seq"])
    op.create_index("ix_events_run_type_seq", "events", ["run_id", "type", "seq"])
    op.create_index("ix_events_run_round_type", "events", ["run_id", "round", "type"])
    for f in KEY_FIELDS:  # a cause's events in seq order, with their type, from the index alone
        where = sa.text(f"{f} IS NOT NULL")
        columns = ["run_id", f, *(("seq", "type") if f == "cause_id" else ())]
        op.create_index(f"ix_events_{f}", "events", columns, sqlite_where=where, postgresql_where=where)
    milestones = sa.text(_MILESTONES[dialect])
    op.create_index(
        "uq_events_milestones",
        "events",
        ["run_id", "type", "round"],
        unique=True,
        sqlite_where=milestones,
        postgresql_where=milestones,
    )
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


def _postgres() -> None:
    schema = str(op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar_one())
    op.execute("CREATE SEQUENCE events_seq_assigned AS bigint MINVALUE 1")
    op.execute(_PG_TABLES)
    op.execute(_PG_APPEND_ONLY)
    op.execute(_SHAPE_STUB)
    op.execute(_STAMP_FUNCTION.replace("{stamp}", _STAMP))
    op.execute(_BEGIN.format(schema=schema))
    op.execute(_CHECK.format(schema=schema, control=_CONTROL, **_keys()))


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    _tables(dialect)
    if dialect == "postgresql":
        _postgres()
    else:
        for stmt in _SQLITE_TRIGGERS.split(";\n"):
            op.execute(stmt)


def downgrade() -> None:
    """Back to an empty schema: the log goes with it."""
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP VIEW events_bound")
        for table in ("events_append_lock", "event_types"):
            op.execute(f"DROP TABLE {table}")
    op.drop_table("views")  # its trigger goes with it
    op.drop_table("events")  # its indexes, triggers and sequence go with it
    if op.get_context().dialect.name == "postgresql":
        for function in (
            "events_append_only()",
            "views_writer()",
            "events_begin_insert()",
            "events_check_chain()",
            "events_is_timestamp(text)",
            "events_shape_problem(text, integer, jsonb)",
        ):
            op.execute(f"DROP FUNCTION {function}")
