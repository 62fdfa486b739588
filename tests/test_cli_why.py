"""``memory why`` of a cause with many attributions: the head of its story and the most recent
attributions, with how many more; every one with --all or --json. What is read is counted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagevo.log import open_log
from diagevo.log.sql import SQLRecorder
from diagevo.views.caches import refresh
from diagevo.views.stories import RECENT
from tests.logs import Log
from tests.test_cli_memory import run_cli

MANY = 3000


def busy_cause(run: str = "r1") -> Log:
    """C1 created from f0, promoted, reactivated by f1 (the attribution explaining it), then
    attributed MANY times."""
    log = Log(run)
    log.add("question.generated", question_id="q0", mode="free", text="Solve sqrt(x+6) = x")
    log.add("failure.recorded", failure_id="f0", question_id="q0", response="x=3 or x=-2", reference="x=3")
    log.node("N1", "roots").cause("C1", "N1", "keeps a root that fails the check", failure="f0")
    log.commit()
    log.add("cause.promoted", cause_id="C1", acc=0.8, n_candidates=4)
    log.commit()
    log.add("cause.reactivated", cause_id="C1", failure_id="f1")
    log.attribute("C1", "f1", via="recurrence", similarity=0.91)
    for i in range(MANY - 1):
        log.attribute("C1", f"g{i}", similarity=0.8)
    log.commit()
    return log


@pytest.fixture()
def db(db_url: str) -> str:  # SQLite and PostgreSQL (tests/conftest.py)
    """The busy cause's log with the memory's snapshots a writer leaves (each commit's): what
    ``why`` reads to know which rows the rules refused is the log after the last snapshot."""
    with open_log(db_url) as store:
        store.append(busy_cause().events())
        refresh(store, "r1")
    return db_url


@pytest.fixture()
def fetched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows the SQL recorders fetched, one entry per read."""
    counts: list[int] = []
    original = SQLRecorder._fetch

    def counting(self: SQLRecorder, *args: Any, **kw: Any) -> Iterator[Any]:
        n = 0
        for row in original(self, *args, **kw):
            n += 1
            yield row
        counts.append(n)

    monkeypatch.setattr(SQLRecorder, "_fetch", counting)
    return counts


def test_why_shows_the_head_and_the_recent_attributions(
    db: str, capsys: pytest.CaptureFixture[str], fetched: list[int]
) -> None:
    code, out, err = run_cli(capsys, "memory", "why", "C1", "--db", db)
    assert code == 0, err
    text = " ".join(out.split())
    assert "created under N1" in text and "promoted to Mastered" in text and "reactivated by failure f1" in text
    assert "via recurrence, similarity 0.910" in text  # the attribution that explains the reactivation
    assert f"g{MANY - 2} " in text and "g0 " not in text  # the newest attribution shown, the oldest not
    more = MANY - RECENT - 1  # the one explaining the reactivation is shown too
    assert f"{MANY:,} attributions in all" in text and f"... {more:,} more attributions (use --all)" in text
    assert sum(fetched) < 100  # the rows read do not grow with the attributions
    assert len(out.splitlines()) < 60


def test_why_all_and_json_show_every_attribution(
    db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "memory", "why", "C1", "--db", db, "--all")
    assert code == 0, err
    assert "g0 " in out and f"g{MANY - 2} " in out and "more attributions" not in out
    assert sum("attributed via" in line for line in out.splitlines()) == MANY
    story = json.loads(run_cli(capsys, "memory", "why", "C1", "--db", db, "--json")[1])
    assert sum(e["kind"] == "attributed" for e in story["timeline"]) == MANY
    assert story["attributions"] == MANY and story["more_attributions"] == 0


def test_why_of_a_quiet_cause_has_no_more_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'q.db'}"
    log = Log()
    log.node("N1", "roots").cause("C1", "N1", "keeps a root")
    log.attribute("C1", "f1").commit()
    with open_log(db) as store:
        store.append(log.events())
    code, out, _ = run_cli(capsys, "memory", "why", "C1", "--db", db)
    assert code == 0 and "more attributions" not in out and "f1 (" not in out and "failure f1" in out
