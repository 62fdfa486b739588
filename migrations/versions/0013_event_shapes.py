"""PostgreSQL: the database refuses what readers cannot read, and no reader can stop the writers.

A role that may only INSERT into ``events`` could still write chain-valid rows no reader can use:
a type no diagevo knows, a ``node_id`` that is a list, a ``round.committed`` of round 9 while round
2 is open, ``recorded_at = 'not a date'``. And the appenders' lock was an advisory lock, which any
role may take: a read-only role's ``SELECT pg_advisory_lock(...)`` stopped every append for good.
From this revision:

- ``event_types``: one row per event type, with the shape of its data (each declared field's JSON
  types and choices, the required fields, whether other fields are refused) and its kind. The
  rows come from the catalog of whichever diagevo migrates the database, written after every
  upgrade (:mod:`diagevo.log.registry`): a type added later needs no new migration, only an
  upgrade by the schema's owner. This migration creates the table; it holds no type itself.
- the chain check (0009) also refuses, for any inserting role: a type ``event_types`` does not
  hold; data that lacks a required field, holds a field of another JSON type or choice, or (for a
  closed type) an undeclared field; a key column that is not its data's id; a ``recorded_at`` that
  is not an ISO 8601 timestamp with a UTC offset; and, for every role but the tables' owner (the
  role that migrates, and may repair), a round out of order: the fold's rule, after ``run.started``
  in round 0 every event is in the round after the last committed one or, retrospective, in a
  committed one. diagevo's own writers decide the order under the append lock (the round
  protocol, ingest's invariants); the rule is for raw INSERTs.
- the appenders' lock is ``EXCLUSIVE`` on the table ``events_append_lock`` (no rows), taken by the
  statement trigger of every INSERT into ``events`` as the schema's owner. Only a role that may
  INSERT into ``events`` fires it; a role that may only read can take no more than ``ACCESS
  SHARE`` there, which does not conflict. diagevo's writer takes it with an INSERT of no rows at
  the start of its transaction, under a ``lock_timeout``.

SQLite has no roles (whoever may write the file may drop a trigger): nothing changes there.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# the key columns (0004) and the id rule (0009), frozen here
KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")
_CONTROL = r"[\x01-\x1f\x7f-\x9f\u2028\u2029]"
# what diagevo writes (datetime.isoformat with microseconds and +00:00), and what Python reads back
_STAMP = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"
)

_TABLES = """
CREATE TABLE event_types (
    type text PRIMARY KEY,
    kind text NOT NULL,
    fields jsonb NOT NULL,
    required text[] NOT NULL,
    closed boolean NOT NULL
);
CREATE TABLE events_append_lock ();
REVOKE ALL ON events_append_lock FROM PUBLIC;
-- whom the checks of the data and the round order bind: every role but the tables' owner and
-- superusers (who may lift any trigger, so a check of theirs would guard nothing)
CREATE VIEW events_bound AS
    SELECT session_user <> pg_get_userbyid(c.relowner) AND NOT r.rolsuper AS bound
    FROM pg_class c, pg_roles r WHERE c.oid = 'events'::regclass AND r.rolname = session_user
"""

# what each type's data must look like is generated from the catalog when the types are written
# (diagevo.log.registry.shape_function, after every upgrade); until then nothing fits
_SHAPE_STUB = """
CREATE FUNCTION events_shape_problem(type text, d jsonb) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 'the event types are not written yet (the schema''s owner upgrades the database)'::text $$
"""

_BEGIN = r"""
CREATE OR REPLACE FUNCTION events_begin_insert() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = {schema}, pg_temp AS $$
BEGIN
    LOCK TABLE events_append_lock IN EXCLUSIVE MODE;
    PERFORM setval('events_seq_assigned', COALESCE((SELECT max(seq) FROM events), 0) + 1, false);
    RETURN NULL;
END
$$
"""

_STAMP_FUNCTION = r"""
CREATE FUNCTION events_is_timestamp(stamp text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF stamp IS NULL OR stamp !~ '{stamp}' THEN
        RETURN false;
    END IF;
    PERFORM stamp::timestamptz;
    RETURN true;
EXCEPTION WHEN others THEN
    RETURN false;
END
$$
"""

_CHECK = r"""
CREATE OR REPLACE FUNCTION events_check_chain() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
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
        WITH who AS MATERIALIZED (SELECT bound FROM events_bound)
        SELECT i.event_id, i.seq, CASE
            WHEN i.run_id = '' OR length(i.run_id) > 512 OR i.run_id ~ '{control}'
                THEN 'the run id is empty, longer than 512 characters or holds a control character'
            WHEN i.event_id = '' OR length(i.event_id) > 2048 OR i.event_id ~ '{control}'
                THEN 'the event id is empty, longer than 2048 characters or holds a control character'
            WHEN i.round < 0 THEN 'its round is negative'
            WHEN i.type !~ '^[a-z_]+(\.[a-z_]+)+$' OR length(i.type) > 64 THEN 'its type is not an event type'
            WHEN wh.bound AND t.type IS NULL THEN 'its type ' || i.type || ' is not an event type this database knows '
                '(the schema''s owner registers the types of a newer diagevo by upgrading the database)'
            WHEN i.schema_version <> 1 THEN 'its schema version is not 1'
            WHEN i.texts IS NOT NULL AND json_typeof(i.texts::json) <> 'object' THEN 'its texts are not a JSON object'
            WHEN sp.problem IS NOT NULL THEN sp.problem
            WHEN wh.bound AND (num_nonnulls({key_columns}) > 0 OR j.d ?| ARRAY[{key_names}]) AND ({key_differs})
                THEN 'its key columns are not the ids its data names'
            WHEN i.prev_hash IS DISTINCT FROM COALESCE(
                    lag(i.hash) OVER (PARTITION BY i.run_id ORDER BY i.seq),
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
        LEFT JOIN event_types t ON t.type = i.type
        CROSS JOIN LATERAL (SELECT CASE WHEN wh.bound THEN i.data::jsonb END AS d OFFSET 0) j  -- parsed once
        CROSS JOIN LATERAL (SELECT CASE WHEN wh.bound THEN events_shape_problem(i.type, j.d) END AS problem) sp
    ) r WHERE r.reason IS NOT NULL ORDER BY r.seq LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'diagevo: refused event %: %', left(bad.event_id, 80), bad.reason
            USING ERRCODE = 'check_violation';
    END IF;
    IF (SELECT bound FROM events_bound) THEN  -- the fold's round order
        SELECT r.event_id, r.reason INTO bad FROM (
            WITH base AS MATERIALIZED (  -- each run's log before this statement: started? its last committed round
                SELECT f.run_id,
                    EXISTS (SELECT 1 FROM events e WHERE e.run_id = f.run_id AND e.seq < f.first) AS started,
                    (SELECT max(e.round) FROM events e
                        WHERE e.run_id = f.run_id AND e.type = 'round.committed' AND e.seq < f.first) AS committed
                FROM (SELECT run_id, min(seq) AS first FROM inserted GROUP BY run_id) f
            )
            SELECT i.event_id, i.seq, CASE
                WHEN NOT (b.started OR row_number() OVER w > 1) AND NOT (i.type = 'run.started' AND i.round = 0)
                    THEN 'the first event of run ' || left(i.run_id, 80) || ' must be run.started in round 0'
                WHEN i.type = 'run.started' AND (b.started OR row_number() OVER w > 1)
                    THEN 'run ' || left(i.run_id, 80) || ' has started already'
                WHEN i.type <> 'run.started' AND i.round > {committed} + 1
                    THEN 'its round ' || i.round || ' is not open: round ' || ({committed} + 1)
                        || ' of run ' || left(i.run_id, 80) || ' is the next to commit'
                WHEN i.type <> 'run.started' AND i.round <= {committed} AND t.kind <> 'retrospective'
                    THEN 'its round ' || i.round || ' goes backwards: round ' || {committed}
                        || ' of run ' || left(i.run_id, 80) || ' is committed'
            END AS reason
            FROM inserted i
            JOIN base b ON b.run_id = i.run_id
            LEFT JOIN event_types t ON t.type = i.type
            WINDOW w AS (PARTITION BY i.run_id ORDER BY i.seq)  -- the run's events before this one in the statement
        ) r WHERE r.reason IS NOT NULL ORDER BY r.seq LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'diagevo: refused event %: %', left(bad.event_id, 80), bad.reason
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NULL;
END
$$
"""  # noqa: E501


# the run's last committed round before this event: the log's, or an earlier row's of the statement
_COMMITTED = (
    "GREATEST(COALESCE(b.committed, 0), COALESCE(max(CASE WHEN i.type = 'round.committed' THEN i.round END) "
    "OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))"
)


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


def _schema() -> str:
    return str(op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar_one())


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    schema = _schema()
    op.execute(_TABLES)
    op.execute(_STAMP_FUNCTION.replace("{stamp}", _STAMP))
    op.execute(_BEGIN.format(schema=schema))
    op.execute(_SHAPE_STUB)
    op.execute(_CHECK.format(schema=schema, control=_CONTROL, committed=_COMMITTED, **_keys()))
    op.execute("REVOKE ALL ON FUNCTION events_is_timestamp(text) FROM PUBLIC")


# 0009's two trigger functions, frozen here: what a downgrade puts back
_FUNCTIONS_0009 = r"""
-- before each INSERT statement: the appenders' lock, then the seqs continue after the highest
CREATE OR REPLACE FUNCTION events_begin_insert() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = {schema}, pg_temp AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({lock});
    PERFORM setval('events_seq_assigned', COALESCE((SELECT max(seq) FROM events), 0) + 1, false);
    RETURN NULL;
END
$$;

-- after each INSERT statement, the rows it inserted: seqs handed out by the sequence (the next
-- ones after the highest), and every row in shape and extending its run's chain; or the statement
-- (and its transaction) fails
CREATE OR REPLACE FUNCTION events_check_chain() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = {schema}, pg_temp AS $$
DECLARE
    bad record;
    n bigint;
    lo bigint;
    hi bigint;
    last bigint;
    called boolean;
BEGIN
    SELECT count(*), min(seq), max(seq) INTO n, lo, hi FROM inserted;
    SELECT last_value, is_called INTO last, called FROM events_seq_assigned;
    IF n > 0 AND NOT (called AND hi = last AND hi - lo + 1 = n) THEN
        RAISE EXCEPTION 'diagevo: refused: seq is assigned by the database (leave the column out)'
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT r.event_id, r.reason INTO bad FROM (
        SELECT i.event_id, i.seq, CASE
            WHEN i.run_id = '' OR length(i.run_id) > 512 OR i.run_id ~ '{control}'
                THEN 'the run id is empty, longer than 512 characters or holds a control character'
            WHEN i.event_id = '' OR length(i.event_id) > 2048 OR i.event_id ~ '{control}'
                THEN 'the event id is empty, longer than 2048 characters or holds a control character'
            WHEN i.round < 0 THEN 'its round is negative'
            WHEN i.type !~ '^[a-z_]+(\.[a-z_]+)+$' OR length(i.type) > 64 THEN 'its type is not an event type'
            WHEN i.schema_version <> 1 THEN 'its schema version is not 1'
            WHEN json_typeof(i.data::json) <> 'object' THEN 'its data is not a JSON object'
            WHEN i.texts IS NOT NULL AND json_typeof(i.texts::json) <> 'object' THEN 'its texts are not a JSON object'
            WHEN i.prev_hash IS DISTINCT FROM COALESCE(
                    lag(i.hash) OVER (PARTITION BY i.run_id ORDER BY i.seq),
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
    ) r WHERE r.reason IS NOT NULL ORDER BY r.seq LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'diagevo: refused event %: %', left(bad.event_id, 80), bad.reason
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;
"""  # noqa: E501
_APPEND_LOCK_KEY = int.from_bytes(b"diagevo1", "big")  # 0009's advisory lock


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute(_FUNCTIONS_0009.format(schema=_schema(), lock=_APPEND_LOCK_KEY, control=_CONTROL))
    op.execute("DROP FUNCTION events_is_timestamp(text)")
    op.execute("DROP FUNCTION events_shape_problem(text, jsonb)")
    op.execute("DROP VIEW events_bound")
    op.execute("DROP TABLE events_append_lock")
    op.execute("DROP TABLE event_types")
