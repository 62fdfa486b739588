"""The log at scale: the read indexes, indexed reads and the reads that replace scans.
Each read is checked against the full-scan projection it replaces, on every backend."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterable

from diagevo.catalog import CATALOG, FailureAttributed, FailureRecorded, RoundCommitted
from diagevo.log import Recorder, open_log, payload, sqlite_path
from diagevo.log.recorder import Query
from diagevo.memory.fold import Row, commits, drafts
from diagevo.results.stats import RoundRow
from diagevo.views.caches import refresh
from diagevo.views.memory import commit_memories
from diagevo.views.stats import RoundStats, round_stats
from diagevo.views.stories import cause_rows, cause_stories, cause_story, story_events
from tests.logs import Log
from tests.strategies import random_log


def _stored(db_url: str, log: Log) -> None:
    with open_log(db_url) as store:
        store.append(log.events())


def test_key_lookups_use_the_expression_indexes(tmp_path) -> None:  # noqa: ANN001
    url = f"sqlite:///{tmp_path / 'x.db'}"
    open_log(url).close()
    conn = sqlite3.connect(sqlite_path(url))
    for field in ("cause_id", "failure_id", "question_id", "matched_cause"):
        plan = conn.execute(
            f"EXPLAIN QUERY PLAN SELECT seq FROM events WHERE run_id = 'r' AND {field} IN ('x', 'y')"
        ).fetchall()
        assert f"ix_events_{field}" in str(plan)
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT round, type, COUNT(*) FROM events WHERE run_id = 'r' GROUP BY round, type"
    ).fetchall()
    assert "COVERING INDEX ix_events_run_round_type" in str(plan)
    plan = conn.execute(  # the statistics' tail after their saved state
        "EXPLAIN QUERY PLAN SELECT seq, round, type, data FROM events WHERE run_id = 'r' AND seq > 5 ORDER BY seq"
    ).fetchall()
    assert "ix_events_run_seq" in str(plan) and "TEMP B-TREE" not in str(plan)
    conn.close()


def test_a_lookup_by_id_walks_its_index_not_the_whole_run(tmp_path) -> None:  # noqa: ANN001
    """A read by ids in seq order (what each flush of a round's decisions checks: the event ids
    held, the failures' evidence) finds its rows through the id's index and sorts those few:
    SQLite's planner would otherwise walk the whole run in seq order, a cost that grows with the
    run at every flush."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with open_log(url) as store:
        reads = [
            *store._where(Query("r", keys={"event_id": ["a", "b"]})),
            *store._where(Query("r", keys={"failure_id": ["f1", "f2"]})),
            *store._where(Query("r", types=(FailureRecorded,), keys={"failure_id": ["f1"]})),
        ]
    conn = sqlite3.connect(sqlite_path(url))
    for (where, params), index in zip(
        reads, ("uq_events_run_event_id", "ix_events_failure_id", "ix_events_failure_id")
    ):
        plan = str(conn.execute(f"EXPLAIN QUERY PLAN SELECT * FROM events {where}", params).fetchall())
        assert f"USING INDEX {index}" in plan and "ix_events_run_seq" not in plan, plan
    conn.close()


def test_a_causes_attributions_are_counted_and_paged_in_its_index(tmp_path) -> None:  # noqa: ANN001
    """``memory why`` of a cause attributed tens of thousands of times reads a page: the count of
    its attributions and its newest ones come from the cause's index (which holds the type,
    0017) without a row of the table read for its type or a sort of them all; ``memory events
    --cause`` reads the first page of each cause field's index in seq order."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with open_log(url) as store:
        attributed = (FailureAttributed,)
        (count,) = store._where(Query("r", types=attributed, keys={"cause_id": ["c"]}), ordered=False)
        (newest,) = store._where(Query("r", types=attributed, keys={"cause_id": ["c"]}), ordered=False)
        firsts = list(store._where(Query("r", keys={f: ["c"] for f in ("cause_id", "active_cause")})))
    conn = sqlite3.connect(sqlite_path(url))

    def plan(sql: str, params: list[object]) -> str:
        return str(conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall())

    assert "USING COVERING INDEX ix_events_cause_id" in plan(f"SELECT COUNT(*) FROM events {count[0]}", count[1])
    page = plan(f"SELECT * FROM events {newest[0]} ORDER BY seq DESC LIMIT 10", newest[1])
    assert "USING INDEX ix_events_cause_id" in page and "TEMP B-TREE" not in page, page
    for (where, params), field in zip(firsts, ("cause_id", "active_cause")):
        first = plan(f"SELECT * FROM events {where} LIMIT 201", params)
        assert f"USING INDEX ix_events_{field}" in first and "TEMP B-TREE" not in first, first
    conn.close()


def test_cause_rows_tell_every_story_as_the_full_log_does(store: Recorder) -> None:
    log = random_log(random.Random(11), 6)
    store.append(log.events())
    full = cause_stories(story_events(log.rows()))
    assert len(full) >= 2
    for cause, story in full.items():
        assert cause_story(cause_rows(store, log.run, cause), cause) == story


def scan(rows: Iterable[Row], run: str) -> list[RoundRow]:
    """The rows of a run's statistics from its events alone, in one pass with no saved state:
    the definition :func:`round_stats` must equal."""
    acc = RoundStats()
    for draft, row in drafts(rows, run):
        acc.add(row)
        if CATALOG[row.type] is RoundCommitted:
            acc.commit(draft.freeze())
    return acc.rows()


def test_round_stats_equal_the_scan_with_and_without_saved_states(store: Recorder) -> None:
    log = random_log(random.Random(5), 6)
    log.add("eval.recorded", benchmark="gsm8k", accuracy=0.25)  # a retrospective score of round 6
    store.append(log.events())
    want = scan(log.rows(), log.run)
    assert round_stats(store, log.run) == want  # nothing saved: folds the log
    refresh(store, log.run)
    assert round_stats(store, log.run) == want  # from the saved statistics and snapshots
    assert [m.to_json() for m in commit_memories(store, log.run)] == [m.to_json() for m in commits(log.rows(), log.run)]


def test_reads_by_id_and_round(store: Recorder) -> None:
    log = random_log(random.Random(7), 3)
    store.append(log.events())
    rows = log.rows()
    for rnd in (1, 2, 3):
        got = [(e.round, e.type) for e in store.read(log.run, in_round=rnd)]
        assert got == [(r.round, r.type) for r in rows if r.round == rnd]
    assert len(list(store.read(log.run, limit=5))) == 5
    fid = next(payload(r)["failure_id"] for r in rows if r.type == "failure.recorded")
    got = [e.type for e in store.read(log.run, keys={"failure_id": [fid]})]
    assert got == [r.type for r in rows if payload(r).get("failure_id") == fid]


def test_runs_in_order_of_their_first_event(store: Recorder) -> None:
    assert store.runs() == []
    for run in ("zeta", "alpha", "mid"):
        store.append(Log(run=run).events())
    store.append(Log(run="alpha").add("round.started").events()[1:])
    assert store.runs() == ["zeta", "alpha", "mid"]
    assert store.existing_ids("zeta", ["zeta-0", "nope", "mid-0"]) == {"zeta-0"}
    assert store.existing_ids("mid", ["zeta-0", "mid-0"]) == {"mid-0"}


def test_the_cli_imports_no_heavy_library_before_a_command_needs_it() -> None:
    import subprocess
    import sys

    heavy = (
        "pydantic",
        "sqlalchemy",
        "alembic",
        "polars",
        "torch",
        "transformers",
        "diagevo.config.sections",
        "asyncio",
    )
    heavy += ("diagevo.config.base", "diagevo.train.config")
    code = f"import sys, diagevo.cli.app; print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == []


def test_the_read_commands_build_no_event_model() -> None:
    """Opening the store and reading (what ``memory why/stats/events`` do) needs no pydantic
    event model: those are for validating input, and building them costs every read command."""
    import subprocess
    import sys

    code = (
        "import sys, diagevo.log, diagevo.views.queries, diagevo.views.memory, diagevo.views.stats, "
        "diagevo.views.stories; "
        "print(' '.join(m for m in ('diagevo.schemas', 'diagevo.text.formats') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == []


def test_retained_questions_are_counted_from_their_scores(store: Recorder) -> None:
    log = Log()
    log.node("N1").cause("C1", "N1").question("q1", 0.5, active="C1").question("q2", 0.9, retained=False)
    log.commit(retained=7)  # a summary that says otherwise is not the count
    log.question("q3", 0.5, active="C1").question("q4", 0.4, active="C1").commit()
    store.append(log.events())
    assert [r.retained for r in round_stats(store, log.run)] == [1, 2]
    assert round_stats(store, log.run) == scan(log.rows(), log.run)


def _json(data: dict) -> str:
    import json

    return json.dumps(data, sort_keys=True, separators=(",", ":")).replace("'", "''")
