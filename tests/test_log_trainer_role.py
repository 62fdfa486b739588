"""The least-privilege trainer role on PostgreSQL cannot break the log for anyone.

An owner role owns the schema and migrates it; a trainer role gets the documented grants
(:data:`TRAINER_GRANTS`: read everything, INSERT into ``events``, nothing else). Every attack a
trainer can write as plain SQL is refused by the database, and after each one the log still
verifies and the trainer still appends through diagevo. A cache the trainer manages to write
(an administrator granted it more than documented) is never read by the owner."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from diagevo.log import ViewState, open_log
from diagevo.log.chain import Pending, chain
from diagevo.views.admission import admission
from diagevo.views.caches import refresh
from diagevo.views.memory import load_memory
from diagevo.views.verify import verify_run
from tests.conftest import PostgresBackend
from tests.logs import Log, wire_event

pytestmark = pytest.mark.postgres

TRAINER_GRANTS = (
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}",
    "GRANT INSERT ON events TO {role}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
)


@dataclass
class Roles:
    owner_url: str
    trainer_url: str
    trainer: Engine  # raw SQL as the trainer
    admin: Engine
    schema: str
    trainer_role: str


@pytest.fixture
def roles(postgres_backend: PostgresBackend) -> Iterator[Roles]:
    admin_url = postgres_backend.fresh_url()
    schema = make_url(admin_url).query["options"].split("=", 1)[1]
    tag = uuid.uuid4().hex[:8]
    owner, trainer = f"owner_{tag}", f"trainer_{tag}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {owner} LOGIN"))
        conn.execute(text(f"CREATE ROLE {trainer} LOGIN"))
        conn.execute(text(f"ALTER SCHEMA {schema} OWNER TO {owner}"))
    owner_url = make_url(admin_url).set(username=owner).render_as_string(hide_password=False)
    trainer_url = make_url(admin_url).set(username=trainer).render_as_string(hide_password=False)
    with open_log(owner_url) as log:  # the owner migrates, then grants
        log.append(Log("base").node("N1").cause("C1", "N1").question("q1", 0.5, active="C1").commit().events())
        refresh(log, "base")
    as_owner = create_engine(owner_url, isolation_level="AUTOCOMMIT")
    with as_owner.connect() as conn:
        for stmt in TRAINER_GRANTS:
            conn.execute(text(stmt.format(schema=schema, role=trainer)))
    as_owner.dispose()
    raw = create_engine(trainer_url, isolation_level="AUTOCOMMIT")
    try:
        yield Roles(owner_url, trainer_url, raw, admin, schema, trainer)
    finally:
        raw.dispose()
        with admin.connect() as conn:
            for r in (trainer, owner):
                conn.execute(text(f"DROP OWNED BY {r} CASCADE"))
                conn.execute(text(f"DROP ROLE {r}"))
        admin.dispose()


def next_row(url: str, run: str, type_: str, rnd: int, eid: str, **data: Any) -> dict[str, Any]:
    """The row diagevo would insert next for this event: its right prev_hash and hash."""
    with open_log(url) as log:
        head = log.head(run)
    rows = list(chain(Pending([wire_event(type_, run, rnd, eid, **data)]), {run: head}, head[0]))
    keys = (
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
        "texts",
    )
    return dict(zip(keys, rows[0][:11], strict=True))


def insert(engine: Engine, row: dict[str, Any]) -> None:
    cols = ", ".join(row)
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO events ({cols}) VALUES ({', '.join(':' + c for c in row)})"), row)


def refused_or_passed_over(roles: Roles, row: dict[str, Any], run: str = "base") -> str:
    """The trainer's raw INSERT of ``row``: refused by the database, or taken, named by ``memory
    verify`` by its seq and passed over by the readers of the memory, which do not stop on it
    (issue 73: the database keeps the log whole, the Python rules decide). The reason either way,
    in one line: the database's, or the fold's (verify's, for a row the fold does not read)."""
    try:
        insert(roles.trainer, row)
    except Exception as exc:  # noqa: BLE001 - the database's refusal, whatever the driver's class
        first = str(getattr(exc, "orig", exc)).splitlines()[0]
        assert f"diagevo: refused event {row['event_id'][:80]}: " in first, first
        return first.split(f"refused event {row['event_id'][:80]}: ", 1)[1]
    with open_log(roles.owner_url, create=False) as log:
        seq = log.last_seq(run)
        load_memory(log, run)  # a reader of the memory: it passes the row over, or reads it
        named = [p for p in verify_run(log, run) if p.startswith(f"seq {seq}: ") or f": seq {seq}: " in p]
        why = next((r.why for r in admission(log, run).refusals if r.seq == seq), None)
    assert named, f"seq {seq} went in, and memory verify names nothing of it"
    return why if why is not None else re.sub(r"^(invariant: )?seq \d+: ", "", named[0])


def still_whole(roles: Roles) -> None:
    """The log verifies, and the trainer still appends through diagevo."""
    with open_log(roles.owner_url, create=False) as log:
        assert verify_run(log, "base") == []
    with open_log(roles.trainer_url, create=False) as log:
        n = log.last_seq("base")
        assert log.append([wire_event("round.started", "base", 2, f"rs-{uuid.uuid4().hex[:6]}")]).appended == 1
        assert log.last_seq("base") == n + 1
        assert verify_run(log, "base") == []


def _without(row: dict[str, Any], *cols: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in cols}


ATTACKS: dict[str, Any] = {
    # (what the trainer writes, what the database says)
    "a seq at the top of bigint": (lambda r: r | {"seq": 9223372036854775807}, "seq is assigned by the database"),
    "a negative seq with a made-up hash": (
        lambda r: r | {"seq": -5, "hash": "0" * 64},
        "seq is assigned by the database",
    ),
    "a made-up hash": (lambda r: _without(r, "seq") | {"hash": "ab" * 32}, "its hash is not the sha256"),
    "a prev_hash that is not the run's last": (
        lambda r: _without(r, "seq") | {"prev_hash": "cd" * 32},
        "its prev_hash is not the hash",
    ),
    "an empty event id": (lambda r: _without(r, "seq") | {"event_id": ""}, "the event id is empty"),
    "a control character in the run id": (lambda r: _without(r, "seq") | {"run_id": "base\x1b[2J"}, "the run id"),
    "a negative round": (lambda r: _without(r, "seq") | {"round": -1}, "its round is negative"),
    "a type that is no type": (lambda r: _without(r, "seq") | {"type": "DROP TABLE"}, "not an event type"),
    "data that is not an object": (lambda r: _without(r, "seq") | {"data": "[1, 2]"}, "not a JSON object"),
    "texts that are not an object": (lambda r: _without(r, "seq") | {"texts": "7"}, "texts are not a JSON object"),
    "another schema version": (lambda r: _without(r, "seq") | {"schema_version": 2}, "schema version"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_every_insert_that_would_break_the_chain_is_refused(roles: Roles, attack: str) -> None:
    forge, refusal = ATTACKS[attack]
    row = forge(next_row(roles.trainer_url, "base", "round.started", 2, "forged"))
    with pytest.raises(Exception, match=refusal):
        insert(roles.trainer, row)
    still_whole(roles)


def test_a_second_commit_of_a_committed_round_is_refused(roles: Roles) -> None:
    row = next_row(roles.trainer_url, "base", "round.committed", 1, "commit-again")
    with pytest.raises(Exception, match="uq_events_milestones"):
        insert(roles.trainer, _without(row, "seq"))
    still_whole(roles)


def test_a_well_formed_raw_insert_is_the_next_event(roles: Roles) -> None:
    """A trainer may append: a row that extends the chain goes in, at the seq the database
    assigns, and verifies."""
    row = next_row(roles.trainer_url, "base", "round.started", 2, "raw")
    insert(roles.trainer, _without(row, "seq"))
    with open_log(roles.owner_url, create=False) as log:
        assert [e.event_id for e in log.read("base")][-1] == "raw" and log.last_seq("base") == row["seq"]
        assert verify_run(log, "base") == []


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE events SET round = 0",
        "DELETE FROM events",
        "TRUNCATE events",
        "ALTER TABLE events DISABLE TRIGGER USER",
        "SELECT setval('events_seq_assigned', 9223372036854775806)",
        "INSERT INTO views (name, run_id, part, seq, hash, state) VALUES ('memory', 'base', 1, 1, 'x', '{}')",
        "UPDATE views SET state = '{}'",
        "DELETE FROM views",
        "SELECT events_check_chain()",
    ],
)
def test_the_trainer_may_not_touch_the_log_or_the_owners_caches(roles: Roles, sql: str) -> None:
    with pytest.raises(Exception, match="permission denied|must be owner|cannot be called|trigger functions can only"):
        with roles.trainer.begin() as conn:
            conn.execute(text(sql))
    still_whole(roles)


def test_a_cache_the_trainer_writes_is_never_read_by_the_owner(roles: Roles) -> None:
    """Granted more than documented (INSERT, UPDATE on ``views``), a trainer saves a forged
    snapshot of round 1 (C1 at frequency 100000) with the right anchor: the database stamps it
    with the trainer's name, and the owner's reads pass it by (they trust their own and the
    owner's saved states); the trainer's own reads use it, being its own."""
    with roles.admin.connect() as conn:
        conn.execute(text(f"GRANT INSERT, UPDATE ON {roles.schema}.views TO {roles.trainer_role}"))
    with open_log(roles.owner_url, create=False) as log:
        (snap,) = log.view_states("memory", "base")
        honest = load_memory(log, "base", 1)
    forged = dict(snap.state)
    forged["causes"] = [[*c[:4], 100000, *c[5:]] for c in snap.state["causes"]]
    with open_log(roles.trainer_url, create=False) as log:
        log.put_view_states([ViewState("memory", "base", 1, snap.seq, snap.hash, forged)])
        with roles.trainer.begin() as conn:  # nor can it pass its row off as the owner's
            conn.execute(
                text(
                    "UPDATE views SET writer = (SELECT tableowner FROM pg_tables WHERE tablename = 'views' "
                    "AND schemaname = current_schema()) WHERE writer = current_user"
                )
            )
    with roles.admin.connect() as conn:
        writers = sorted(
            r[0] for r in conn.execute(text(f"SELECT writer FROM {roles.schema}.views WHERE name = 'memory'"))
        )
    assert writers == sorted([roles.trainer_role, make_url(roles.owner_url).username])  # type: ignore[type-var]
    with open_log(roles.owner_url, create=False) as log:
        assert load_memory(log, "base", 1) == honest
        assert [s.state for s in log.view_states("memory", "base")] == [snap.state]
        assert verify_run(log, "base") == []
    with open_log(roles.trainer_url, create=False) as log:  # its own forgery, its own reads: verify says so
        assert "snapshot of round 1 differs from the fold of the log" in verify_run(log, "base")
