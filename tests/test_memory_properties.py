"""Properties over generated valid logs: snapshots equal the fold, export -> ingest round-trips,
replay is deterministic."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagevo.interchange import export_lines, ingest
from diagevo.log import open_log
from diagevo.memory import fold, fold_until, schedule
from diagevo.memory.state import Memory
from diagevo.rounds import Round
from diagevo.views.caches import refresh as refresh_snapshots
from diagevo.views.memory import fold_rows, load_memory
from diagevo.views.verify import verify_run
from tests.logs import Log
from tests.strategies import logs, random_log

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _committed(log: Log) -> list[int]:
    return [e.round for e in log.events() if e.type == "round.committed"]


@given(log=logs())
@SETTINGS
def test_memory_json_round_trip_and_deterministic_replay(log: Log) -> None:
    for t in _committed(log):
        a = fold_until(log.rows(), "r1", t)
        b = fold_until(log.rows(), "r1", t)
        assert a == b
        assert Memory.from_json(a.to_json()) == a
        assert schedule(a) == schedule(b)
    # folding from a snapshot of round 1 gives the same final memory as folding from scratch
    m1 = fold_until(log.rows(), "r1", 1)
    rest = [row for row in log.rows() if row.seq > m1.last_seq]
    assert fold(rest, "r1", m1) == fold(log.rows(), "r1")


@given(log=logs(max_rounds=4))
@SETTINGS
def test_snapshots_equal_fold_and_export_ingest_round_trip(tmp_path_factory, log: Log) -> None:  # noqa: ANN001
    d: Path = tmp_path_factory.mktemp("db")
    with open_log(f"sqlite:///{d / 'a.db'}") as a:
        a.append(log.events())
        assert refresh_snapshots(a, "r1") == len(_committed(log))
        assert verify_run(a, "r1") == []
        snaps = {s.part: s.state for s in a.view_states("memory", "r1")}
        for t in _committed(log):
            assert Memory.from_json(snaps[t]) == fold_until(a.rows("r1"), "r1", t)
        exported = list(export_lines(a, "r1"))
    with open_log(f"sqlite:///{d / 'b.db'}") as b:
        result = ingest(b, exported)
        assert result.appended == len(log.events())
        for t in _committed(log):  # both databases are fresh, so seq numbers coincide too
            assert load_memory(b, "r1", t) == fold_until(log.rows(), "r1", t)
        assert list(export_lines(b, "r1"))[0].split('"seq"')[0] == exported[0].split('"seq"')[0]
        # re-ingesting the same file stores nothing new
        assert ingest(b, exported).appended == 0


@given(log=logs(max_rounds=3), cuts=st.lists(st.integers(1, 400), max_size=12))
@SETTINGS
def test_a_round_memory_folded_flush_by_flush_equals_the_full_fold(tmp_path_factory, log: Log, cuts: list[int]) -> None:  # noqa: ANN001
    """What a round checks each flush of decisions against (``Round.memory``, folded on the memory
    it returned last) equals the whole log folded from its start, after every flush, wherever the
    flushes cut the log: a row skipped or folded twice would show."""
    d: Path = tmp_path_factory.mktemp("db")
    events = log.events()
    bounds = sorted({0, *(c for c in cuts if c < len(events)), len(events)})
    with open_log(f"sqlite:///{d / 'f.db'}") as store:
        store.append(events[:1])  # run.started: the round's M_{t-1}
        rnd = Round(store, "r1", 1)
        for lo, hi in zip(bounds, bounds[1:]):
            store.append(events[max(lo, 1) : hi])
            assert rnd.memory() == fold(fold_rows(store, "r1"), "r1")


def test_snapshot_cache_can_be_dropped_and_rebuilt(tmp_path: Path) -> None:
    log = random_log(random.Random(7), 5)
    with open_log(f"sqlite:///{tmp_path / 'c.db'}") as s:
        s.append(log.events())
        refresh_snapshots(s, "r1")
        before = [load_memory(s, "r1", t) for t in _committed(log)]
        assert s.drop_view_states("memory", "r1") == len(before)
        assert [load_memory(s, "r1", t) for t in _committed(log)] == before  # from the log alone
        assert refresh_snapshots(s, "r1") == len(before)
        assert [load_memory(s, "r1", t) for t in _committed(log)] == before
