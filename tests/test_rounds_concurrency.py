"""Many producers: 4 processes record questions and failures into one round at once, then all
try to decide its promotions; on a SQLite file and on the real PostgreSQL."""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from typing import Any

from diagevo import rounds
from diagevo.events.store import EventStore
from tests.test_rounds import RUN, candidate, round_one

PRODUCERS = 4
PER_PRODUCER = 12


def _produce(url: str, rank: int, barrier: Any, out: Any) -> None:
    with EventStore(url) as store:
        reqs = rounds.requests(store, RUN, 2, PRODUCERS * PER_PRODUCER)
        mine = reqs[rank * PER_PRODUCER:(rank + 1) * PER_PRODUCER]
        overlap = [reqs[((rank + 1) % PRODUCERS) * PER_PRODUCER]]  # the next producer's first question
        barrier.wait()
        for q in [*mine, *overlap]:  # one at a time, interleaved with the others; one question twice
            rounds.record(store, RUN, 2, [candidate(q.question_id, q, agree=9 if q.active_cause == "C2" else 3)])
        rounds.record_failures(store, RUN, 2, [
            {"failure_id": f"f-{q.question_id}", "question_id": q.question_id, "response": "wrong"} for q in mine[:3]
        ] + [{"failure_id": f"f-{overlap[0].question_id}", "question_id": overlap[0].question_id, "response": "wrong"}])
        barrier.wait()
        try:
            out.put(("promoted", [p["cause_id"] for p in rounds.promote(store, RUN, 2)]))
        except rounds.ProtocolError as exc:
            out.put(("refused", str(exc)))


def test_four_producers_record_into_one_round(backend) -> None:  # type: ignore[no-untyped-def]
    url = backend.fresh_url()
    with EventStore(url) as store:
        round_one(store)
        rounds.open_round(store, RUN)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(PRODUCERS), ctx.Queue()
    procs = [ctx.Process(target=_produce, args=(url, r, barrier, out)) for r in range(PRODUCERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    results = [out.get(timeout=5) for _ in procs]
    assert Counter(kind for kind, _ in results) == {"promoted": 1, "refused": 3}
    with EventStore(url) as store:
        events = list(store.read(RUN))
        ids = Counter(e.event_id for e in events)
        assert max(ids.values()) == 1
        of = Counter(e.type for e in events if e.round == 2)
        assert of["question.generated"] == of["question.scored"] == PRODUCERS * PER_PRODUCER
        assert of["failure.recorded"] == PRODUCERS * 3  # the overlapping failure is the next producer's own
        assert of["promotions.decided"] == 1
        [decided] = [e.data for e in events if e.type == "promotions.decided" and e.round == 2]
        assert decided["candidates"] == PRODUCERS * PER_PRODUCER  # every producer's evidence was in
        assert store.verify_chain(RUN) == []
