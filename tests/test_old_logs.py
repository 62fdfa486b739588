"""A log written before the events were typed reads, folds and verifies as it did, and exports
byte for byte. The fixture is a 2-round simulator run written by diagevo at 7bce34b (``diagevo
train --rounds 2 --set train.challenger_questions=8 --set train.curriculum_questions=24``, then
``memory export``), with what that diagevo printed for ``memory replay --round 2 --json``,
``memory stats --json`` and ``memory verify --json`` of it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from diagevo.catalog import FailureDiagnosed, RoundCommitted, RunStarted
from diagevo.interchange import ingest
from diagevo.log import open_log
from tests.test_cli_memory import run_cli

OLD = Path(__file__).parent / "data" / "old_logs"
LOG = OLD / "7bce34b-sim-2-rounds.jsonl"


def _printed(name: str) -> object:
    return json.loads((OLD / f"7bce34b-sim-2-rounds.{name}.json").read_text(encoding="utf-8"))


def test_an_old_log_ingests_folds_verifies_and_exports_byte_identically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'old.db'}"
    code, _, err = run_cli(capsys, "memory", "ingest", str(LOG), "--db", db)
    assert code == 0, err
    for args, printed in (
        (("memory", "replay", "--round", "2", "--json"), "replay2"),
        (("memory", "stats", "--json"), "stats"),
        (("memory", "verify", "--json"), "verify"),
    ):
        code, out, err = run_cli(capsys, *args, "--db", db, "--run", "fx")
        assert code == 0, err
        assert json.loads(out) == _printed(printed), args
    exported = tmp_path / "again.jsonl"
    code, _, err = run_cli(capsys, "memory", "export", "--run", "fx", "--db", db, "-o", str(exported))
    assert code == 0, err
    # every byte the same but when each event was appended here (export's ``recorded_at``)
    assert _appended_at(exported.read_bytes()) == _appended_at(LOG.read_bytes())
    assert exported.read_bytes() != LOG.read_bytes()  # the mask above hides a difference there is


def _appended_at(jsonl: bytes) -> bytes:
    return re.sub(rb'"recorded_at":"[^"]*"', b'"recorded_at":""', jsonl)


def test_an_old_log_reads_as_typed_events_upcast_to_their_class(tmp_path: Path) -> None:
    """Its diagnoses have no ``call`` (a field of version 2 of ``failure.diagnosed``): read, it
    is there as None; stored, it is still absent."""
    lines = [json.loads(line) for line in LOG.read_text(encoding="utf-8").splitlines()]
    started = next(line for line in lines if line["type"] == RunStarted.name)
    assert all("call" not in line["data"] for line in lines if line["type"] == FailureDiagnosed.name)
    db = f"sqlite:///{tmp_path / 'old.db'}"
    with open_log(db) as store:
        ingest(store, LOG.read_text(encoding="utf-8"))
        (first,) = store.read("fx", types=(RunStarted,))
        event = first.event
        assert isinstance(event, RunStarted) and event.config == started["data"]["config"]
        assert event.trainer == started["data"]["trainer"] == "diagevo train"
        stored = list(store.read("fx", types=(FailureDiagnosed,)))
        assert stored and all(
            "call" not in json.loads(r.data) for r in store.raw("fx") if r.type == FailureDiagnosed.name
        )
        assert all(isinstance(e.event, FailureDiagnosed) and e.event.call is None for e in stored)
        commits = [e.round for e in store.read("fx", types=(RoundCommitted,))]
        assert commits == [1, 2]
