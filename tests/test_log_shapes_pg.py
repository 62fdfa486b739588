"""The trainer's role cannot write what readers cannot read; no reader can block writers
(issue 47, item 4), against the real PostgreSQL server with the roles the docs set up.

Each attack of the issue is a raw INSERT by the trainer (the documented grants: read everything,
INSERT into ``events``) of a row whose chain is right (``prev_hash`` and ``hash`` as diagevo would
compute them), so only the new checks can refuse it. A read-only role holds every lock it may
take, and the trainer's appends go on; a writer that holds the append lock makes the next append
wait ``lock_wait_s`` and fail naming it. The types the database accepts are the catalog's,
written at every upgrade: a type added to the catalog is refused until the owner upgrades, then
accepted, with no migration edited."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import make_url

from diagevo.catalog import CATALOG, Event, Kind, RoundStarted
from diagevo.log import open_log
from diagevo.log.chain import Pending, chain
from diagevo.log.postgres import LockTimeout
from diagevo.log.registry import catalog_specs, registered_specs
from diagevo.log.revision import HEAD_REVISION
from diagevo.log.schema import upgrade
from diagevo.views.memory import load_memory
from diagevo.views.verify import verify_run
from tests.logs import ForgedRow, wire_event
from tests.test_log_trainer_role import Roles, insert, refused_or_passed_over, roles  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres

OLD_APPEND_LOCK_KEY = int.from_bytes(b"diagevo1", "big")  # the advisory lock appenders once took


def unregistered(conn: Connection) -> list[str]:
    """The catalog's types whose row in ``event_types`` is missing or differs from this version's."""
    held = registered_specs(conn)
    return [name for name, spec in catalog_specs().items() if held.get(name) != spec]


def raw_row(url: str, run: str, type_: str, rnd: int, data: dict[str, Any], **columns: Any) -> dict[str, Any]:
    """The row a raw inserter writes for this event: chained right after the run's head (its
    prev_hash and hash as diagevo computes them), the data taken as given, unvalidated."""
    with open_log(url) as log:
        head = log.head(run)
    ev = ForgedRow(type=type_, run=run, round=rnd, event_id=f"raw-{uuid.uuid4().hex[:8]}", data=data)
    row = next(chain(Pending([ev]), {run: head}, head[0]))
    keys = (
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
    out = dict(zip(keys, row[1:11], strict=True))
    out |= dict(
        zip(("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id"), row[11:])
    )
    return out | columns


ATTACKS: dict[str, tuple[str, int, dict[str, Any], dict[str, Any], str]] = {
    # (type, round, data, columns, what the database says): round 2 is open, round 1 committed
    "an unknown type": ("zz.evil", 2, {}, {}, "its type zz.evil is not an event type this database knows"),
    "a node id that is a list": (
        "cause.created",
        2,
        {"cause_id": "C9", "node_id": ["x"], "description": "a cause", "failure_id": None},
        {},
        "its data.node_id is not of its type",
    ),
    "a cause id that is a number": (
        "failure.attributed",
        2,
        {"failure_id": "f1", "cause_id": 7, "via": "dedup", "similarity": None},
        {},
        "its data.cause_id is not of its type",
    ),
    "a mode no one knows": (
        "question.generated",
        2,
        {"question_id": "q9", "mode": "evil", "active_cause": None, "mastered_cause": None, "text": "", "node": None},
        {},
        "its data.mode is not of its type",
    ),
    "a float where a count goes": (
        "question.scored",
        2,
        {"question_id": "q9", "n": 1.5, "p1": 0.5, "p2": 0.5, "pseudo_label": "1", "retained": True, "reference": ""},
        {},
        "its data.n is not of its type",
    ),
    "a promoted id that is an object": (
        "promotions.decided",
        2,
        {"promoted": [{"x": 1}], "candidates": 1},
        {},
        "its data.promoted is not of its type",
    ),
    "a required field missing": (
        "cause.promoted",
        2,
        {"cause_id": "C1", "acc": 0.9},
        {},
        "its data lacks n_candidates",
    ),
    "a field no model has": (
        "run.noted",
        2,
        {"note": "n", "evil": 1},
        {},
        "its data holds evil, no field of run.noted",
    ),
    "a key column that is not its data's": (
        "failure.recorded",
        2,
        {"failure_id": "f9", "question_id": "q1", "response": "", "reference": ""},
        {"question_id": "q-other"},
        "its key columns are not the ids its data names",
    ),
    "a second run.started": (
        "run.started",
        2,
        {"config": {"k": 2}, "seed": 0},
        {},
        "run base opens with its one run.started, in round 0",
    ),
    "recorded_at that is not a date": (
        "phase.completed",
        2,
        {"phase": "x"},
        {"recorded_at": "not a date"},
        "recorded_at is not a timestamp",
    ),
    "recorded_at on the 30th of February": (
        "phase.completed",
        2,
        {"phase": "x"},
        {"recorded_at": "2026-02-30T10:00:00.000000+00:00"},
        "recorded_at is not a timestamp",
    ),
}


def still_whole(roles: Roles) -> None:  # noqa: F811 - the fixture's value
    """The log reads (each problem verify names is a row's, by its seq, which the readers pass
    over), and the trainer still appends through diagevo (round 2 open, or opened)."""
    with open_log(roles.owner_url, create=False) as log:
        assert all(re.match(r"^(invariant: )?seq \d+: ", p) for p in verify_run(log, "base"))
        load_memory(log, "base")
    with open_log(roles.trainer_url, create=False) as log:
        n = log.last_seq("base")
        eid = f"note-{uuid.uuid4().hex[:6]}"
        if log.count("base", types=(RoundStarted,), in_round=2):
            assert log.append([wire_event("phase.completed", "base", 2, eid, phase="x")]).appended == 1
        else:
            assert log.append([wire_event("round.started", "base", 2, eid)]).appended == 1
        assert log.last_seq("base") == n + 1
        assert all(re.match(r"^(invariant: )?seq \d+: ", p) for p in verify_run(log, "base"))


@pytest.fixture
def open_round(roles: Roles) -> Roles:  # noqa: F811 - the imported fixture
    """Round 1 committed, round 2 open (through diagevo, as the trainer)."""
    with open_log(roles.trainer_url, create=False) as log:
        log.append([wire_event("round.started", "base", 2, "base/2/round.started")])
    return roles


OUT_OF_ORDER: dict[str, tuple[str, int, dict[str, Any], str]] = {
    # (type, round, data, what the fold says): the round order is the fold's rule, not the database's
    "a commit of round 9 while round 2 is open": (
        "round.committed",
        9,
        {},
        "round 9 starts before round 2 was committed",
    ),
    "evidence for a committed round": (
        "question.generated",
        1,
        {"question_id": "q9", "mode": "free", "active_cause": None, "mastered_cause": None, "text": "", "node": None},
        "round 1 goes backwards: round 1 is already committed",  # the memory's fold reads every type (issue 82)
    ),
}


@pytest.mark.parametrize("case", list(OUT_OF_ORDER))
def test_a_row_out_of_the_rounds_order_is_refused_or_passed_over(open_round: Roles, case: str) -> None:
    type_, rnd, data, said = OUT_OF_ORDER[case]
    row = raw_row(open_round.trainer_url, "base", type_, rnd, data)
    assert refused_or_passed_over(open_round, row) == said
    still_whole(open_round)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_trainer_cannot_insert_what_readers_cannot_read(open_round: Roles, attack: str) -> None:
    type_, rnd, data, columns, refusal = ATTACKS[attack]
    row = raw_row(open_round.trainer_url, "base", type_, rnd, data, **columns)
    with pytest.raises(Exception, match=refusal):
        insert(open_round.trainer, row)
    still_whole(open_round)


def test_what_the_rules_allow_goes_in(open_round: Roles) -> None:
    """A retrospective note on a committed round, evidence for the open round, and a new run's
    ``run.started``: each a raw INSERT that the fold reads."""
    url = open_round.trainer_url
    insert(open_round.trainer, raw_row(url, "base", "eval.recorded", 1, {"accuracy": 0.5}))
    q = {"question_id": "q7", "mode": "free", "active_cause": None, "mastered_cause": None, "text": "", "node": None}
    insert(open_round.trainer, raw_row(url, "base", "question.generated", 2, q))
    insert(open_round.trainer, raw_row(url, "fresh", "run.started", 0, {"config": {"k": 2}, "seed": 0}))
    with open_log(open_round.owner_url, create=False) as log:
        assert verify_run(log, "base") == [] and verify_run(log, "fresh") == []
    with pytest.raises(Exception, match="run other opens with its one run.started, in round 0"):
        insert(open_round.trainer, raw_row(url, "other", "round.started", 1, {}))


def test_the_database_knows_the_catalogs_types_as_this_diagevo_defines_them(roles: Roles) -> None:  # noqa: F811
    """The rows ``event_types`` holds after an upgrade are the catalog's types, each with the shape
    its data model declares (a catalog changed without an upgrade makes this fail)."""
    engine = create_engine(roles.owner_url)
    with engine.connect() as conn:
        assert registered_specs(conn) == catalog_specs()
        assert unregistered(conn) == []
    engine.dispose()


class ZzNoted(Event):
    """A type a newer diagevo adds to the catalog."""

    name: ClassVar[str] = "zz.noted"
    kind: ClassVar[Kind] = Kind.BOOKKEEPING

    word: str


def test_a_type_added_to_the_catalog_is_accepted_after_an_upgrade_alone(
    roles: Roles,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(CATALOG, ZzNoted.name, ZzNoted)
    with open_log(roles.trainer_url, create=False) as log:
        log.append([wire_event("round.started", "base", 2, "base/2/round.started")])
        with pytest.raises(Exception, match="its type zz.noted is not an event type this database knows"):
            log.append([wire_event("zz.noted", "base", 2, "base/2/zz", word="hello")])
    engine = create_engine(roles.owner_url)
    with engine.connect() as conn:
        assert unregistered(conn) == ["zz.noted"]
    assert upgrade(roles.owner_url) == (HEAD_REVISION, HEAD_REVISION)  # nothing to migrate; the types are written
    with engine.connect() as conn:
        assert unregistered(conn) == []
    engine.dispose()
    with open_log(roles.trainer_url, create=False) as log:
        assert log.append([wire_event("zz.noted", "base", 2, "base/2/zz", word="hello")]).appended == 1
        with pytest.raises(Exception, match="its data.word is not of its type"):
            insert(roles.trainer, raw_row(roles.trainer_url, "base", "zz.noted", 2, {"word": ["x"]}))


@pytest.fixture
def reader(roles: Roles) -> Iterator[Any]:  # noqa: F811
    """A read-only role: the trainer's grants less INSERT."""
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with roles.admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(text(f"GRANT USAGE ON SCHEMA {roles.schema} TO {role}"))
        conn.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA {roles.schema} TO {role}"))
    engine = create_engine(make_url(roles.owner_url).set(username=role).render_as_string(hide_password=False))
    try:
        yield engine
    finally:
        engine.dispose()
        with roles.admin.connect() as conn:
            conn.execute(text(f"DROP OWNED BY {role} CASCADE"))
            conn.execute(text(f"DROP ROLE {role}"))


def _append_in_thread(url: str, eid: str, wait_s: float) -> dict[str, Any]:
    """Append one event in another thread; what came of it after at most ``wait_s`` seconds."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            with open_log(url, create=False) as log:
                done["appended"] = log.append([wire_event("round.started", "base", 2, eid)]).appended
        except Exception as exc:  # noqa: BLE001 - reported to the test
            done["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(wait_s)
    return done


def test_no_lock_a_reader_may_take_blocks_the_writers(roles: Roles, reader: Any) -> None:  # noqa: F811
    """The issue's attack (``SELECT pg_advisory_lock`` on diagevo's old key) and every table lock a
    read-only role may take, held in an open transaction: the trainer's append goes through."""
    raw = reader.raw_connection()  # one session, its transaction left open while the trainer appends
    try:
        cur = raw.cursor()
        cur.execute(f"SELECT pg_advisory_lock({OLD_APPEND_LOCK_KEY})")
        cur.execute(f"SELECT pg_advisory_xact_lock({OLD_APPEND_LOCK_KEY})")
        cur.execute("LOCK TABLE events IN ACCESS SHARE MODE")
        cur.execute("LOCK TABLE events_append_lock IN ACCESS SHARE MODE")
        for stronger in ("events_append_lock IN EXCLUSIVE MODE", "events IN SHARE MODE"):
            cur.execute("SAVEPOINT s")
            with pytest.raises(Exception, match="permission denied"):
                cur.execute(f"LOCK TABLE {stronger}")
            cur.execute("ROLLBACK TO SAVEPOINT s")
        done = _append_in_thread(roles.trainer_url, "while-a-reader-holds-locks", 30)
        assert done == {"appended": 1}
    finally:
        raw.invalidate()  # the session ends: its locks go
    with open_log(roles.owner_url, create=False) as log:
        assert verify_run(log, "base") == []


def test_an_append_waits_for_a_writer_a_bounded_time_and_names_it(roles: Roles) -> None:  # noqa: F811
    """A trainer session holding the append lock (an open transaction that inserted): the next
    append waits ``lock_wait_s`` and fails in one line naming the holder's pid and application."""
    holder = create_engine(roles.trainer_url, connect_args={"application_name": "the-holder"})
    with holder.connect() as conn:
        conn.begin()
        conn.execute(text("INSERT INTO events (event_id) SELECT '' WHERE false"))  # takes the lock, as diagevo does
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with open_log(roles.trainer_url, create=False) as log:
            log.lock_wait_s = 0.5
            with pytest.raises(LockTimeout) as caught:
                log.append([wire_event("round.started", "base", 2, "waits")])
        message = str(caught.value)
        assert "was not free within 0.5 s" in message and f"pid {pid}" in message and "'the-holder'" in message
        assert "\n" not in message
        conn.rollback()
    holder.dispose()
    still_whole(roles)


def test_a_bad_row_written_before_the_guard_is_named_by_its_seq(roles: Roles) -> None:  # noqa: F811
    """What a reader meets in a log a guard did not protect (the trigger lifted by the owner):
    ``memory verify`` names the seq (the read path's one line is the read-side work of issue 47)."""
    with roles.admin.connect() as conn:
        conn.execute(text(f"ALTER TABLE {roles.schema}.events DISABLE TRIGGER events_check_chain"))
    row = raw_row(
        roles.trainer_url, "base", "cause.created", 2, {"cause_id": "C9", "node_id": ["x"], "description": "d"}
    )
    insert(roles.trainer, row)
    with roles.admin.connect() as conn:
        conn.execute(text(f"ALTER TABLE {roles.schema}.events ENABLE TRIGGER events_check_chain"))
        seq = conn.execute(text(f"SELECT max(seq) FROM {roles.schema}.events")).scalar_one()
    with open_log(roles.owner_url, create=False) as log:
        problems = verify_run(log, "base")
    assert problems and any(f"seq {seq}" in p for p in problems), json.dumps(problems)


SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("cause.created", {"cause_id": "C1", "node_id": "N1", "description": "d", "failure_id": None}),
    ("cause.created", {"cause_id": "C1", "node_id": ["x"], "description": "d"}),
    ("cause.created", {"cause_id": 7, "node_id": "N1", "description": "d"}),
    ("cause.created", {"cause_id": "C1", "node_id": "N1"}),
    ("cause.created", {"cause_id": "C1", "node_id": "N1", "description": "d", "evil": 1}),
    ("question.scored", {"question_id": "q", "n": 1.0, "p1": 0.5, "p2": 0.5, "retained": True}),
    ("question.scored", {"question_id": "q", "n": 1.5, "p1": 0.5, "p2": 0.5, "retained": True}),
    ("question.scored", {"question_id": "q", "n": 2, "p1": True, "p2": 0.5, "retained": True}),
    ("question.scored", {"question_id": "q", "n": 2, "p1": 0.5, "p2": 0.5, "retained": 1}),
    ("question.generated", {"question_id": "q", "mode": "evil"}),
    ("question.generated", {"question_id": "q", "mode": "free", "text": {"$artifact": "ab"}}),
    ("question.generated", {"question_id": "q", "mode": ["free"]}),
    ("promotions.decided", {"promoted": ["a", "b"], "candidates": 3}),
    ("promotions.decided", {"promoted": ["a", 1], "candidates": 3}),
    ("failure.attributed", {"failure_id": "f", "cause_id": "C", "via": "dedup", "similarity": None}),
    ("failure.attributed", {"failure_id": "f", "cause_id": "C", "via": "dedup", "similarity": "0.9"}),
    ("round.committed", {"anything": [1, {"x": None}]}),  # version 1 carried it; 2 on refuse it
    ("round.committed", {"F": 2, "summary": {"anything": [1]}}),
    ("phase.completed", {"phase": "solver", "seconds": 1.5, "loss": 0.5}),  # an undeclared figure: in stats
    ("phase.completed", {"phase": "solver", "care": "high"}),
    ("run.started", {"config": {"k": 2}, "seed": 0, "trainer": None}),
    ("run.started", {"config": [], "seed": 0}),
    ("llm.called", {"stage": "extract", "prompt_tokens": 10**30, "extra": "carried"}),
    ("llm.called", {"stage": "extract", "prompt_tokens": "12"}),
    ("round.started", {"cut": {"raw": {"bytes": 1}}}),
    ("round.started", {"cut": "x"}),
]


def test_the_database_and_verify_judge_a_shape_alike(roles: Roles) -> None:  # noqa: F811
    """``memory verify`` (Python, for logs the database did not check) and the database's check
    agree on which data is out of shape, at each version of its type."""
    from diagevo.log.registry import shape_problem

    engine = create_engine(roles.owner_url)
    judged = set()
    with engine.connect() as conn:
        for type_, data in SHAPES:
            for v in {1, CATALOG[type_].class_version}:
                db = conn.execute(
                    text("SELECT events_shape_problem(:t, :v, CAST(:d AS jsonb))"),
                    {"t": type_, "v": v, "d": json.dumps(data)},
                ).scalar_one()
                assert (db is None) == (shape_problem(type_, data, v) is None), (type_, v, data, db)
                judged.add((type_, v, db is None))
    phase, commit = CATALOG["phase.completed"].class_version, CATALOG["round.committed"].class_version
    assert {
        ("round.committed", 1, True),
        ("round.committed", commit, False),
        ("phase.completed", phase, False),
    } <= judged
    engine.dispose()
