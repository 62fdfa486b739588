"""PostgreSQL: a role that may only INSERT into ``events`` cannot write a memory change the fold
refuses, nor a ``run.forked`` anywhere but at the opening of a run a fork or what-if creates.

0013 checks each row's shape and round. A row of the right shape in the open round could still
brick every reader of its run (``memory show``, ``report``, ``train --resume`` fold the log and
stop at the first event the fold refuses), or turn a normal run into "a what-if of itself" that
no round may continue. From this revision a second statement trigger, ``events_check_rules``
(after 0013's ``events_check_chain``), refuses for every role the 0013 view ``events_bound``
binds (all but the tables' owner and superusers), with the words the fold, ingest and ``memory
verify`` use for the same event (:mod:`diagevo.memory.fold`, :mod:`diagevo.memory.counting`,
:func:`diagevo.interchange.check_invariants`):

- an attribution, promotion or reactivation of a cause the run never created (``unknown cause``);
  a ``cause.created`` of a cause the run holds; an attribution to, or a promotion of, a Mastered
  cause; a reactivation of an Active one. A cause's state is the type of its run's last
  ``cause.created``/``cause.promoted``/``cause.reactivated`` before the row (the log's or the
  statement's), found by a partial index of those three types on ``(run_id, cause_id, seq)``
  (a cause's attributions, its many events, are not in it);
- a ``run.forked`` that does not follow the commit of its round (rule "run forked at its
  opening"), of a run this statement does not start, naming itself or a source commit this
  database does not hold with that hash (a source the same statement starts is left to verify,
  as ingest leaves a source in the same file).

The owner is not bound: diagevo's own writers decide every event under the append lock by the
same rules in Python (the round protocol, ingest), and the owner may repair. The JSON types of
the ``round.committed`` fields readers use are part of that type's shape (0013's registry), not
of this trigger.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHANGES = "('cause.created', 'cause.promoted', 'cause.reactivated')"  # what sets a cause's state

_RULES = r"""
CREATE FUNCTION events_check_rules() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = {schema}, pg_temp SET jit = off AS $$
DECLARE
    bad record;
BEGIN
    IF NOT (SELECT bound FROM events_bound) THEN
        RETURN NULL;
    END IF;
    SELECT r.event_id, r.reason INTO bad FROM (
        SELECT i.event_id, i.seq, CASE
            WHEN i.type IN ('failure.attributed', 'cause.promoted', 'cause.reactivated') AND st.type IS NULL
                THEN 'unknown cause ' || quote_literal(i.cause_id)
            WHEN i.type = 'cause.created' AND st.type IS NOT NULL
                THEN 'cause ' || quote_literal(i.cause_id) || ' created twice'
            WHEN i.type = 'failure.attributed' AND st.type = 'cause.promoted'
                THEN 'failure ' || i.failure_id || ' attributed to Mastered cause ' || i.cause_id
                    || ' without cause.reactivated'
            WHEN i.type = 'cause.promoted' AND st.type = 'cause.promoted'
                THEN 'cause ' || i.cause_id || ' promoted but it is not Active'
            WHEN i.type = 'cause.reactivated' AND st.type <> 'cause.promoted'
                THEN 'cause ' || i.cause_id || ' reactivated but it is not Mastered'
            WHEN i.type = 'run.forked' THEN 'run forked at its opening: ' || CASE
                WHEN pv.type IS NULL OR pv.round <> i.round OR pv.type NOT IN ('round.committed', 'run.forked')
                        OR fk.d -> 'source_round' IS DISTINCT FROM to_jsonb(i.round)
                    THEN 'run.forked (source round ' || COALESCE(fk.d ->> 'source_round', 'None')
                        || ') does not follow the commit of round ' || i.round
                        || ': only a fork or a what-if writes it, right after the rounds it copies'
                WHEN NOT EXISTS (SELECT 1 FROM inserted s WHERE s.run_id = i.run_id AND s.type = 'run.started')
                    THEN 'run ' || quote_literal(i.run_id) || ' is in the database already: '
                        || 'run.forked only opens a run a fork or what-if creates'
                WHEN fk.d ->> 'source_run' = i.run_id
                    THEN 'run ' || quote_literal(i.run_id) || ' names itself as its source'
                WHEN EXISTS (SELECT 1 FROM inserted s WHERE s.run_id = fk.d ->> 'source_run' AND s.type = 'run.started')
                    THEN NULL  -- a source started by the same statement: verify checks it, as ingest does
                WHEN NOT EXISTS (SELECT 1 FROM events e WHERE e.run_id = fk.d ->> 'source_run')
                    THEN 'its source run ' || quote_literal(fk.d ->> 'source_run')
                        || ' is not in this database (ingest the source first)'
                WHEN src.type IS DISTINCT FROM 'round.committed' OR to_jsonb(src.round) <> fk.d -> 'source_round'
                    THEN 'seq ' || (fk.d ->> 'source_seq') || ' of run ' || quote_literal(fk.d ->> 'source_run')
                        || ' is not the commit of round ' || (fk.d ->> 'source_round')
                WHEN src.hash IS DISTINCT FROM fk.d ->> 'source_hash'
                    THEN 'the commit of round ' || (fk.d ->> 'source_round') || ' of run '
                        || quote_literal(fk.d ->> 'source_run') || ' has another hash than the one it names'
                END
        END AS reason
        FROM inserted i
        -- the cause's last change before this row: its state (none: the run never created it)
        LEFT JOIN LATERAL (
            SELECT e.type FROM events e
            WHERE (i.type = 'failure.attributed' OR i.type IN {changes}) AND e.run_id = i.run_id
                AND e.cause_id = i.cause_id AND e.cause_id IS NOT NULL AND e.seq < i.seq AND e.type IN {changes}
            ORDER BY e.seq DESC LIMIT 1
        ) st ON true
        -- a run.forked: its data, the run's event before it, and the source event it names
        LEFT JOIN LATERAL (SELECT i.data::jsonb AS d WHERE i.type = 'run.forked') fk ON true
        LEFT JOIN LATERAL (
            SELECT e.type, e.round FROM events e
            WHERE i.type = 'run.forked' AND e.run_id = i.run_id AND e.seq < i.seq ORDER BY e.seq DESC LIMIT 1
        ) pv ON true
        LEFT JOIN LATERAL (
            SELECT e.type, e.round, e.hash FROM events e
            WHERE i.type = 'run.forked' AND jsonb_typeof(fk.d -> 'source_seq') = 'number'
                AND (fk.d ->> 'source_seq')::numeric BETWEEN 1 AND 9223372036854775807
                AND e.seq = (fk.d ->> 'source_seq')::numeric::bigint AND e.run_id = fk.d ->> 'source_run'
        ) src ON true
    ) r WHERE r.reason IS NOT NULL ORDER BY r.seq LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'diagevo: refused event %: %', left(bad.event_id, 80), bad.reason
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;


CREATE TRIGGER events_check_rules AFTER INSERT ON events REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION events_check_rules();
REVOKE ALL ON FUNCTION events_check_rules() FROM PUBLIC
"""  # noqa: E501


def _schema() -> str:
    return str(op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar_one())


def upgrade() -> None:
    # a cause's changes alone (a few per cause; its attributions are many): its state is one lookup
    changes = sa.text(f"type IN {_CHANGES}")
    columns = ["run_id", "cause_id", "seq"]
    op.create_index("ix_events_cause_changes", "events", columns, sqlite_where=changes, postgresql_where=changes)
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute(_RULES.replace("{schema}", _schema()).replace("{changes}", _CHANGES))


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP TRIGGER events_check_rules ON events")
        op.execute("DROP FUNCTION events_check_rules()")
    op.drop_index("ix_events_cause_changes", "events")
