"""``memory ingest`` decides once, under the append lock, against the log's head: two ingests of
one run at once cannot both commit a round, and a line whose id the run holds is skipped only
when it is that very event."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diagevo.catalog import RoundCommitted
from diagevo.interchange import IngestError, ingest
from diagevo.log import Recorder, open_log
from diagevo.views.verify import verify_run
from tests.conftest import Backend
from tests.logs import Log

ROOT = Path(__file__).resolve().parent.parent


def one_round(run: str, questions: int, tag: str) -> str:
    """Round 1 of ``run``: its run.started the same whatever the tag, every other id the tag's."""
    log = Log(run)
    log.node("N1").cause("C1", "N1")
    for i in range(questions):
        log.question(f"{tag}{i}", 0.5, active="C1")
    lines = [json.loads(line) for line in log.commit().jsonl().splitlines()]
    for line in lines[1:]:
        line["event_id"] = f"{tag}-{line['event_id']}"
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_a_stored_id_with_other_content_is_a_conflict_named_and_nothing_is_stored(store: Recorder) -> None:
    log = Log("r").node("N1").commit()
    ingest(store, log.jsonl())
    lines = log.jsonl().splitlines()
    started, committed = json.loads(lines[0]), json.loads(lines[-1])
    reused = {**committed, "round": 2, "event_id": json.loads(lines[1])["event_id"]}  # round.started's... node's id
    with pytest.raises(IngestError, match=r"line 2: event id 'r-1' of run 'r' is stored already as another event"):
        ingest(store, json.dumps(started) + "\n" + json.dumps(reused) + "\n")
    assert store.last_seq("r") == len(lines)
    again = ingest(store, log.jsonl())  # the same events: skipped
    assert (again.appended, again.skipped) == (0, len(lines))


def test_a_line_reusing_a_stored_id_for_another_type_is_refused(store: Recorder) -> None:
    """The issue's case: a ``round.committed`` reusing the id of ``round.started`` was dropped
    as "already stored" and the round stayed open."""
    log = Log("r")
    log.add("round.started")
    ingest(store, log.jsonl())
    started = json.loads(log.jsonl().splitlines()[1])
    commit = {**started, "type": "round.committed"}
    with pytest.raises(IngestError, match="stored already as another event"):
        ingest(store, json.dumps(commit) + "\n")


@pytest.mark.parametrize("attempt", range(3))
def test_two_ingests_of_one_run_at_once_commit_its_round_once(
    backend: Backend, db_url: str, tmp_path: Path, attempt: int
) -> None:
    big = tmp_path / "big.jsonl"
    small = tmp_path / "small.jsonl"
    big.write_text(one_round("r", 2000, "a"))
    small.write_text(one_round("r", 1, "b"))  # the same run.started, another round 1
    with open_log(db_url):
        pass  # migrated before the race (the race of creation is another test's)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmds = [[sys.executable, "-m", "diagevo.cli.app", "memory", "ingest", str(f), "--db", db_url] for f in (big, small)]
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    outs = [(p.wait(timeout=600), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in outs)
    assert codes == [0, 1], outs
    (err,) = [e for code, _, e in outs if code == 1]
    assert "round 1 committed twice" in err or "round 1 goes backwards" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    with open_log(db_url, create=False) as log:
        assert [e.round for e in log.read("r", types=(RoundCommitted,))] == [1]
        assert verify_run(log, "r") == []
