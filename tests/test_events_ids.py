"""Event ids are unique per run (migration 0007): an export ingested under another run name is
stored as that run with its own chain, never "0 stored, exit 0"; round-protocol ids that happen
to be equal in two runs are two events; re-appending to the same run stays a no-op."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagevo import rounds
from diagevo.catalog import PhaseCompleted
from diagevo.log import Recorder, open_log
from diagevo.views.verify import verify_run
from tests.conftest import Backend
from tests.logs import Log
from tests.test_cli_memory import run_cli
from tests.test_rounds import promote_on_a_question


def _log(run: str = "a") -> Log:
    log = Log(run)
    log.node("N1").cause("C1", "N1").question("q1", 0.5, active="C1").commit(retained=1)
    return log.question("q2", 0.4, active="C1").commit(retained=1)


def _export(db: str, run: str, path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run_cli(capsys, "memory", "export", "--db", db, "--run", run, "-o", str(path))
    assert code == 0, err
    return path.read_text()


def test_an_export_renamed_by_hand_is_stored_as_that_run(
    backend: Backend, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log()
    (tmp_path / "a.jsonl").write_text(log.jsonl())
    assert run_cli(capsys, "memory", "ingest", str(tmp_path / "a.jsonl"), "--db", db_url)[0] == 0
    exported = _export(db_url, "a", tmp_path / "export.jsonl", capsys)
    edited = "".join(json.dumps({**json.loads(line), "run": "b"}) + "\n" for line in exported.splitlines())
    (tmp_path / "b.jsonl").write_text(edited)  # the hashes name run a: an edited export
    code, out, err = run_cli(capsys, "memory", "ingest", str(tmp_path / "b.jsonl"), "--db", db_url)
    assert code == 1 and "line 1: hash mismatch: event 'a-0'" in err, err
    renamed = "".join(
        json.dumps({**{k: v for k, v in json.loads(line).items() if k != "hash"}, "run": "b"}) + "\n"
        for line in exported.splitlines()
    )
    (tmp_path / "b.jsonl").write_text(renamed)
    code, out, err = run_cli(capsys, "memory", "ingest", str(tmp_path / "b.jsonl"), "--db", db_url, "--json")
    assert code == 0, err
    n = len(log.events())
    assert json.loads(out) == {"lines": n, "appended": n, "skipped": 0, "runs": ["b"]}
    with open_log(db_url, create=False) as store:
        a, b = list(store.read("a", texts=True)), list(store.read("b", texts=True))
        assert [e.event_id for e in a] == [e.event_id for e in b]  # the same ids, two runs
        assert [e.event for e in a] == [e.event for e in b]
        assert a[-1].hash != b[-1].hash  # each its own chain (the run is hashed)
        assert verify_run(store, "a") == [] and verify_run(store, "b") == []
    # ingesting it again is the idempotent no-op it says it is
    code, out, _ = run_cli(capsys, "memory", "ingest", str(tmp_path / "b.jsonl"), "--db", db_url, "--json")
    assert code == 0 and json.loads(out)["appended"] == 0 and json.loads(out)["skipped"] == n


def test_ingest_as_another_run_rebases_the_ids(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with open_log(db_url) as store:
        rounds.start_run(store, "src", {"k": 0.5})
        rnd = rounds.Round.open(store, "src")
        promote_on_a_question(rnd)
        rnd.commit({"acc": 0.5})
    exported = _export(db_url, "src", tmp_path / "src.jsonl", capsys)
    code, out, err = run_cli(
        capsys, "memory", "ingest", str(tmp_path / "src.jsonl"), "--run", "copy", "--db", db_url, "--json"
    )
    assert code == 0, err
    assert json.loads(out)["appended"] == len(exported.splitlines()) and json.loads(out)["runs"] == ["copy"]
    with open_log(db_url, create=False) as store:
        ids = [e.event_id for e in store.read("copy")]
        assert ids[0] == "copy/0/run.started" and all(i.startswith("copy/") for i in ids)
        assert verify_run(store, "copy") == []
        promote_on_a_question(rounds.Round.open(store, "copy"))  # the protocol resumes the copy as its own run


def test_ingest_as_another_run_needs_a_file_of_one_run(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "two.jsonl").write_text(_log("a").jsonl() + _log("b").jsonl())
    code, _out, err = run_cli(capsys, "memory", "ingest", str(tmp_path / "two.jsonl"), "--run", "c", "--db", db_url)
    assert code != 0 and len(err.strip().splitlines()) == 1 and "only a file of one run can become another run" in err


def test_protocol_ids_equal_across_runs_do_not_collide(store: Recorder) -> None:
    """``RUN/T/KEY`` of run ``x/1`` round 1 key ``k`` equals run ``x`` round 1 key ``1/k``."""
    for run in ("x", "x/1"):
        rounds.start_run(store, run, {"k": 0.5})
        rounds.open_round(store, run)
    rounds.Round(store, "x", 1).note("1/k", PhaseCompleted(phase="a", **{"seconds": 1.0}))
    rounds.Round(store, "x/1", 1).note("k", PhaseCompleted(phase="b", **{"seconds": 2.0}))
    (a,) = store.read("x", types=(PhaseCompleted,))
    (b,) = store.read("x/1", types=(PhaseCompleted,))
    assert a.event_id == b.event_id == "x/1/1/k"
    assert (a.event.phase, b.event.phase) == ("a", "b")
    rounds.Round(store, "x/1", 1).note("k", PhaseCompleted(phase="b", **{"seconds": 2.0}))  # a retry: no-op
    assert len(list(store.read("x/1", types=(PhaseCompleted,)))) == 1
