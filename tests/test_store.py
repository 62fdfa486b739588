"""The event-store contract, run against every backend (SQLite file and real PostgreSQL)."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from diagevo.events.schemas import SCHEMA_VERSION, EventIn, new_event
from diagevo.events.store import (
    ARTIFACT_KEY,
    GENESIS_HASH,
    AppendResult,
    ConflictError,
    EventStore,
    StoreError,
)
from tests.conftest import Backend


def scored(run: str, eid: str, rnd: int = 1, q: str = "q1", p1: float = 0.5) -> EventIn:
    return new_event("question.scored", run, rnd, eid, question_id=q, n=8, p1=p1, p2=0.5, retained=True)


def batch(run: str, prefix: str, n: int, rnd: int = 1) -> list[EventIn]:
    return [scored(run, f"{prefix}-{i}", rnd, q=f"q{i}") for i in range(n)]


def ids(store: EventStore, run: str) -> list[str]:
    return [e.event_id for e in store.read(run)]


# --- append, seq, idempotency ------------------------------------------------------------------


def test_append_assigns_global_increasing_seq(store: EventStore) -> None:
    assert store.append(batch("a", "a", 3)) == AppendResult(appended=3, skipped=0, last_seq=3)
    assert store.append(batch("b", "b", 2)) == AppendResult(appended=2, skipped=0, last_seq=5)
    assert store.append(batch("a", "a2", 1)) == AppendResult(appended=1, skipped=0, last_seq=6)
    assert [e.seq for e in store.read("a")] == [1, 2, 3, 6]
    assert [e.seq for e in store.read("b")] == [4, 5]
    assert store.last_seq("a") == 6 and store.last_seq("b") == 5 and store.last_seq("nope") == 0


def test_stored_event_round_trips_envelope_and_data(store: EventStore) -> None:
    ev = new_event("cause.promoted", "r", 3, "p-1", cause_id="c1", acc=0.75, n_candidates=4)
    store.append([ev])
    (got,) = store.read("r")
    assert (got.event_id, got.run, got.round, got.type) == ("p-1", "r", 3, "cause.promoted")
    assert got.schema_version == SCHEMA_VERSION
    assert got.data == {"cause_id": "c1", "acc": 0.75, "n_candidates": 4}
    assert got.recorded_at.endswith("+00:00")


def test_reappending_stored_events_is_a_silent_noop(store: EventStore) -> None:
    first = batch("r", "e", 4)
    store.append(first)
    res = store.append(first)
    assert res == AppendResult(appended=0, skipped=4, last_seq=4)
    mixed = first[2:] + batch("r", "new", 2)
    assert store.append(mixed) == AppendResult(appended=2, skipped=2, last_seq=6)
    assert ids(store, "r") == ["e-0", "e-1", "e-2", "e-3", "new-0", "new-1"]
    assert store.verify_chain("r") == []


def test_duplicate_event_ids_within_one_batch_keep_the_first(store: EventStore) -> None:
    a = scored("r", "dup", p1=0.1)
    b = scored("r", "dup", p1=0.9)
    res = store.append([a, scored("r", "x"), b])
    assert res == AppendResult(appended=2, skipped=1, last_seq=2)
    assert [e.data["p1"] for e in store.read("r") if e.event_id == "dup"] == [0.1]


def test_event_id_is_unique_per_run(store: EventStore) -> None:
    store.append([scored("r1", "same")])
    assert store.append([scored("r2", "same")]).appended == 1  # another run: another event
    assert store.append([scored("r2", "same")]).skipped == 1  # its own run: a no-op
    assert store.runs() == ["r1", "r2"]


def test_empty_batch_stores_nothing(store: EventStore) -> None:
    assert store.append([]) == AppendResult(0, 0, 0)
    assert store.runs() == [] and store.latest_run() is None


def test_data_that_is_not_json_is_refused_and_nothing_is_stored(store: EventStore) -> None:
    bad = EventIn.model_construct(
        type="failure.attributed",
        run="r",
        round=1,
        event_id="nan",
        data={"failure_id": "f", "cause_id": "c", "via": "dedup", "similarity": float("nan")},
    )
    with pytest.raises(StoreError, match="event nan: data is not JSON-serialisable"):
        store.append([scored("r", "ok"), bad])
    assert store.last_seq("r") == 0


# --- optimistic concurrency ---------------------------------------------------------------------


def test_expected_last_seq_mismatch_raises_conflict_and_stores_nothing(store: EventStore) -> None:
    assert store.append(batch("r", "a", 2), expected_last_seq=0).last_seq == 2
    store.append(batch("other", "o", 3))  # global seq moves on; run r stays at 2
    with pytest.raises(ConflictError, match="run 'r' is at seq 2, expected 1"):
        store.append(batch("r", "b", 2), expected_last_seq=1)
    assert ids(store, "r") == ["a-0", "a-1"]
    assert store.append(batch("r", "b", 2), expected_last_seq=2) == AppendResult(2, 0, 7)


def test_expected_last_seq_on_a_new_run_is_zero(store: EventStore) -> None:
    with pytest.raises(ConflictError):
        store.append(batch("fresh", "f", 1), expected_last_seq=5)
    assert store.last_seq("fresh") == 0
    assert store.append(batch("fresh", "f", 1), expected_last_seq=0).appended == 1


def test_expected_last_seq_needs_a_single_run(store: EventStore) -> None:
    with pytest.raises(StoreError, match="single run"):
        store.append([scored("a", "1"), scored("b", "2")], expected_last_seq=0)
    assert store.runs() == []


# --- hash chain ------------------------------------------------------------------------------


def _expected_hash(prev: str, e) -> str:
    stored_data = json.dumps(e.data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    canonical = json.dumps(
        [e.event_id, e.run, e.round, e.type, e.schema_version, json.loads(stored_data)],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256((prev + canonical).encode()).hexdigest()


def test_hash_chain_is_per_run_and_follows_the_documented_formula(store: EventStore) -> None:
    store.append(batch("a", "a", 2) + batch("b", "b", 2))
    store.append(
        [new_event("question.generated", "a", 2, "qg", question_id="q9", mode="free", text="Ünïcode ∑ text")]
    )
    for run in ("a", "b"):
        prev = GENESIS_HASH
        for e in store.read(run):  # texts=False: data exactly as stored (artifact refs)
            assert e.prev_hash == prev
            assert e.hash == _expected_hash(prev, e)
            prev = e.hash
        assert store.verify_chain(run) == []


def test_verify_chain_detects_tampering(backend: Backend, db_url: str) -> None:
    store = EventStore(db_url)
    store.append(batch("r", "e", 5))
    backend.disable_append_only(db_url)
    engine = backend.engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE events SET data = :d WHERE event_id = 'e-2'"), {"d": '{"forged":true}'})
    engine.dispose()
    problems = store.verify_chain("r")
    store.close()
    assert len(problems) == 1 and problems[0].startswith("seq 3: hash mismatch")


# --- artifacts ---------------------------------------------------------------------------------


def test_texts_go_to_artifacts_and_come_back(store: EventStore) -> None:
    long_text = "Let x be the number of apples. " * 200 + "ünïcødé ∑"
    evs = [
        new_event("question.generated", "r", 1, "g", question_id="q", mode="free", text=long_text),
        new_event("failure.recorded", "r", 1, "f", failure_id="f1", question_id="q", response="resp", reference=""),
        new_event("failure.diagnosed", "r", 1, "d", failure_id="f1", raw=long_text),  # same text: one artifact
    ]
    store.append(evs)
    raw = {e.event_id: e.data for e in store.read("r")}
    sha = hashlib.sha256(long_text.encode()).hexdigest()
    assert raw["g"]["text"] == {ARTIFACT_KEY: sha}
    assert raw["d"]["raw"] == {ARTIFACT_KEY: sha}
    assert raw["f"]["reference"] == ""  # empty strings stay inline
    assert store.artifact(sha) == long_text
    full = {e.event_id: e.data for e in store.read("r", texts=True)}
    assert full == {e.event_id: e.data for e in evs}
    fast = {seq: data for seq, _, _, data in store.iter_rows("r")}
    assert fast[1]["text"] == {ARTIFACT_KEY: sha}


def test_texts_are_kept_in_their_events_row(backend: Backend, store: EventStore) -> None:
    """Since 0008 a text lies in its event's row (``texts``), not in a second table: the data
    still names it by its sha256, so the chain commits to it."""
    evs = [
        new_event("question.generated", "r", 1, f"g{i}", question_id=f"q{i}", mode="free", text="same text")
        for i in range(3)
    ] + [new_event("failure.recorded", "r", 1, "f", failure_id="f1", question_id="q0", response="r", reference="")]
    store.append(evs[:2])
    store.append(evs[2:])
    engine = backend.engine(store.url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM artifacts")).scalar_one() == 0
        column = dict(conn.execute(text("SELECT event_id, texts FROM events")).all())
    engine.dispose()
    assert column == {f"g{i}": '{"text":"same text"}' for i in range(3)} | {"f": '{"response":"r"}'}
    sha = hashlib.sha256(b"same text").hexdigest()
    assert store.artifact(sha) == "same text"  # found by its key too (a scan)
    assert [e.data["text"] for e in store.read("r", types=["question.generated"], texts=True)] == ["same text"] * 3


def test_unknown_artifact_is_a_store_error(store: EventStore) -> None:
    with pytest.raises(StoreError, match="unknown artifact"):
        store.artifact("f" * 64)


# --- reads -------------------------------------------------------------------------------------


def test_read_and_iter_rows_filter_by_seq_and_type(store: EventStore) -> None:
    store.append(
        [
            new_event("round.started", "r", 1, "rs"),
            scored("r", "s1"),
            new_event("cause.promoted", "r", 1, "cp", cause_id="c", acc=0.8, n_candidates=2),
            scored("r", "s2"),
            new_event("round.committed", "r", 1, "rc"),
        ]
    )
    assert [e.seq for e in store.read("r", after_seq=1, upto_seq=4)] == [2, 3, 4]
    assert [e.event_id for e in store.read("r", types={"question.scored"})] == ["s1", "s2"]
    assert list(store.read("r", types=[])) == []
    rows = list(store.iter_rows("r", after_seq=2, types=["cause.promoted", "round.committed"]))
    assert rows == [
        (3, 1, "cause.promoted", {"cause_id": "c", "acc": 0.8, "n_candidates": 2}),
        (5, 1, "round.committed", {}),
    ]


def test_read_streams_many_events_in_order(store: EventStore) -> None:
    n = 10_000  # more than one fetch chunk
    store.append(batch("r", "e", n))
    seqs = [row[0] for row in store.iter_rows("r")]
    assert seqs == list(range(1, n + 1))
    assert sum(1 for _ in store.read("r", texts=True)) == n


def test_runs_in_order_of_first_event_and_latest_run(store: EventStore) -> None:
    store.append(batch("b", "b", 1))
    store.append(batch("a", "a", 1))
    assert store.runs() == ["b", "a"] and store.latest_run() == "a"
    store.append(batch("b", "b2", 1))
    assert store.runs() == ["b", "a"] and store.latest_run() == "b"


# --- the database refuses UPDATE and DELETE -------------------------------------------------


@pytest.mark.parametrize(
    "sql", ["UPDATE events SET round = 99", "UPDATE events SET data = '{}' WHERE seq = 1", "DELETE FROM events"]
)
def test_update_and_delete_on_events_are_refused_by_the_database(backend: Backend, store: EventStore, sql: str) -> None:
    store.append(batch("r", "e", 3))
    before = [(e.seq, e.round, e.data) for e in store.read("r")]
    engine = backend.engine(store.url)
    with pytest.raises(sa_exc.DBAPIError, match="append-only"):
        with engine.begin() as conn:
            conn.execute(text(sql))
    engine.dispose()
    assert [(e.seq, e.round, e.data) for e in store.read("r")] == before


@pytest.mark.postgres
def test_truncate_is_refused_on_postgres(postgres_backend: Backend) -> None:
    url = postgres_backend.fresh_url()
    with EventStore(url) as store:
        store.append(batch("r", "e", 2))
        engine = postgres_backend.engine(url)
        with pytest.raises(sa_exc.DBAPIError, match="append-only"):
            with engine.begin() as conn:
                conn.execute(text("TRUNCATE events"))
        engine.dispose()
        assert store.last_seq("r") == 2


# --- snapshots and checkpoints --------------------------------------------------------------


def test_snapshots_upsert_lookup_and_drop(store: EventStore) -> None:
    assert store.get_snapshot("r", 1) is None and store.latest_snapshot("r") is None
    store.put_snapshot("r", 1, 10, {"causes": {"c1": ["active", 2]}})
    store.put_snapshot("r", 2, 20, {"causes": {}})
    store.put_snapshot("r", 1, 11, {"causes": {"c1": ["mastered", 0]}})  # upsert
    store.put_snapshot("other", 5, 30, {"x": 1})
    assert store.get_snapshot("r", 1) == (11, {"causes": {"c1": ["mastered", 0]}})
    assert store.latest_snapshot("r") == (2, 20, {"causes": {}})
    assert store.latest_snapshot("r", upto_round=1) == (1, 11, {"causes": {"c1": ["mastered", 0]}})
    assert store.latest_snapshot("r", upto_round=0) is None
    assert store.drop_snapshots("r") == 2
    assert store.get_snapshot("r", 2) is None and store.get_snapshot("other", 5) == (30, {"x": 1})


def test_checkpoints_default_to_zero_and_upsert(store: EventStore) -> None:
    assert store.get_checkpoint("vector_index", "r") == 0
    store.set_checkpoint("vector_index", "r", 7, {"model": "all-MiniLM-L6-v2"})
    store.set_checkpoint("vector_index", "r", 9)
    store.set_checkpoint("other", "r", 3)
    assert store.get_checkpoint("vector_index", "r") == 9
    assert store.checkpoint_info("vector_index", "r") == {}
    assert store.get_checkpoint("other", "r") == 3 and store.get_checkpoint("vector_index", "r2") == 0


# --- property: the store behaves like a dict of first occurrences (per run) ------------------


_batches = st.lists(
    st.lists(st.tuples(st.sampled_from(["r1", "r2"]), st.integers(0, 12)), min_size=1, max_size=6),
    min_size=1,
    max_size=6,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=_batches)
def test_store_matches_a_model_of_first_occurrences(store: EventStore, batches) -> None:
    salt = uuid.uuid4()  # the fixture's store is shared by the examples: fresh ids for each
    runs = {r: f"{r}-{salt.hex[:8]}" for r in ("r1", "r2")}
    model: dict[str, list[str]] = {r: [] for r in runs.values()}
    seen: set[tuple[str, str]] = set()  # ids are unique per run
    for b in batches:
        evs = [scored(runs[r], f"{salt.hex[:8]}-{k}", q=f"q{k}") for r, k in b]
        new = 0
        for e in evs:
            if (e.run, e.event_id) not in seen:
                seen.add((e.run, e.event_id))
                model[e.run].append(e.event_id)
                new += 1
        res = store.append(evs)
        assert (res.appended, res.skipped) == (new, len(evs) - new)
    for run, expected in model.items():
        assert ids(store, run) == expected
        assert store.verify_chain(run) == []
