"""Round-protocol benchmark (a script, not a test): what driving a round through
``diagevo.rounds`` costs against doing the same work in process with direct appends.

Both sides run the memory's share of R rounds (|Q^cur| candidates with N construction answers
each, ``--causes`` causes in the memory) on their own SQLite file:
(a) baseline: sample requests from M_{t-1}, vote and filter, decide promotions, and append
    ``round.started`` / questions (each ``question.generated`` before its ``question.scored``) /
    promotions / ``round.committed`` with plain ``append`` (what the loop did before the
    protocol; a log ``verify_run`` finds intact);
(b) protocol: ``open_round``, ``requests``, ``record`` (in batches of ``--batch`` questions, as a
    data-parallel trainer would), ``promote``, ``commit``, in the order the protocol requires:
    every write is checked and appended under the append lock.
Only the rounds after the first are timed. Round 1, the same on both sides, is seeded through
the protocol in its legal order (the protocol refuses to decide the promotions of a round that
holds no question, and a cause is created from the diagnosed failure that revealed it): a few
free questions recorded, promotions decided, one failure of a retained question per cause
recorded, diagnosed as a new cause (``append_diagnosis``), committed.
Prints seconds per round and the ratio (b)/(a).

    python benchmarks/bench_rounds.py [--rounds 5] [--questions 256] [--batch 64]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from diagevo import rounds
from diagevo.catalog import (
    CauseCreated,
    CausePromoted,
    FailureDiagnosed,
    NodeCreated,
    QuestionGenerated,
    QuestionScored,
    RoundCommitted,
    RoundStarted,
)
from diagevo.catalog.failure import Failure
from diagevo.curriculum.filtering import keep
from diagevo.curriculum.votes import votes
from diagevo.log import Recorder, open_log
from diagevo.memory.deciders import decide_promotions
from diagevo.memory.sampler import sample_requests
from diagevo.memory.schedule import schedule
from diagevo.schemas import EventIn, new_event
from diagevo.train.config import Config
from diagevo.views.caches import refresh as refresh_snapshots
from diagevo.views.memory import load_memory

RUN = "bench"
N = 12


def seed_memory(store: Recorder, causes: int) -> None:
    """Round 1, through the protocol: four free questions recorded, the promotions decided (on
    none), one failure of the retained question per cause, diagnosed as a new cause in one of 8
    nodes (a cause is created from the failure that revealed it), committed."""
    rounds.start_run(store, RUN, Config(), seed=1)
    rnd = rounds.Round.open(store, RUN)
    agree = ["42"] * 6 + [str(100 + i) for i in range(N - 6)]  # p1 = 1/2: retained by the Eq. 3 filter
    free = [
        rounds.Candidate(r.question_id, r.mode, f"question {r.question_id}", answers=tuple(agree))
        for r in rnd.requests(4)
    ]
    retained = rnd.record(free).retained[0].question_id
    rnd.promote()
    fails = [
        Failure(failure_id=f"f{c + 1}", question_id=retained, response=f"wrong answer {c}", reference="42")
        for c in range(causes)
    ]
    rnd.record_failures(fails)
    ev: list[EventIn] = []
    for n in range(8):
        ev.append(rnd.event(f"n{n}", NodeCreated(node_id=f"N{n + 1}", label=f"skill family number {n}")))
    for c in range(causes):
        text = f"a reasoning mistake of kind {c} made while solving the problem"
        ev.append(rnd.event(f"dx/f{c + 1}", FailureDiagnosed(failure_id=f"f{c + 1}", error_cause=text)))
        ev.append(
            rnd.event(
                f"c{c}",
                CauseCreated(cause_id=f"C{c + 1}", node_id=f"N{c % 8 + 1}", description=text, failure_id=f"f{c + 1}"),
            )
        )
    rnd.append_diagnosis(ev)
    rnd.commit()


def answers(rng: random.Random) -> list[str]:
    agree = rng.randint(2, 11)
    return ["42"] * agree + [str(rng.randint(0, 9)) for _ in range(N - agree)]


def baseline_round(store: Recorder, t: int, n: int, cfg: Config, rng: random.Random) -> None:
    ev = lambda key, event: new_event(event, run=RUN, at_round=t, event_id=f"{RUN}/{t}/{key}")  # noqa: E731
    store.append([ev("round.started", RoundStarted())])
    memory = load_memory(store, RUN, t - 1)
    reqs = sample_requests(memory, schedule(memory), n, random.Random(f"1/{t}/cur-requests"))
    out: list[EventIn] = []
    evidence = []
    for i, q in enumerate(reqs):
        qid = f"q{t}-{i:05d}"
        v = votes(answers(rng))
        kept = v.label is not None and keep(v.p1, v.p2, cfg.filter)
        out.append(
            ev(
                f"gen/{qid}",
                QuestionGenerated(
                    question_id=qid,
                    mode=q.mode,
                    active_cause=q.active_cause,
                    mastered_cause=q.mastered_cause,
                    node=q.node,
                    text=f"question {qid}",
                ),
            )
        )
        out.append(
            ev(
                f"score/{qid}",
                QuestionScored(question_id=qid, n=N, p1=v.p1, p2=v.p2, pseudo_label=v.label, retained=kept),
            )
        )
        evidence.append((q.active_cause, v.p1))
    store.append(out)
    promos = decide_promotions(memory, evidence, cfg.memory.theta_up)
    store.append([ev(f"promote/{p.cause_id}", p) for p in promos if isinstance(p, CausePromoted)])
    s = schedule(load_memory(store, RUN))
    store.append([ev("round.committed", RoundCommitted(**{"F": s.F, "epsilon_next": s.epsilon}))])
    refresh_snapshots(store, RUN)


def protocol_round(store: Recorder, t: int, n: int, batch: int, rng: random.Random) -> None:
    rounds.open_round(store, RUN, t)
    reqs = rounds.Round(store, RUN, t).requests(n)
    cands = [
        rounds.Candidate(
            q.question_id,
            q.mode,
            f"question {q.question_id}",
            q.active_cause,
            q.mastered_cause,
            q.node,
            answers=tuple(answers(rng)),
        )
        for q in reqs
    ]
    for i in range(0, len(cands), batch):
        rounds.Round(store, RUN, t).record(cands[i : i + batch])
    rounds.Round(store, RUN, t).promote()
    rounds.Round(store, RUN, t).commit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--questions", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--causes", type=int, default=40)
    args = ap.parse_args()
    cfg = Config()
    with tempfile.TemporaryDirectory() as tmp:
        times = {}
        for name in ("baseline", "protocol"):
            with open_log(f"sqlite:///{Path(tmp) / name}.db") as store:
                seed_memory(store, args.causes)
                rng = random.Random(7)
                t0 = time.perf_counter()
                for t in range(2, args.rounds + 2):
                    if name == "baseline":
                        baseline_round(store, t, args.questions, cfg, rng)
                    else:
                        protocol_round(store, t, args.questions, args.batch, rng)
                times[name] = (time.perf_counter() - t0) / args.rounds
        print(
            f"{args.rounds} rounds x {args.questions} questions (N={N}, {args.causes} causes), record batches of "
            f"{args.batch}"
        )
        print(f"baseline (direct appends): {times['baseline'] * 1000:8.1f} ms/round")
        print(f"protocol (diagevo.rounds): {times['protocol'] * 1000:8.1f} ms/round")
        print(f"ratio protocol/baseline:   {times['protocol'] / times['baseline']:.2f}x")


if __name__ == "__main__":
    main()
