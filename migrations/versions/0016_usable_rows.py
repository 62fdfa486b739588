"""PostgreSQL: a role that may only INSERT into ``events`` cannot write a row its readers cannot
read or fold: a node the fold does not hold, a config no reader can use, JSON past the readers'
bounds, a checkpoint whose name is not its event's.

0013 checks each row's shape and round, 0014 the causes' changes and ``run.forked``. A row of the
right shape could still stop every reader of its run (``memory show``, ``report``, ``train
--resume`` fold the log and stop at the first event the fold refuses) or every reader of the
database (``diagevo runs`` reads each run's newest event). From this revision a third statement
trigger, ``events_check_usable`` (after 0014's ``events_check_rules``), refuses for every role the
0013 view ``events_bound`` binds (all but the tables' owner and superusers), with the fold's and
ingest's words where they have some (:mod:`diagevo.memory.fold`):

- a ``node.created`` of a node the run holds (``node 'N1' created twice``); a ``nodes.merged``
  of a node the run does not hold (``unknown node``) or of a node with itself; a
  ``cause.created`` under a node the run does not hold. A node is held when its last
  ``node.created``/``nodes.merged`` (as the absorbed one) before the row is its creation: one
  lookup in ``ix_events_node_changes``, an index of those two types by the node they change
  (an expression over the data, PostgreSQL's alone), so an append does not read every node;
- a ``run.started`` or ``run.configured`` whose config a reader cannot use:
  ``events_config_problem(config)``, generated from the config's schema by whoever upgrades the
  database (:func:`diagevo.log.registry.config_function`), as the types' shapes are; until then
  this revision's stub refuses every config;
- data nested deeper than 64 levels (ingest's bound, :data:`diagevo.parsing.MAX_DEPTH`) or
  holding a number beyond a double's range (what no reader parses: ingest refuses it too);
- a ``checkpoint.written`` whose path does not name ``round{round:03d}-{phase}`` of its own round
  and phase (:func:`diagevo.confined.checkpoint_name`); a ``checkpoint.pruned`` of a path no
  earlier ``checkpoint.written`` of its run names, or of the latest written of that phase.

SQLite has no roles (whoever may write the file may drop a trigger): nothing changes there;
``memory verify`` names such rows on every backend.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# what a reader parses (diagevo.parsing.MAX_DEPTH; a double's range), frozen here
_DEPTH = 64
_LARGEST = "1.7976931348623157e308"

_CONFIG_STUB = """
CREATE FUNCTION events_config_problem(c jsonb) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 'the config check is not written yet (the schema''s owner upgrades the database)'::text $$
"""

_USABLE = r"""
CREATE FUNCTION events_check_usable() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = {schema}, pg_temp SET jit = off AS $$
DECLARE
    bad record;
BEGIN
    IF NOT (SELECT bound FROM events_bound) THEN
        RETURN NULL;
    END IF;
    SELECT r.event_id, r.reason INTO bad FROM (
        SELECT i.event_id, i.seq, CASE
            -- what a reader parses: the bracket count first, the walk only where it could nest so deep
            WHEN length(i.data) - length(translate(i.data, '[{{', '')) > {depth}
                    AND jsonb_path_exists(j.d, 'strict $.**{{{depth}}} ? (@.type() == "array" || @.type() == "object")')
                THEN 'its data is JSON nested deeper than {depth} levels'
            WHEN i.data ~ '[0-9]{{250}}|[eE]\+?[0-9]{{3}}' AND jsonb_path_exists(j.d,
                    'strict $.** ? (@.type() == "number" && (@ > {largest} || @ < -{largest}))')
                THEN 'its data holds a number beyond a double''s range'
            WHEN i.type = 'node.created' AND n1.type = 'node.created'
                THEN 'node ' || quote_literal(j.d ->> 'node_id') || ' created twice'
            WHEN i.type = 'cause.created' AND n1.type IS DISTINCT FROM 'node.created'
                THEN 'unknown node ' || quote_literal(j.d ->> 'node_id')
            WHEN i.type = 'nodes.merged' AND n1.type IS DISTINCT FROM 'node.created'
                THEN 'unknown node ' || quote_literal(j.d ->> 'survivor')
            WHEN i.type = 'nodes.merged' AND n2.type IS DISTINCT FROM 'node.created'
                THEN 'unknown node ' || quote_literal(j.d ->> 'absorbed')
            WHEN i.type = 'nodes.merged' AND j.d ->> 'survivor' = j.d ->> 'absorbed'
                THEN 'node ' || (j.d ->> 'survivor') || ' merged with itself'
            WHEN i.type IN ('run.started', 'run.configured') AND events_config_problem(j.d -> 'config') IS NOT NULL
                THEN i.type || '''s config cannot be used: ' || events_config_problem(j.d -> 'config')
            WHEN i.type = 'checkpoint.written' AND ck.want IS NULL
                THEN 'its data.phase is not a text (its checkpoint is round{{its round:03d}}-{{its phase}})'
            WHEN i.type = 'checkpoint.written' AND ck.name IS DISTINCT FROM ck.want
                THEN 'its path names ' || COALESCE('checkpoint ' || left(ck.name, 80), 'no checkpoint')
                    || ', not ' || ck.want || ' (round{{its round:03d}}-{{its phase}})'
            WHEN i.type = 'checkpoint.pruned' AND w.d IS NULL
                THEN 'it prunes ' || quote_literal(left(j.d ->> 'path', 80))
                    || ', which no checkpoint.written of its run before it names'
            WHEN i.type = 'checkpoint.pruned' AND lw.path = j.d ->> 'path'
                THEN 'it prunes ' || quote_literal(left(j.d ->> 'path', 80))
                    || ', the latest checkpoint written of phase ' || quote_literal(left(w.d ->> 'phase', 40))
        END AS reason
        FROM inserted i
        CROSS JOIN LATERAL (SELECT i.data::jsonb AS d OFFSET 0) j  -- parsed once
        -- a node's last creation or absorption before this row (held when it is a creation): one
        -- lookup in the index of the nodes' changes
        LEFT JOIN LATERAL (
            SELECT e.type FROM events e
            WHERE i.type IN ('node.created', 'cause.created', 'nodes.merged') AND e.run_id = i.run_id
                AND e.type IN {nodes} AND {node_key} = j.d ->> CASE i.type WHEN 'nodes.merged' THEN 'survivor' ELSE 'node_id' END
                AND e.seq < i.seq
            ORDER BY e.seq DESC LIMIT 1
        ) n1 ON true
        LEFT JOIN LATERAL (
            SELECT e.type FROM events e
            WHERE i.type = 'nodes.merged' AND e.run_id = i.run_id
                AND e.type IN {nodes} AND {node_key} = j.d ->> 'absorbed' AND e.seq < i.seq
            ORDER BY e.seq DESC LIMIT 1
        ) n2 ON true
        -- a checkpoint.written: the name its path gives (a name, or an older log's absolute path's
        -- last part), and the one its round and phase give (none without a phase)
        LEFT JOIN LATERAL (
            SELECT CASE
                    WHEN p ~ '^round[0-9]{{3,9}}-[a-z][a-z0-9_]{{0,39}}$' THEN p
                    WHEN p ~ '^/(?:[^\\]*/)?round[0-9]{{3,9}}-[a-z][a-z0-9_]{{0,39}}/*$'
                        THEN substring(p from '(round[0-9]{{3,9}}-[a-z][a-z0-9_]{{0,39}})/*$')
                END AS name,
                CASE WHEN jsonb_typeof(j.d -> 'phase') = 'string' THEN 'round'
                    || lpad(i.round::text, greatest(3, length(i.round::text)), '0') || '-' || (j.d ->> 'phase') END
                    AS want
            FROM (SELECT j.d ->> 'path' AS p) x
            WHERE i.type = 'checkpoint.written'
        ) ck ON true
        -- a checkpoint.pruned: the last checkpoint.written of its run naming its path, and the
        -- latest written of that one's phase, both before it
        LEFT JOIN LATERAL (
            SELECT e.data::jsonb AS d FROM events e
            WHERE i.type = 'checkpoint.pruned' AND e.run_id = i.run_id AND e.type = 'checkpoint.written'
                AND e.seq < i.seq AND e.data::json ->> 'path' = j.d ->> 'path'
            ORDER BY e.seq DESC LIMIT 1
        ) w ON true
        LEFT JOIN LATERAL (
            SELECT e.data::json ->> 'path' AS path FROM events e
            WHERE w.d IS NOT NULL AND e.run_id = i.run_id AND e.type = 'checkpoint.written'
                AND e.seq < i.seq AND e.data::json ->> 'phase' = w.d ->> 'phase'
            ORDER BY e.seq DESC LIMIT 1
        ) lw ON true
    ) r WHERE r.reason IS NOT NULL ORDER BY r.seq LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'diagevo: refused event %: %', left(bad.event_id, 80), bad.reason
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;


CREATE TRIGGER events_check_usable AFTER INSERT ON events REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION events_check_usable();
REVOKE ALL ON FUNCTION events_check_usable() FROM PUBLIC
"""  # noqa: E501


# a node's changes (its creation, its absorption by a merge), by the node they change
_NODES = "('node.created', 'nodes.merged')"
_NODE_KEY = (
    "(CASE WHEN {e}type = 'node.created' THEN {e}data::jsonb ->> 'node_id' ELSE {e}data::jsonb ->> 'absorbed' END)"
)
_NODE_INDEX = (
    f"CREATE INDEX ix_events_node_changes ON events (run_id, {_NODE_KEY.format(e='')}, seq) WHERE type IN {_NODES}"
)


def _schema() -> str:
    return str(op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar_one())


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute(_NODE_INDEX)
    op.execute(_CONFIG_STUB)
    op.execute(
        _USABLE.format(
            schema=_schema(), depth=_DEPTH, largest=_LARGEST, nodes=_NODES, node_key=_NODE_KEY.format(e="e.")
        )
    )


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER events_check_usable ON events")
    op.execute("DROP FUNCTION events_check_usable()")
    op.execute("DROP FUNCTION events_config_problem(jsonb)")
    op.execute("DROP INDEX ix_events_node_changes")
