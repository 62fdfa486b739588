"""One contract, every recorder: the same abstract test class runs against SQLite, PostgreSQL
and the in-memory recorder (as pyeventsourcing tests its recorders). What only a database can
enforce (triggers, the texts column, tampering from outside) is in ``test_log_database.py``."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagevo.catalog import (
    SCHEMA_VERSION,
    CausePromoted,
    FailureAttributed,
    QuestionGenerated,
    QuestionScored,
    RoundCommitted,
)
from diagevo.log import (
    GENESIS_HASH,
    AppendResult,
    ConflictError,
    EventReader,
    EventWriter,
    LogOperator,
    Recorder,
    StoredEvent,
    StoreError,
    ViewState,
    open_log,
    payload,
)
from diagevo.log.checks import verify_chain
from diagevo.log.errors import RunBusy
from diagevo.log.inmemory import InMemoryRecorder
from diagevo.log.postgres import PostgresRecorder
from diagevo.log.sqlite import SQLiteRecorder
from diagevo.log.stored import ARTIFACT_KEY
from diagevo.schemas import EventIn
from diagevo.views.caches import refresh
from diagevo.views.memory import load_memory
from diagevo.views.stats import round_stats
from diagevo.views.verify import verify_run
from tests.logs import ForgedRow, Log, wire_event

TEXT = "What is 6 × 7? ünïcødé\u2028"


def scored(run: str, eid: str, q: str = "q1", retained: bool = True, at_round: int = 1, p1: float = 0.5) -> EventIn:
    return wire_event(
        "question.scored",
        run,
        at_round,
        eid,
        question_id=q,
        n=8,
        p1=p1,
        p2=0.5,
        pseudo_label="1",
        retained=retained,
        reference="",
    )


def batch(run: str, prefix: str, n: int, rnd: int = 1) -> list[EventIn]:
    return [scored(run, f"{prefix}-{i}", q=f"q{i}", at_round=rnd) for i in range(n)]


def ids(rec: Recorder, run: str) -> list[str]:
    return [e.event_id for e in rec.read(run)]


def three_rounds(run: str = "r") -> Log:
    log = Log(run)
    log.node("N1").cause("C1", "N1").question("q1", 0.5, active="C1").commit()
    log.question("q2", 0.4, active="C1").attribute("C1", "f2").commit()
    return log.question("q3", 0.6, active="C1", retained=False).commit()


def _expected_hash(prev: str, run: str, r) -> str:  # type: ignore[no-untyped-def]
    """The documented formula, spelled with the standard library, over a row as stored."""
    canonical = json.dumps(
        [r.event_id, run, r.round, r.type, r.schema_version, json.loads(r.data)],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256((prev + canonical).encode()).hexdigest()


class RecorderContract:
    """What every recorder must do; a subclass gives ``url``."""

    kind: type[Recorder]

    @pytest.fixture
    def url(self, tmp_path: Path) -> Iterator[str]:
        raise NotImplementedError

    @pytest.fixture
    def rec(self, url: str) -> Iterator[Recorder]:
        r = open_log(url)
        yield r
        r.close()

    def test_the_url_picks_this_recorder_and_it_implements_the_interface(self, rec: Recorder) -> None:
        assert type(rec) is self.kind
        for name in Recorder.__abstractmethods__:
            assert getattr(type(rec), name) is not getattr(Recorder, name), (
                f"{self.kind.__name__} does not implement {name}"
            )
        # each role is a few methods, and the recorder plays all three
        for role in (EventWriter, EventReader, LogOperator):
            assert isinstance(rec, role)
            assert len([m for m, f in vars(role).items() if callable(f) and not m.startswith("_")]) <= 8, role

    # --- append, seq, idempotency ------------------------------------------------------------

    def test_append_numbers_globally_and_chains_per_run(self, rec: Recorder) -> None:
        assert rec.append(batch("a", "a", 3)) == AppendResult(3, 0, 3)
        assert rec.append(batch("b", "b", 2)) == AppendResult(2, 0, 5)
        assert rec.append(batch("a", "a2", 1)) == AppendResult(1, 0, 6)
        assert [e.seq for e in rec.read("a")] == [1, 2, 3, 6] and [e.seq for e in rec.read("b")] == [4, 5]
        first, second = list(rec.read("a"))[:2]
        assert first.prev_hash == GENESIS_HASH and second.prev_hash == first.hash
        assert verify_chain(rec, "a") == [] and verify_chain(rec, "b") == []
        assert rec.last_seq("a") == 6 and rec.last_seq("nope") == 0 and rec.has_run("b") and not rec.has_run("c")
        assert rec.head("a") == (6, list(rec.read("a"))[-1].hash) and rec.head("nope") == (0, GENESIS_HASH)

    def test_a_stored_event_round_trips_its_envelope_and_data(self, rec: Recorder) -> None:
        rec.append([wire_event("cause.promoted", "r", 3, "p-1", cause_id="c1", acc=0.75, n_candidates=4)])
        (got,) = rec.read("r")
        assert (got.event_id, got.run, got.round, got.type) == ("p-1", "r", 3, "cause.promoted")
        assert got.version == SCHEMA_VERSION and got.recorded_at.endswith("+00:00")
        assert got.event == CausePromoted(cause_id="c1", acc=0.75, n_candidates=4)
        assert json.loads(next(rec.raw("r")).data) == {"cause_id": "c1", "acc": 0.75, "n_candidates": 4}

    def test_ids_are_idempotent_per_run(self, rec: Recorder) -> None:
        rec.append([scored("a", "x")])
        assert rec.append([scored("a", "x"), scored("a", "y")]) == AppendResult(1, 1, 2)
        assert rec.append([scored("b", "x")]).appended == 1  # another run: another event
        assert rec.append([scored("a", "z"), scored("a", "z", p1=0.9)]) == AppendResult(1, 1, 4)  # the first wins
        assert [e.event.p1 for e in rec.read("a", keys={"event_id": ["z"]})] == [0.5]
        assert rec.existing_ids("a", ["x", "y", "w"]) == {"x", "y"} and rec.existing_ids("b", ["y"]) == set()
        assert rec.append([]) == AppendResult(0, 0, 0)
        assert verify_chain(rec, "a") == []

    def test_data_that_is_not_json_is_refused_and_nothing_is_stored(self, rec: Recorder) -> None:
        bad = ForgedRow(
            type="failure.attributed",
            run="r",
            round=1,
            event_id="nan",
            data={"failure_id": "f", "cause_id": "c", "via": "dedup", "similarity": float("nan")},
        )
        with pytest.raises(StoreError, match="event nan: data is not JSON-serialisable"):
            rec.append([scored("r", "ok"), bad])
        assert rec.last_seq("r") == 0 and rec.runs() == [] and rec.latest_run() is None

    def test_a_long_batch_streamed_in_is_all_or_nothing_and_skips_stored_ids_anywhere(self, rec: Recorder) -> None:
        # long enough (about 0.5 MB) that a backend streaming rows has sent many before the end
        rec.append([scored("a", f"e-{i}") for i in range(2500, 2600)])
        got = rec.append([scored("a", f"e-{i}") for i in range(3000)])
        assert got == AppendResult(2900, 100, 3000)
        assert ids(rec, "a") == [f"e-{i}" for i in range(2500, 2600)] + [
            f"e-{i}" for i in range(3000) if not 2500 <= i < 2600
        ]
        assert verify_chain(rec, "a") == []
        bad = ForgedRow(
            type="question.scored", run="a", round=1, event_id="bad", data={"question_id": "q", "p1": float("inf")}
        )
        with pytest.raises(StoreError, match="event bad: data is not JSON-serialisable"):
            rec.append([scored("a", f"f-{i}") for i in range(3000)] + [bad])
        assert rec.last_seq("a") == 3000 and not rec.existing_ids("a", ["f-0", "f-2999"])
        assert rec.append([scored("a", "g")]) == AppendResult(1, 0, 3001)  # the recorder goes on
        assert verify_chain(rec, "a") == []

    def test_expected_position(self, rec: Recorder) -> None:
        assert rec.append(batch("r", "a", 2), expected_last_seq=0).last_seq == 2
        rec.append(batch("other", "o", 3))  # the global seq moves on; run r stays at 2
        with pytest.raises(ConflictError, match="run 'r' is at seq 2, expected 1"):
            rec.append(batch("r", "b", 2), expected_last_seq=1)
        assert ids(rec, "r") == ["a-0", "a-1"]
        assert rec.append(batch("r", "b", 2), expected_last_seq=2) == AppendResult(2, 0, 7)
        with pytest.raises(StoreError, match="single run"):
            rec.append([scored("a", "1"), scored("b", "2")], expected_last_seq=0)
        assert not rec.has_run("a")

    def test_a_decision_reads_the_head_under_the_lock_and_appends_or_stores_nothing(self, rec: Recorder) -> None:
        rec.append([scored("a", "a1"), scored("a", "a2", at_round=2)])
        seen: list[StoredEvent] = []

        def decide() -> list[EventIn]:
            seen.extend(rec.rows("a", types=(QuestionScored,), in_round=2))
            return [scored("a", "a3", at_round=2)]

        assert rec.append_decided(decide) == AppendResult(1, 0, 3) and [r.seq for r in seen] == [2]

        def refuse() -> list[EventIn]:
            raise ValueError("no")

        with pytest.raises(ValueError):
            rec.append_decided(refuse)
        assert rec.last_seq("a") == 3
        assert rec.append_decided(list) == AppendResult(0, 0, 0)

    def test_the_chain_follows_the_documented_formula(self, rec: Recorder) -> None:
        rec.append(batch("a", "a", 2) + batch("b", "b", 2))
        rec.append(
            [wire_event("question.generated", "a", 2, "qg", question_id="q9", mode="free", text="Ünïcode ∑ text")]
        )
        for run in ("a", "b"):
            prev = GENESIS_HASH
            for e in rec.raw(run):  # data as stored (long texts named by their hash)
                assert e.prev_hash == prev and e.hash == _expected_hash(prev, run, e)
                prev = e.hash

    def test_the_chain_is_the_same_on_every_backend(self, rec: Recorder) -> None:
        """The hashes cover only the canonical event (not seq, time or backend)."""
        reference = open_log(f"memory://{uuid.uuid4().hex}")
        for r in (rec, reference):
            r.append(three_rounds().events())
        assert [e.hash for e in rec.read("r")] == [e.hash for e in reference.read("r")]

    # --- reads -------------------------------------------------------------------------------

    def test_reads_by_type_round_range_and_limit(self, rec: Recorder) -> None:
        log = three_rounds()
        rec.append(log.events())
        rows = log.rows()
        assert [(r.seq, r.round, r.type) for r in rec.rows("r")] == [(r.seq, r.round, r.type) for r in rows]
        assert [payload(r) for r in rec.rows("r", texts=True)] == [payload(r) for r in rows]
        assert [e.seq for e in rec.read("r", types=(RoundCommitted,))] == [
            r.seq for r in rows if r.type == "round.committed"
        ]
        assert [e.seq for e in rec.read("r", in_round=2)] == [r.seq for r in rows if r.round == 2]
        assert [e.seq for e in rec.read("r", after_seq=3, upto_seq=6)] == [4, 5, 6]
        assert [e.seq for e in rec.read("r", limit=2)] == [1, 2]
        assert list(rec.read("r", types=())) == [] and list(rec.rows("r", types=set())) == []
        assert {r._data for r in rec.rows("r", data=False)} == {None}
        assert rec.event_at("r", 3).seq == 3 and rec.event_at("r", 999) is None  # type: ignore[union-attr]

    def test_reads_by_the_ids_events_name(self, rec: Recorder) -> None:
        rec.append(three_rounds().events())
        got = list(rec.read("r", keys={"cause_id": ["C1"], "active_cause": ["C1"]}))
        assert [e.type for e in got] == [
            "cause.created",
            "question.generated",
            "question.generated",
            "failure.attributed",
            "question.generated",
        ]
        assert [e.type for e in rec.read("r", keys={"cause_id": ["C1"]}, types=(FailureAttributed,))] == [
            "failure.attributed"
        ]
        assert [e.round for e in rec.read("r", keys={"active_cause": ["C1"]}, in_round=2)] == [2]
        assert [e.seq for e in rec.read("r", keys={"active_cause": ["C1"]}, limit=2)] == [
            e.seq for e in got if e.type == "question.generated"
        ][:2]
        assert list(rec.read("r", keys={"question_id": []})) == []
        with pytest.raises(StoreError, match="cannot be looked up"):
            list(rec.read("r", keys={"label": ["x"]}))

    def test_counts_and_the_newest_events_of_a_read(self, rec: Recorder) -> None:
        log = three_rounds()
        for i in range(5):
            log.attribute("C1", f"g{i}")
        rec.append(log.events())
        rec.append(batch("other", "o", 3))
        rows = log.rows()
        attributed = [r.seq for r in rows if r.type == "failure.attributed"]
        assert rec.count("r") == len(rows) and rec.count("other") == 3 and rec.count("nope") == 0
        assert rec.count("r", keys={"cause_id": ["C1"]}, types=(FailureAttributed,)) == len(attributed) == 6
        assert rec.count("r", types=(RoundCommitted,)) == 3 and rec.count("r", in_round=2) == sum(
            r.round == 2 for r in rows
        )
        assert rec.count("r", after_seq=3, upto_seq=6) == 3 and rec.count("r", types=()) == 0
        # an id named by two fields is counted once
        assert rec.count("r", keys={"cause_id": ["C1"], "active_cause": ["C1"]}) == len(
            list(rec.read("r", keys={"cause_id": ["C1"], "active_cause": ["C1"]}))
        )
        newest = list(rec.read("r", keys={"cause_id": ["C1"]}, types=(FailureAttributed,), limit=2, newest=True))
        assert [e.seq for e in newest] == attributed[-2:] and [e.event.failure_id for e in newest] == ["g3", "g4"]
        assert [e.seq for e in rec.read("r", limit=3, newest=True)] == [r.seq for r in rows][-3:]
        assert [e.seq for e in rec.read("r", types=(RoundCommitted,), limit=1, newest=True)] == [
            [r.seq for r in rows if r.type == "round.committed"][-1]
        ]
        assert [
            e.seq for e in rec.read("r", keys={"cause_id": ["C1"], "active_cause": ["C1"]}, limit=2, newest=True)
        ] == attributed[-2:]
        assert list(rec.read("r", limit=0, newest=True)) == []

    def test_a_long_read_streams_in_order(self, rec: Recorder) -> None:
        n = 10_000  # more than one fetch
        rec.append(batch("r", "e", n))
        assert [r.seq for r in rec.rows("r")] == list(range(1, n + 1))
        assert sum(1 for _ in rec.read("r", texts=True)) == n

    def test_runs_in_order_of_first_event_and_the_latest_run(self, rec: Recorder) -> None:
        rec.append(batch("b", "b", 1))
        rec.append(batch("a", "a", 1))
        assert rec.runs() == ["b", "a"] and rec.latest_run() == "a"
        rec.append(batch("b", "b2", 1))
        assert rec.runs() == ["b", "a"] and rec.latest_run() == "b"

    # --- texts ---------------------------------------------------------------------------------

    def test_long_texts_are_named_by_their_hash_and_come_back(self, rec: Recorder) -> None:
        long_text = "Let x be the number of apples. " * 200 + TEXT
        evs = [
            wire_event("question.generated", "r", 1, "g", question_id="q", mode="free", text=long_text),
            wire_event(
                "failure.recorded", "r", 1, "f", failure_id="f1", question_id="q", response="resp", reference=""
            ),
            wire_event("failure.diagnosed", "r", 1, "d", failure_id="f1", raw=long_text),
        ]
        rec.append(evs)
        stored = {r.event_id: json.loads(r.data) for r in rec.raw("r")}
        sha = hashlib.sha256(long_text.encode()).hexdigest()
        assert stored["g"]["text"] == stored["d"]["raw"] == {ARTIFACT_KEY: sha}
        assert stored["f"]["reference"] == ""  # empty strings stay inline
        assert {e.event_id: e.event for e in rec.read("r", texts=True)} == {e.event_id: e.event for e in evs}
        assert [
            payload(r)["text"]
            for r in rec.rows("r", keys={"question_id": ["q"]}, types=(QuestionGenerated,), texts=True)
        ] == [long_text]
        assert verify_chain(rec, "r") == []

    # --- one writer of a run at a time -------------------------------------------------------

    def test_one_writer_of_a_run_at_a_time(self, rec: Recorder) -> None:
        with rec.lease("r", "train pid 1 on h since 10:00"):
            assert rec.lease_holder("r") == "train pid 1 on h since 10:00"
            with pytest.raises(RunBusy, match="run 'r' is being written by train pid 1 on h since 10:00"):
                with rec.lease("r", "another"):
                    pass
            with rec.lease("s", "another"):  # another run: its own lease
                assert rec.lease_holder("s") == "another"
            assert rec.lease_holder("r") == "train pid 1 on h since 10:00"
        assert rec.lease_holder("r") is None and rec.lease_holder("s") is None
        with rec.lease("r", "again"):
            assert rec.lease_holder("r") == "again"

    # --- the views' saved states ------------------------------------------------------------

    def test_a_saved_state_is_read_only_where_the_log_vouches_for_it(self, rec: Recorder) -> None:
        rec.append(three_rounds().events())
        commits = list(rec.read("r", types=(RoundCommitted,)))
        one, two = commits[0], commits[1]
        rec.put_view_states(
            [
                ViewState("memory", "r", 1, one.seq, one.hash, {"at": 1}),
                ViewState("memory", "r", 2, two.seq, two.hash, {"at": 2}),
                ViewState("memory", "r", 3, two.seq, "f" * 64, {"forged": True}),  # names a hash the log never had
                ViewState("stats", "r", 0, two.seq, two.hash, {"n": 1}),
            ]
        )
        assert [s.part for s in rec.view_states("memory", "r")] == [1, 2]
        assert [s.state for s in rec.view_states("memory", "r", latest=True)] == [{"at": 2}]
        assert [s.part for s in rec.view_states("memory", "r", upto=1)] == [1]
        assert [s.part for s in rec.view_states("memory", "r", anchored=False)] == [1, 2, 3]
        rec.put_view_states([ViewState("memory", "r", 1, one.seq, one.hash, {"at": "one"})])  # replaced
        assert rec.view_states("memory", "r", upto=1)[0].state == {"at": "one"}
        assert rec.view_states("memory", "other") == [] and rec.view_states("stats", "r")[0].state == {"n": 1}
        assert rec.drop_view_states("memory", "r") == 3 and rec.view_states("memory", "r", anchored=False) == []
        assert rec.view_states("stats", "r") != []

    def test_snapshots_stats_and_verification_over_the_recorder(self, rec: Recorder) -> None:
        events = three_rounds().events()
        rec.append([e for e in events if e.round <= 2])
        assert refresh(rec, "r") == 2
        saved = rec.view_states("stats", "r")
        assert [s.seq for s in saved] == [rec.last_seq("r")]
        rec.append([e for e in events if e.round > 2])  # round 3: after the saved statistics
        assert refresh(rec, "r") == 1
        assert load_memory(rec, "r", 2).committed == 2
        assert round_stats(rec, "r") == round_stats(rec, "r", cached=False)
        assert [(r.round, r.questions, r.retained, r.active) for r in round_stats(rec, "r")] == [
            (1, 1, 1, 1),
            (2, 1, 1, 1),
            (3, 1, 0, 1),
        ]
        assert verify_run(rec, "r") == []
        (stats,) = rec.view_states("stats", "r")
        edited = dict(
            stats.state, counts={r: dict(c, questions=c["questions"] + 1) for r, c in stats.state["counts"].items()}
        )
        rec.put_view_states([ViewState("stats", "r", 0, stats.seq, stats.hash, edited)])
        assert verify_run(rec, "r") == [
            "the saved statistics differ from the log (a cache: `memory stats` would show them)"
        ]

    # --- property: the log behaves like a dict of first occurrences (per run) ---------------

    @settings(
        max_examples=15,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
    )
    @given(
        batches=st.lists(
            st.lists(st.tuples(st.sampled_from(["r1", "r2"]), st.integers(0, 12)), min_size=1, max_size=6),
            min_size=1,
            max_size=6,
        )
    )
    def test_the_log_matches_a_model_of_first_occurrences(self, rec: Recorder, batches) -> None:  # type: ignore[no-untyped-def]
        salt = uuid.uuid4().hex[:8]  # the fixture's log is shared by the examples: fresh ids for each
        runs = {r: f"{r}-{salt}" for r in ("r1", "r2")}
        model: dict[str, list[str]] = {r: [] for r in runs.values()}
        seen: set[tuple[str, str]] = set()
        for b in batches:
            evs = [scored(runs[r], f"{salt}-{k}", q=f"q{k}") for r, k in b]
            new = 0
            for e in evs:
                if (e.run, e.event_id) not in seen:
                    seen.add((e.run, e.event_id))
                    model[e.run].append(e.event_id)
                    new += 1
            res = rec.append(evs)
            assert (res.appended, res.skipped) == (new, len(evs) - new)
        for run, expected in model.items():
            assert ids(rec, run) == expected and verify_chain(rec, run) == []


class TestSQLite(RecorderContract):
    kind = SQLiteRecorder

    @pytest.fixture
    def url(self, tmp_path: Path) -> Iterator[str]:
        yield f"sqlite:///{tmp_path / 'contract.db'}"


@pytest.mark.postgres
class TestPostgres(RecorderContract):
    kind = PostgresRecorder

    @pytest.fixture
    def url(self, postgres_backend) -> Iterator[str]:  # type: ignore[no-untyped-def]
        yield postgres_backend.fresh_url()


class TestInMemory(RecorderContract):
    kind = InMemoryRecorder

    @pytest.fixture
    def url(self, tmp_path: Path) -> str:
        return f"memory://{uuid.uuid4().hex}"  # lives as long as the test process: a few small logs


def test_an_unknown_memory_log_is_not_created_by_a_reader() -> None:
    with pytest.raises(StoreError, match="no database at memory://"):
        open_log(f"memory://{uuid.uuid4().hex}", create=False)


@pytest.mark.slow
def test_a_simulator_run_on_the_in_memory_recorder(  # type: ignore[no-untyped-def]
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """``diagevo train --db memory://NAME``: the whole loop on the in-memory recorder, whose log
    verifies; the commands it would suggest cannot reach a log that ends with the process."""
    from tests.test_cli_memory import run_cli

    monkeypatch.chdir(tmp_path)  # the vector index of a non-file database goes to the current directory
    url = f"memory://{uuid.uuid4().hex}"
    code, out, err = run_cli(
        capsys,
        "train",
        "--db",
        url,
        "--run",
        "m",
        "--rounds",
        "2",
        "--quiet",
        "--set",
        f'train.out_dir="{tmp_path / "ck"}"',
        "--set",
        "train.challenger_questions=16",
        "--set",
        "train.curriculum_questions=48",
    )
    assert code == 0, err
    assert "memory replay" not in out and "is gone" in out
    with open_log(url, create=False) as store:
        assert [e.round for e in store.read("m", types=(RoundCommitted,))] == [1, 2]
        assert verify_run(store, "m") == []
