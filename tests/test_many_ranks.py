"""Many ranks, one round: the documented pattern of a data-parallel trainer. Every rank records
its own questions, failures and metrics into the open round; rank 0 decides the promotions,
diagnoses and commits. 4 processes, on a SQLite file and on the real PostgreSQL: nothing lost,
nothing counted twice, and the commit takes exactly what the ranks recorded before it."""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from typing import Any

import pytest

import diagevo

RANKS = 4
PER_RANK = 3
RUN = "dp"


def _rank(url: str, rank: int, barrier: Any, out: Any) -> None:
    """One rank of the trainer; ``barrier`` stands for its own (torch.distributed) barrier."""
    with diagevo.open_store(url) as store:
        rnd = diagevo.Round.current(store, RUN)  # the round rank 0 opened
        reqs = rnd.requests(RANKS * PER_RANK)  # every rank draws the same; each takes its share
        mine = reqs[rank * PER_RANK : (rank + 1) * PER_RANK]
        label = str(10 + rank)
        candidates = [
            diagevo.Candidate(
                q.question_id,
                q.mode,
                f"rank {rank}, question {i}: what is {label}?",
                q.active_cause,
                q.mastered_cause,
                q.node,
                responses=tuple([f"so \\boxed{{{label}}}"] * 9 + ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}"]),
            )
            for i, q in enumerate(mine)
        ]
        scored = rnd.record(candidates)
        rnd.record(candidates)  # a retry: stores nothing
        barrier.wait()  # every rank's evidence is in
        if rank == 0:
            rnd.promote()
        barrier.wait()
        failures = []
        for s in scored:
            responses = [f"so \\boxed{{-{s.pseudo_label}}}", f"so \\boxed{{{s.pseudo_label}}}"]
            for k, reward in enumerate(diagevo.solver_rewards(responses, s.pseudo_label)):
                if reward < 0:
                    failures.append(
                        {"failure_id": f"f-{s.question_id}-{k}", "question_id": s.question_id}
                        | {"response": responses[k], "reference": s.reference}
                    )
        rnd.record_failures(failures)
        rnd.record_failures(failures)  # a retry: stores nothing
        rnd.record_metrics({"acc": rank / 10, "reward": 1.0}, rank=rank, weight=len(scored) + rank)
        barrier.wait()  # every rank's failures and metrics are in: rank 0 diagnoses and commits
        if rank == 0:
            summary = diagevo.diagnose(rnd, diagnostician="heuristic")
            done = rnd.commit()
            out.put(("committed", summary.failures, done.failures, done.ranks))
        barrier.wait()
        try:  # after the commit: refused, nothing stored
            rnd.record_metrics({"acc": 1.0}, rank=rank + 10)
            out.put(("late", "stored"))
        except diagevo.OutOfOrder as exc:
            out.put(("late", str(exc)))


def test_four_ranks_record_and_rank_zero_diagnoses_and_commits(backend) -> None:  # type: ignore[no-untyped-def]
    url = backend.fresh_url()
    with diagevo.open_store(url) as store:
        diagevo.start_run(store, RUN, {"k": 1.0}, trainer="dp trainer")
        diagevo.Round.open(store, RUN)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(RANKS), ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(url, r, barrier, out)) for r in range(RANKS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(600)
        assert p.exitcode == 0
    results = [out.get(timeout=5) for _ in range(RANKS + 1)]
    [committed] = [r for r in results if r[0] == "committed"]
    late = [r[1] for r in results if r[0] == "late"]
    total = RANKS * PER_RANK
    assert committed == ("committed", total, total, RANKS)
    assert len(late) == RANKS and all("is committed" in msg for msg in late)
    with diagevo.open_store(url) as store:
        events = list(store.read(RUN))
        assert max(Counter(e.event_id for e in events).values()) == 1
        of = Counter(e.type for e in events if e.round == 1)
        assert of["question.generated"] == of["question.scored"] == total  # nothing lost, none twice
        assert of["failure.recorded"] == of["failure.diagnosed"] == total
        assert of["metrics.recorded"] == RANKS and of["round.committed"] == 1
        [metrics] = [e.event.metrics for e in events if e.type == "eval.recorded"]
        weights = [PER_RANK + r for r in range(RANKS)]
        expected = sum(w * r / 10 for r, w in enumerate(weights)) / sum(weights)
        assert metrics["acc"] == pytest.approx(expected) and metrics["reward"] == pytest.approx(1.0)
        diagnosed = Counter(e.event.failure_id for e in events if e.type == "failure.diagnosed")
        assert set(diagnosed.values()) == {1}
        assert diagevo.stats(store, RUN).rounds[0].failures == total
        assert diagevo.verify_run(store, RUN) == []
