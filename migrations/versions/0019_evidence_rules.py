"""PostgreSQL: a role that may only INSERT into ``events`` cannot write evidence the counting rules
refuse.

0013, 0014 and 0016 restate the fold's rules; the hostile-log property run as the trainer against
PostgreSQL (``tests/test_hostile_logs_pg.py``) found evidence ``memory verify`` names that the
database took: a question scored but never generated, a failure of a question its round did not
retain, a failure diagnosed twice, a round's decision naming a cause it did not promote, a free
question naming a cause. From this revision a fourth statement trigger, ``events_check_evidence``
(after 0016's), refuses for every role the 0013 view ``events_bound`` binds, in the words of the
counting rules (:mod:`diagevo.memory.counting`) and of the event classes:

- a ``question.generated`` whose causes do not fit its mode (free: none; targeted: an active
  one; stitched: both), or of a question generated before; a ``question.scored`` of a question
  scored before, or not generated in its round;
- a ``failure.recorded`` of a failure recorded before, or (in a round started) of a question its
  round has not retained;
- a diagnosis of a failure diagnosed in another round, a second ``failure.diagnosed`` of one,
  and a ``failure.diagnosed`` matching a cause the run never created;
- a ``cause.promoted`` after its round's ``promotions.decided``, and a ``promotions.decided``
  whose ``promoted`` are not the causes its round promoted;
- a ``round.committed`` whose ``timing`` holds a phase's seconds as no number.

Each lookup is one index probe of the key columns (0004) or of the milestones (0009).
What the rules read beyond one run's log (Eq. 5-6 on the round's votes and the config's θ_up) is
left to ``memory verify``.

SQLite has no roles (whoever may write the file may drop a trigger): nothing changes there.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_EVIDENCE = r"""
CREATE FUNCTION events_check_evidence() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = {schema}, pg_temp SET jit = off AS $$
DECLARE
    bad record;
BEGIN
    IF NOT (SELECT bound FROM events_bound) THEN
        RETURN NULL;
    END IF;
    SELECT r.event_id, r.reason INTO bad FROM (
        SELECT i.event_id, i.seq, CASE
            WHEN i.type = 'question.generated'
                    AND (COALESCE(jsonb_typeof(j.d -> 'active_cause'), 'null') <> 'null',
                        COALESCE(jsonb_typeof(j.d -> 'mastered_cause'), 'null') <> 'null')
                    IS DISTINCT FROM (j.d ->> 'mode' <> 'free', j.d ->> 'mode' = 'stitched')
                THEN 'its data.mode ' || quote_literal(j.d ->> 'mode') || ' does not fit active_cause/mastered_cause'
            WHEN i.type IN ('question.generated', 'question.scored') AND same.round IS NOT NULL
                THEN 'question ' || quote_literal(i.question_id) || ' is ' || split_part(i.type, '.', 2)
                    || ' in round ' || same.round || ' already'
            WHEN i.type = 'question.scored' AND i.question_id IS NOT NULL AND gen.round IS DISTINCT FROM i.round
                THEN 'question ' || quote_literal(i.question_id) || ' is scored in round ' || i.round || ' but '
                    || COALESCE('generated in round ' || gen.round, 'never generated')
            WHEN i.type = 'failure.recorded' AND same.round IS NOT NULL
                THEN 'failure ' || quote_literal(i.failure_id) || ' is recorded in round ' || same.round || ' already'
            WHEN i.type = 'failure.recorded' AND i.failure_id IS NOT NULL AND started.yes
                    AND kept.round IS DISTINCT FROM i.round
                THEN 'failure ' || quote_literal(i.failure_id) || ' names question '
                    || quote_literal(left(j.d ->> 'question_id', 80)) || ', not a retained question of round ' || i.round
            WHEN i.type IN ('failure.diagnosed', 'diagnosis.failed') AND diag.round <> i.round
                THEN 'failure ' || quote_literal(i.failure_id) || ' is diagnosed in round ' || diag.round || ' already'
            WHEN i.type = 'failure.diagnosed' AND same.round IS NOT NULL
                THEN 'failure ' || quote_literal(i.failure_id) || ' is diagnosed twice in round ' || i.round
            WHEN i.type = 'failure.diagnosed' AND i.matched_cause IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM events e WHERE e.run_id = i.run_id AND e.cause_id = i.matched_cause
                        AND e.type = 'cause.created' AND e.seq < i.seq)
                THEN 'failure ' || quote_literal(i.failure_id) || ' is diagnosed as cause '
                    || quote_literal(i.matched_cause) || ', which the memory does not hold'
            WHEN i.type = 'cause.promoted' AND EXISTS (
                    SELECT 1 FROM events e WHERE e.run_id = i.run_id AND e.type = 'promotions.decided'
                        AND e.round = i.round AND e.seq < i.seq)
                THEN 'cause ' || quote_literal(i.cause_id) || ' promoted after round ' || i.round || '''s decision'
            WHEN i.type = 'promotions.decided' AND jsonb_typeof(j.d -> 'promoted') = 'array'
                    AND ARRAY(SELECT DISTINCT x FROM jsonb_array_elements_text(j.d -> 'promoted') x ORDER BY 1)
                    IS DISTINCT FROM ARRAY(SELECT DISTINCT e.cause_id::text FROM events e WHERE e.run_id = i.run_id
                        AND e.type = 'cause.promoted' AND e.round = i.round AND e.seq < i.seq ORDER BY 1)
                THEN 'round ' || i.round || '''s decision does not name the causes the round promoted'
            WHEN i.type = 'round.committed' AND jsonb_typeof(j.d -> 'timing') = 'object'
                    AND jsonb_path_exists(j.d -> 'timing', '$.* ? (@.type() != "number")')
                THEN 'round ' || i.round || '''s commit holds a phase''s timing as no number of seconds'
        END AS reason
        FROM inserted i
        CROSS JOIN LATERAL (SELECT i.data::jsonb AS d OFFSET 0) j  -- parsed once
        -- the first earlier event of the same type naming the same question or failure
        LEFT JOIN LATERAL (
            SELECT e.round FROM events e
            WHERE i.type IN ('question.generated', 'question.scored', 'failure.recorded', 'failure.diagnosed')
                AND e.run_id = i.run_id AND e.type = i.type AND e.seq < i.seq
                AND CASE WHEN i.type LIKE 'question.%' THEN e.question_id = i.question_id
                    ELSE e.failure_id = i.failure_id END
            ORDER BY e.seq LIMIT 1
        ) same ON true
        -- a scored question's first generation; a failure's question's first retaining score
        LEFT JOIN LATERAL (
            SELECT e.round FROM events e
            WHERE i.type = 'question.scored' AND e.run_id = i.run_id AND e.question_id = i.question_id
                AND e.type = 'question.generated' AND e.seq < i.seq
            ORDER BY e.seq LIMIT 1
        ) gen ON true
        LEFT JOIN LATERAL (
            SELECT e.round FROM events e
            WHERE i.type = 'failure.recorded' AND e.run_id = i.run_id AND e.question_id = j.d ->> 'question_id'
                AND e.type = 'question.scored' AND e.data::jsonb -> 'retained' = 'true'::jsonb AND e.seq < i.seq
            ORDER BY e.seq LIMIT 1
        ) kept ON true
        CROSS JOIN LATERAL (
            SELECT i.type = 'failure.recorded' AND EXISTS (SELECT 1 FROM events e WHERE e.run_id = i.run_id
                AND e.type = 'round.started' AND e.round = i.round AND e.seq < i.seq) AS yes
        ) started
        -- a failure's first diagnosis (or failed one)
        LEFT JOIN LATERAL (
            SELECT e.round FROM events e
            WHERE i.type IN ('failure.diagnosed', 'diagnosis.failed') AND e.run_id = i.run_id
                AND e.failure_id = i.failure_id AND e.type IN ('failure.diagnosed', 'diagnosis.failed')
                AND e.seq < i.seq
            ORDER BY e.seq LIMIT 1
        ) diag ON true
    ) r WHERE r.reason IS NOT NULL ORDER BY r.seq LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'diagevo: refused event %: %', left(bad.event_id, 80), bad.reason
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;


CREATE TRIGGER events_check_evidence AFTER INSERT ON events REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION events_check_evidence();
REVOKE ALL ON FUNCTION events_check_evidence() FROM PUBLIC
"""  # noqa: E501


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    schema = op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar_one()
    op.execute(_EVIDENCE.replace("{schema}", str(schema)))


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER events_check_evidence ON events")
    op.execute("DROP FUNCTION events_check_evidence()")
