"""Many producers: 4 processes record questions into one round at once, all try to decide its
promotions, then record their failures at once; on a SQLite file and on the real PostgreSQL."""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from typing import Any

from diagevo import rounds
from diagevo.catalog import CauseCreated, FailureAttributed
from diagevo.log import open_log
from diagevo.log.checks import verify_chain
from tests.test_rounds import RUN, candidate, round_one

PRODUCERS = 4
PER_PRODUCER = 12


def _produce(url: str, rank: int, barrier: Any, out: Any) -> None:
    with open_log(url) as store:
        reqs = rounds.Round(store, RUN, 2).requests(PRODUCERS * PER_PRODUCER)
        mine = reqs[rank * PER_PRODUCER : (rank + 1) * PER_PRODUCER]
        overlap = [reqs[((rank + 1) % PRODUCERS) * PER_PRODUCER]]  # the next producer's first question
        barrier.wait()
        for q in [*mine, *overlap]:  # one at a time, interleaved with the others; one question twice
            rounds.Round(store, RUN, 2).record([candidate(q.question_id, q, agree=9 if q.active_cause == "C2" else 3)])
        barrier.wait()
        try:
            out.put(("promoted", [p.cause_id for p in rounds.Round(store, RUN, 2).promote()]))
        except rounds.ProtocolError as exc:
            out.put(("refused", str(exc)))
        barrier.wait()  # the promotions are decided: the failures of training on the retained questions
        rounds.Round(store, RUN, 2).record_failures(
            [
                {
                    "failure_id": f"f-{q.question_id}",
                    "question_id": q.question_id,
                    "response": "wrong",
                    "reference": "7",
                }
                for q in mine[:3]
            ]
            + [
                {
                    "failure_id": f"f-{overlap[0].question_id}",
                    "question_id": overlap[0].question_id,
                    "response": "wrong",
                    "reference": "7",
                }
            ],
        )


def _run_producers(target: Any, url: str, timeout: float) -> list[Any]:
    """Start PRODUCERS spawned processes on ``target(url, rank, barrier, out)`` and return what
    each put on ``out``; every one must exit cleanly."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(PRODUCERS), ctx.Queue()
    procs = [ctx.Process(target=target, args=(url, r, barrier, out)) for r in range(PRODUCERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
        assert p.exitcode == 0
    return [out.get(timeout=5) for _ in procs]


def test_four_producers_record_into_one_round(backend) -> None:  # type: ignore[no-untyped-def]
    url = backend.fresh_url()
    with open_log(url) as store:
        round_one(store)
        rounds.open_round(store, RUN)
    results = _run_producers(_produce, url, timeout=120)
    assert Counter(kind for kind, _ in results) == {"promoted": 1, "refused": 3}
    with open_log(url) as store:
        events = list(store.read(RUN))
        ids = Counter(e.event_id for e in events)
        assert max(ids.values()) == 1
        of = Counter(e.type for e in events if e.round == 2)
        assert of["question.generated"] == of["question.scored"] == PRODUCERS * PER_PRODUCER
        assert of["failure.recorded"] == PRODUCERS * 3  # the overlapping failure is the next producer's own
        assert of["promotions.decided"] == 1
        [decided] = [e.event for e in events if e.type == "promotions.decided" and e.round == 2]
        assert decided.candidates == PRODUCERS * PER_PRODUCER  # every producer's evidence was in
        assert verify_chain(store, RUN) == []


# --- diagnosis by many producers -----------------------------------------------------------------

SAME = "forgets that squaring both sides of an equation can introduce extraneous roots to check"
UNIQUE = [
    "miscounts the number of lattice points on the boundary of a polygon drawn on grid paper",
    "confuses permutations with combinations when the order of the selected committee members is irrelevant",
    "applies the quadratic formula with the wrong sign on the linear coefficient of the polynomial",
    "treats a geometric series with ratio above one as convergent and sums it to infinity anyway",
]


class ScriptedDiagnostician:
    """Stands in for the remote LLM: every producer's failures name SAME (and one cause of its
    own); Prompt 2 confirms a duplicate exactly when the texts are equal; Prompt 3 always opens
    a node; Prompt 4 never merges. Each decision takes a moment, so producers interleave."""

    model_name = "scripted"

    def __init__(self, rank: int) -> None:
        self.rank = rank

    async def extract(self, item):  # type: ignore[no-untyped-def]
        from diagevo.diagnosis.interface import Extraction, Reply

        text = UNIQUE[self.rank] if item.failure_id.endswith("-1") else SAME
        return Reply(Extraction(None, text), raw=text, model=self.model_name)

    async def deduplicate(self, new_cause, candidates):  # type: ignore[no-untyped-def]
        import asyncio

        from diagevo.diagnosis.interface import Dedup, Reply

        await asyncio.sleep(0.05)
        same = next((c.id for c in candidates if c.description == new_cause), None)
        return Reply(Dedup(same is not None, same), raw="dedup", model=self.model_name)

    async def assign_node(self, new_cause, shortlist):  # type: ignore[no-untyped-def]
        import asyncio

        from diagevo.diagnosis.interface import Assignment, Reply

        await asyncio.sleep(0.05)
        return Reply(Assignment(True, f"skill of {new_cause}", None), raw="assign", model=self.model_name)

    async def consolidate(self, a, b):  # type: ignore[no-untyped-def]
        from diagevo.diagnosis.interface import Consolidation, Reply

        return Reply(Consolidation(False, None), raw="keep", model=self.model_name)


def _diagnose(url: str, rank: int, barrier: Any, out: Any) -> None:
    import asyncio

    from diagevo.catalog.failure import Failure
    from diagevo.config.sections import DiagnosisConfig
    from diagevo.diagnosis.embedder import LocalEmbedder
    from diagevo.diagnosis.pipeline import diagnose_round
    from diagevo.views.index import VectorIndex

    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    failures = [
        Failure(
            failure_id=f"f{rank}-{j}",
            question_id=f"q{rank}-{j}",
            question="Solve sqrt(x + 3) = x - 3.",
            pseudo_label="6",
            response="x = 1",
            reference="x = 6",
        )
        for j in range(3)
    ]
    with open_log(url) as store:
        barrier.wait()
        summary = asyncio.run(
            diagnose_round(
                store=store,
                run=RUN,
                t=2,
                failures=failures,
                diagnostician=ScriptedDiagnostician(rank),
                embedder=embedder,
                cfg=DiagnosisConfig(),
                index=VectorIndex(embedder),
            )
        )
    out.put((summary.new_causes, summary.duplicates))


def test_four_producers_diagnose_one_round(backend) -> None:  # type: ignore[no-untyped-def]
    from diagevo.views.memory import load_memory
    from diagevo.views.verify import verify_run

    url = backend.fresh_url()
    with open_log(url) as store:
        round_one(store)  # round 2 never opened: each producer's failures are recorded with their diagnosis
    results = _run_producers(_diagnose, url, timeout=300)
    with open_log(url) as store:
        mem = load_memory(store, RUN)
        same = [c for c in mem.causes.values() if c.description == SAME]
        assert len(same) == 1  # one cause, whoever named it first
        assert same[0].frequency == 2 * PRODUCERS  # created once, every other naming attributed to it
        assert sorted(c.description for c in mem.causes.values() if c.id not in ("C1", "C2")) == sorted([SAME, *UNIQUE])
        decided = Counter(
            e.event.failure_id for e in store.read(RUN, types=(FailureAttributed, CauseCreated)) if e.round == 2
        )
        assert len(decided) == 3 * PRODUCERS and set(decided.values()) == {1}  # each failure decided once
        assert verify_run(store, RUN) == []
    assert sum(n for n, _ in results) == 1 + PRODUCERS and sum(d for _, d in results) == 2 * PRODUCERS - 1
