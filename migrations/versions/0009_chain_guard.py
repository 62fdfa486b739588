"""The database guards the log's shape against any INSERT, not only diagevo's own.

A role that may only INSERT into ``events`` (the least-privilege trainer role) used to choose
every column itself: a ``seq`` of 2**63-1 made every later append fail, a made-up ``prev_hash``
made the run unverifiable for good. From this revision:

- both backends: at most one ``run.started`` per run and one ``round.started``,
  ``promotions.decided`` and ``round.committed`` per round (a unique partial index on the
  milestones), so no race and no raw INSERT can commit a round twice;
- PostgreSQL: a ``BEFORE INSERT`` trigger, owned by the schema's owner (``SECURITY DEFINER``),
  takes the appenders' advisory lock (so ``seq`` order is commit order for every inserter),
  assigns ``seq`` itself (the run's log continues at the table's highest seq + 1, whatever the
  row said), and refuses a row whose ``prev_hash`` is not its run's last hash, whose ``hash`` is
  not the sha256 of ``prev_hash`` and the canonical event, whose ids, round, type, data, key
  columns, texts or ``recorded_at`` are out of shape. The hash is recomputed in SQL from the
  stored columns exactly as :func:`diagevo.events.recorder.canonical_event_json` builds it
  (``to_json(text)`` escapes as Python's ``json`` does: the same seven escapes, ``\\u00XX`` in
  lower case for the other controls, everything else kept).

SQLite has no roles (whoever may write the file may also drop a trigger), so only the milestone
index applies there.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_LOCK_KEY = int.from_bytes(b"diagevo1", "big")  # diagevo.events.sql.APPEND_LOCK_KEY, frozen here
MILESTONES = ("run.started", "round.started", "promotions.decided", "round.committed")
_IN = ", ".join(f"'{t}'" for t in MILESTONES)

_MILESTONE_INDEX = f"CREATE UNIQUE INDEX uq_events_milestones ON events (run_id, type, round) WHERE type IN ({_IN})"

# ids: as diagevo.parsing.check_id (non-empty, no control character, at most 512 characters;
# an event id four times that)
_CONTROL = r"[\x01-\x1f\x7f-\x9f\u2028\u2029]"

_FUNCTIONS = r"""
CREATE SEQUENCE events_seq_assigned AS bigint MINVALUE 1 OWNED BY events.seq;
ALTER TABLE events ALTER COLUMN seq SET DEFAULT nextval('events_seq_assigned');

-- before each INSERT statement: the appenders' lock, then the seqs continue after the highest
CREATE FUNCTION events_begin_insert() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
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
CREATE FUNCTION events_check_chain() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
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

CREATE TRIGGER events_begin_insert BEFORE INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION events_begin_insert();
CREATE TRIGGER events_check_chain AFTER INSERT ON events REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION events_check_chain();
REVOKE ALL ON FUNCTION events_begin_insert(), events_check_chain() FROM PUBLIC
"""  # noqa: E501


def _duplicate_milestones() -> list[tuple[str, str, int]]:
    rows = op.get_bind().exec_driver_sql(
        f"SELECT run_id, type, round FROM events WHERE type IN ({_IN}) GROUP BY run_id, type, round HAVING count(*) > 1"
    )
    return [(r[0], r[1], int(r[2])) for r in rows]


def upgrade() -> None:
    dups = _duplicate_milestones()
    if dups:
        run, typ, rnd = dups[0]
        raise RuntimeError(
            f"cannot upgrade: run {run!r} holds {typ} of round {rnd} more than once ({len(dups)} such milestone(s)); "
            "such a log breaks the round protocol: export the runs you keep into a new database"
        )
    op.execute(_MILESTONE_INDEX)
    if op.get_context().dialect.name != "postgresql":
        return
    schema = op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar_one()
    op.execute(_FUNCTIONS.format(schema=schema, lock=APPEND_LOCK_KEY, control=_CONTROL))


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        for trigger in ("events_begin_insert", "events_check_chain"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON events")
            op.execute(f"DROP FUNCTION IF EXISTS {trigger}()")
        op.execute("ALTER TABLE events ALTER COLUMN seq DROP DEFAULT")
        op.execute("DROP SEQUENCE IF EXISTS events_seq_assigned")
    op.execute("DROP INDEX uq_events_milestones")
