"""Many writer processes on one run, and a writer killed inside an append, on every backend."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections import defaultdict

import pytest

from diagevo.log import open_log
from diagevo.log.checks import verify_chain
from tests.conftest import Backend
from tests.logs import ForgedRow

WORKERS = 4
BATCHES = 250
BATCH_SIZE = 4
RUN = "shared-run"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _event(run: str, eid: str, i: int) -> ForgedRow:
    # model_construct: the store does not validate; skipping it keeps the workers cheap
    return ForgedRow(
        type="question.scored",
        run=run,
        round=1,
        event_id=eid,
        data={"question_id": f"q{i}", "n": 8, "p1": 0.5, "p2": 0.25, "pseudo_label": "42", "retained": True},
    )


def _batch(worker: int, b: int) -> list[ForgedRow]:
    return [_event(RUN, f"w{worker}-b{b:03d}-e{i}", i) for i in range(BATCH_SIZE)]


def _writer(url: str, worker: int, start: mp.synchronize.Event) -> None:
    store = open_log(url)
    start.wait()
    for b in range(BATCHES):
        res = store.append(_batch(worker, b))
        if res.appended != BATCH_SIZE:
            raise SystemExit(f"batch {b}: {res}")
        if b % 25 == 24:  # a resumed producer re-sends what it already wrote: no-op
            again = store.append(_batch(worker, b))
            if (again.appended, again.skipped) != (0, BATCH_SIZE):
                raise SystemExit(f"re-append of batch {b}: {again}")
    store.close()


def _huge_appender(url: str, n: int, ready: mp.synchronize.Event) -> None:
    store = open_log(url)
    events = [_event("victim", f"huge-{i}", i) for i in range(n)]
    ready.set()
    store.append(events)


def test_concurrent_writers_lose_nothing_and_never_interleave(backend: Backend, db_url: str) -> None:
    open_log(db_url).close()  # migrate once, before the writers race
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(db_url, w, start)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    time.sleep(0.5)
    start.set()
    for p in procs:
        p.join(timeout=150)
    assert [p.exitcode for p in procs] == [0] * WORKERS

    with open_log(db_url) as store:
        events = list(store.read(RUN))
        total = WORKERS * BATCHES * BATCH_SIZE
        assert len(events) == total
        assert len({e.event_id for e in events}) == total
        assert [e.seq for e in events] == list(range(1, total + 1))  # strictly increasing, no gaps
        by_batch: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for e in events:
            worker_batch, _, item = e.event_id.rpartition("-")
            by_batch[worker_batch].append((e.seq, item))
        assert len(by_batch) == WORKERS * BATCHES
        for key, members in by_batch.items():
            seqs = [s for s, _ in members]
            assert seqs == list(range(seqs[0], seqs[0] + BATCH_SIZE)), f"batch {key} interleaved: {seqs}"
            assert [i for _, i in members] == [f"e{i}" for i in range(BATCH_SIZE)]
        for w in range(WORKERS):  # each worker's batches are in its own order
            firsts = [by_batch[f"w{w}-b{b:03d}"][0][0] for b in range(BATCHES)]
            assert firsts == sorted(firsts)
        assert verify_chain(store, RUN) == []


def test_writer_killed_inside_an_append_leaves_nothing_partial(backend: Backend, db_url: str) -> None:
    n = 150_000
    with open_log(db_url) as store:
        store.append([_event("victim", f"before-{i}", i) for i in range(10)])
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_huge_appender, args=(db_url, n, ready))
    proc.start()
    try:
        # no wall-clock bound: wait while the appender lives (pytest-timeout ends a real hang)
        while not ready.wait(0.5):
            assert proc.is_alive(), "the appender died before it got ready"
        while not backend.writer_lock_held(db_url):  # the append transaction has started
            assert proc.is_alive(), "the appender died before it took the lock"
            time.sleep(0.02)
        time.sleep(0.3)  # let it insert for a while
        assert proc.is_alive() and backend.writer_lock_held(db_url), "append finished before the kill"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL

    with open_log(db_url) as store:
        stored = [e.event_id for e in store.read("victim")]
        huge = [eid for eid in stored if eid.startswith("huge-")]
        assert stored[:10] == [f"before-{i}" for i in range(10)]
        assert len(huge) in (0, n), f"partial batch: {len(huge)} of {n} events survived the kill"
        assert len(huge) == 0, "the kill came after the commit; the test did not exercise a partial append"
        res = store.append([_event("victim", "after", 0)], expected_last_seq=10)
        assert (res.appended, res.last_seq) == (1, 11)
        assert verify_chain(store, "victim") == []


def _open_and_append(url: str, worker: int, start: mp.synchronize.Event) -> None:
    start.wait()
    with open_log(url) as store:
        store.append([_event("opened", f"open-{worker}", worker)])


def test_processes_racing_to_open_a_brand_new_database_migrate_it_once(backend: Backend, db_url: str) -> None:
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_open_and_append, args=(db_url, w, start)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let every process import before the race
    start.set()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    with open_log(db_url, migrate_empty=False) as store:
        assert sorted(e.event_id for e in store.read("opened")) == [f"open-{w}" for w in range(WORKERS)]
        assert verify_chain(store, "opened") == []
