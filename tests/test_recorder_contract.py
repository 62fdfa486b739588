"""One contract, every recorder: the same abstract test class runs against SQLite, PostgreSQL
and the in-memory recorder (as pyeventsourcing tests its recorders)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from diagevo.events.inmemory import InMemoryRecorder, forget
from diagevo.events.postgres import PostgresRecorder
from diagevo.events.recorder import GENESIS_HASH, AppendResult, ConflictError, Recorder, StoreError
from diagevo.events.schemas import new_event
from diagevo.events.sqlite import SQLiteRecorder
from diagevo.events.store import EventStore
from diagevo.memory.audit import round_stats
from diagevo.replay import load_memory, refresh_snapshots, stored_round_stats, verify_run
from tests.logs import Log

TEXT = "What is 6 × 7? ünïcødé\u2028"


def scored(run: str, eid: str, q: str = "q1", retained: bool = True, round: int = 1):  # type: ignore[no-untyped-def]
    return new_event("question.scored", run, round, eid, question_id=q, n=8, p1=0.5, p2=0.5,
                     pseudo_label="1", retained=retained, reference="")


def three_rounds(run: str = "r") -> Log:
    log = Log(run)
    log.node("N1").cause("C1", "N1").question("q1", 0.5, active="C1").commit(retained=1)
    log.question("q2", 0.4, active="C1").attribute("C1", "f2").commit(retained=1)
    return log.question("q3", 0.6, active="C1", retained=False).commit(retained=0)


class RecorderContract:
    """What every recorder must do; a subclass gives ``url``."""

    kind: type[Recorder]

    @pytest.fixture
    def url(self, tmp_path: Path) -> Iterator[str]:
        raise NotImplementedError

    @pytest.fixture
    def rec(self, url: str) -> Iterator[Recorder]:
        r = EventStore(url)
        yield r
        r.close()

    def test_the_url_picks_this_recorder_and_it_implements_the_interface(self, rec: Recorder) -> None:
        assert type(rec) is self.kind
        assert len(Recorder.__abstractmethods__) > 20  # the interface as declared
        for name in Recorder.__abstractmethods__:
            member = getattr(Recorder, name)
            assert getattr(type(rec), name) is not member, f"{self.kind.__name__} does not implement {name}"

    def test_append_numbers_and_chains_per_run(self, rec: Recorder) -> None:
        res = rec.append([scored("a", "a1"), scored("b", "b1"), scored("a", "a2")])
        assert res == AppendResult(3, 0, 3)
        assert [(e.seq, e.event_id) for e in rec.read("a")] == [(1, "a1"), (3, "a2")]
        first, second = rec.read("a")
        assert first.prev_hash == GENESIS_HASH and second.prev_hash == first.hash
        assert rec.verify_chain("a") == [] and rec.verify_chain("b") == []
        assert rec.runs() == ["a", "b"] and rec.latest_run() == "a"
        assert rec.last_seq("a") == 3 and rec.last_seq("nope") == 0 and rec.has_run("b") and not rec.has_run("c")

    def test_ids_are_idempotent_per_run(self, rec: Recorder) -> None:
        rec.append([scored("a", "x")])
        assert rec.append([scored("a", "x"), scored("a", "y")]) == AppendResult(1, 1, 2)
        assert rec.append([scored("b", "x")]).appended == 1  # another run: another event
        assert rec.append([scored("a", "z"), scored("a", "z")]) == AppendResult(1, 1, 4)
        assert rec.existing_ids("a", ["x", "y", "w"]) == {"x", "y"}
        assert rec.existing_keys([("a", "x"), ("b", "y"), ("b", "x")]) == {("a", "x"), ("b", "x")}

    def test_expected_position(self, rec: Recorder) -> None:
        rec.append([scored("a", "a1")])
        with pytest.raises(ConflictError, match="is at seq 1, expected 0"):
            rec.append([scored("a", "a2")], expected_last_seq=0)
        assert rec.append([scored("a", "a2")], expected_last_seq=1).appended == 1
        with pytest.raises(StoreError, match="single run"):
            rec.append([scored("a", "a3"), scored("b", "b1")], expected_last_seq=2)
        assert rec.last_seq("a") == 2 and not rec.has_run("b")

    def test_append_checked_reads_then_appends_or_stores_nothing(self, rec: Recorder) -> None:
        rec.append([scored("a", "a1"), scored("a", "a2", round=2)])
        seen = []

        def decide(read):  # type: ignore[no-untyped-def]
            seen.extend(read(("question.scored",), round=2))
            return [scored("a", "a3", round=2)]

        assert rec.append_checked("a", decide).appended == 1 and [s[0] for s in seen] == [2]

        def refuse(read):  # type: ignore[no-untyped-def]
            raise ValueError("no")

        with pytest.raises(ValueError):
            rec.append_checked("a", refuse)
        assert rec.last_seq("a") == 3
        assert rec.append_checked("a", lambda read: []) == AppendResult(0, 0, 3)

    def test_reads_by_type_round_range_and_limit(self, rec: Recorder) -> None:
        log = three_rounds()
        rec.append(log.events())
        rows = log.rows()
        assert [(s, r, t) for s, r, t, _ in rec.iter_rows("r")] == [(s, r, t) for s, r, t, _ in rows]
        assert [e.seq for e in rec.read("r", types=("round.committed",))] == [s for s, _, t, _ in rows if t == "round.committed"]
        assert [e.seq for e in rec.read("r", round=2)] == [s for s, r, _, _ in rows if r == 2]
        assert [e.seq for e in rec.read("r", after_seq=3, upto_seq=6)] == [4, 5, 6]
        assert [e.seq for e in rec.read("r", limit=2)] == [1, 2]
        assert list(rec.read("r", types=())) == []
        assert rec.type_counts("r", round=3) == {(3, "question.generated"): 1, (3, "question.scored"): 1, (3, "round.committed"): 1}
        (g3,) = rec.read("r", round=3, types=("question.generated",))
        assert rec.type_counts("r", after_seq=g3.seq - 1, upto_seq=g3.seq + 1) == {
            (3, "question.generated"): 1, (3, "question.scored"): 1
        }
        assert rec.retained_counts("r") == {1: 1, 2: 1}

    def test_read_naming_finds_the_events_naming_an_id(self, rec: Recorder) -> None:
        rec.append(three_rounds().events())
        got = rec.read_naming("r", {"cause_id": ["C1"], "active_cause": ["C1"]})
        assert [e.type for e in got] == ["cause.created", "question.generated", "question.generated",
                                         "failure.attributed", "question.generated"]
        assert [e.type for e in rec.read_naming("r", {"cause_id": ["C1"]}, types=("failure.attributed",))] == ["failure.attributed"]
        with pytest.raises(StoreError, match="cannot be looked up"):
            rec.read_naming("r", {"label": ["x"]})

    def test_texts_are_artifacts_keyed_by_their_hash(self, rec: Recorder) -> None:
        import hashlib

        rec.append([new_event("question.generated", "r", 1, "g", question_id="q", mode="free", text=TEXT)])
        sha = hashlib.sha256(TEXT.encode()).hexdigest()
        (raw,) = rec.read("r")
        assert raw.data["text"] == {"$artifact": sha}
        (full,) = rec.read("r", texts=True)
        assert full.data["text"] == TEXT and rec.artifact(sha) == TEXT
        assert rec.read_naming("r", {"question_id": ["q"]}, texts=True)[0].data["text"] == TEXT
        assert rec.verify_artifacts("r") == []

    def test_snapshots_and_checkpoints(self, rec: Recorder) -> None:
        log = three_rounds()
        rec.append(log.events())
        assert refresh_snapshots(rec, "r") == 3
        commits = [e for e in rec.read("r", types=("round.committed",))]
        assert rec.snapshot_anchors("r") == [(e.round, e.seq, e.hash) for e in commits]
        assert rec.event_at("r", commits[0].seq) == (1, "round.committed", commits[0].hash)
        assert rec.event_at("r", 999) is None
        assert load_memory(rec, "r", 2).committed == 2 and rec.get_snapshot("r", 2) is not None
        assert rec.latest_snapshot("r", upto_round=2)[0] == 2  # type: ignore[index]
        rec.set_checkpoint("vector_index", "r", 5, {"model": "m"})
        assert rec.get_checkpoint("vector_index", "r") == 5 and rec.checkpoint_info("vector_index", "r") == {"model": "m"}
        assert rec.checkpoints("r") == {"stats": rec.last_seq("r"), "vector_index": 5}  # stats: refresh_snapshots
        assert verify_run(rec, "r") == []
        assert rec.drop_snapshots("r") == 3 and rec.snapshots("r") == []

    def test_the_stats_read_model_reads_only_the_log_after_it(self, rec: Recorder) -> None:
        events = three_rounds().events()
        rec.append([e for e in events if e.round <= 2])
        refresh_snapshots(rec, "r")  # moves the stats read model to the end of round 2
        at = rec.get_checkpoint("stats", "r")
        assert at == rec.last_seq("r") > 0
        rec.append([e for e in events if e.round > 2])  # round 3: not in the read model
        full = round_stats(rec.iter_rows("r"), "r")
        assert stored_round_stats(rec, "r") == stored_round_stats(rec, "r", cached=False)
        assert [(r["round"], r["questions"], r["active"]) for r in stored_round_stats(rec, "r")] == [
            (r["round"], r["questions"], r["active"]) for r in full
        ] == [(1, 1, 1), (2, 1, 1), (3, 1, 1)]
        assert verify_run(rec, "r") == []
        info = rec.checkpoint_info("stats", "r")
        info["counts"] = [[r, t, n + 1] for r, t, n in info["counts"]]  # an edited cache
        rec.set_checkpoint("stats", "r", at, info)
        assert verify_run(rec, "r") == ["the stats read model differs from the log (a cache: `memory stats` would show it)"]

    def test_the_chain_is_the_same_on_every_backend(self, rec: Recorder) -> None:
        """The hashes cover only the canonical event (not seq, time or backend): the same log
        chains to the same hashes everywhere."""
        reference = InMemoryRecorder(f"memory://{uuid.uuid4().hex}")
        for r in (rec, reference):
            r.append(three_rounds().events())
        assert [e.hash for e in rec.read("r")] == [e.hash for e in reference.read("r")]
        forget(reference.url)


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
    def url(self, tmp_path: Path) -> Iterator[str]:
        url = f"memory://{uuid.uuid4().hex}"
        yield url
        forget(url)


def test_an_unknown_memory_log_is_not_created_by_a_reader() -> None:
    with pytest.raises(StoreError, match="no database at memory://"):
        EventStore(f"memory://{uuid.uuid4().hex}", create=False)


@pytest.mark.slow
def test_a_simulator_run_on_the_in_memory_recorder(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``diagevo train --db memory://NAME``: the whole loop on the in-memory recorder, whose log
    verifies; the commands it would suggest cannot reach a log that ends with the process."""
    from tests.test_cli_memory import run_cli

    monkeypatch.chdir(tmp_path)  # the vector index of a non-file database goes to the current directory
    url = f"memory://{uuid.uuid4().hex}"
    code, out, err = run_cli(capsys, "train", "--db", url, "--run", "m", "--rounds", "2", "--quiet",
                             "--set", f'train.out_dir="{tmp_path / "ck"}"', "--set", "train.challenger_questions=16",
                             "--set", "train.curriculum_questions=48")
    assert code == 0, err
    assert "memory replay" not in out and "is gone" in out
    with EventStore(url, create=False) as store:
        assert [e.round for e in store.read("m", types=("round.committed",))] == [1, 2]
        assert verify_run(store, "m") == []
    forget(url)
