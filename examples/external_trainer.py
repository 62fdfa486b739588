"""An external trainer driving the memory round by round through the public API (``import diagevo``).

The simulator stands in for someone else's RL stack: this script owns the models (generation,
construction responses, GRPO updates, checkpoints) and asks the memory only for what the round
protocol offers: generation requests, votes and filtering, promotions, diagnosis, the commit.
With the same seed and config it writes the same log as ``diagevo train`` (apart from wall-clock
fields), which is how the tests check that the protocol is the loop's only path into the memory.

    python examples/external_trainer.py --db sqlite:///ext.db --run ext --rounds 3 \\
        --set train.challenger_questions=16 --set train.curriculum_questions=48

With ``--ranks N`` it is a data-parallel trainer of N processes (each rank its own copy of the
models and its share of each round's questions; the ranks meet at barriers, its own, as
``torch.distributed.barrier`` would be): every rank records its questions, metrics and failures,
rank 0 decides the promotions, diagnoses and commits. When rank 0's diagnosis raises
``diagevo.RetryLater`` (the diagnostician does not answer), it tells the others and every rank
stops, the round left open with everything the ranks recorded; the same command run again opens
the round, reads ``next_step == "diagnose"``, and only rank 0 has work left: the diagnosis and
the commit.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import diagevo
from diagevo.catalog import CheckpointWritten, PhaseCompleted, failure_id  # events a trainer notes, a failure id
from diagevo.catalog.failure import Failure  # the failure record the round takes

CONFIG = "configs/sim.toml"  # the packaged config by name: the script runs wherever it is copied
TRAINER = "examples/external_trainer.py"  # what run.started names as the run's trainer


class ExternalTrainer:
    def __init__(self, cfg: diagevo.Config, store: diagevo.Recorder, run: str) -> None:
        self.cfg, self.store, self.run = cfg, store, run
        self.seed = cfg.train.seed
        self.backend = diagevo.make_backend(cfg)  # the simulator: someone else's models, here
        root = cfg.train.out_dir or diagevo.beside_database(store.url, ".runs")
        self.ckpt_dir = diagevo.run_dir(Path(root), run).resolve()
        self.index: diagevo.VectorIndex | None = None

    def rng(self, t: int, phase: str) -> random.Random:
        return random.Random(f"{self.seed}/{t}/{phase}")

    def phase(self, rnd: diagevo.Round, name: str, started: float, *, checkpoint: bool = False, **stats: Any) -> float:
        """Save the models (optionally) and note the finished phase, as any trainer may."""
        if checkpoint:
            path = self.ckpt_dir / f"round{rnd.t:03d}-{name}"
            self.backend.save(path)
            size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())  # its disk use, as train logs it
            written = CheckpointWritten(path=path.name, phase=name, bytes=size)  # its name in the run's folder
            rnd.note(f"checkpoint/{name}", written)
        seconds = time.perf_counter() - started
        rnd.note(f"phase/{name}", PhaseCompleted(phase=name, seconds=seconds, stats=stats))
        return seconds

    def challenger_reward(self, t: int) -> Any:
        n, calls = self.cfg.grpo.construction_responses, [0]

        def reward(_requests: Sequence[Any], outputs: Sequence[str]) -> list[float]:
            calls[0] += 1
            rng = self.rng(t, f"chal-votes-{calls[0]}")
            return diagevo.challenger_output_rewards(
                outputs,
                lambda qs: self.backend.sample(qs, n, rng),
                lam=self.cfg.reward.lam,
                threshold=self.cfg.reward.cluster_distance_threshold,
            )

        return reward

    def round(self, t: int) -> diagevo.Committed:
        cfg, store, run = self.cfg, self.store, self.run
        seconds: dict[str, float] = {}
        rnd = diagevo.Round.open(store, run, t)  # the run's config and M_{t-1}, read once for the round

        # challenger GRPO on Q^chal drawn from the schedule
        started = time.perf_counter()
        stats: dict[str, float] = {}
        if cfg.memory.challenger_updates:
            chal = rnd.requests(cfg.train.challenger_questions or cfg.challenger.batch_size, purpose="challenger")
            stats = self.backend.train_challenger(
                [q.generation_request() for q in chal], self.challenger_reward(t), self.rng(t, "challenger")
            )
        seconds["challenger"] = self.phase(rnd, "challenger", started, checkpoint=True, **stats)

        # Q^cur, N construction responses each; the memory votes and filters (Eq. 3)
        started = time.perf_counter()
        reqs = rnd.requests(cfg.train.curriculum_questions or cfg.solver.batch_size)
        outputs = self.backend.generate([q.generation_request() for q in reqs], self.rng(t, "generate"))
        kept = [
            (q, text) for q, o in zip(reqs, outputs, strict=True) if (text := diagevo.parse_question(o)) is not None
        ]
        responses = self.backend.sample(
            [text for _, text in kept], cfg.grpo.construction_responses, self.rng(t, "construct")
        )
        scored = rnd.record(
            [
                diagevo.Candidate(
                    q.question_id, q.mode, text, q.active_cause, q.mastered_cause, q.node, responses=tuple(resp)
                )
                for (q, text), resp in zip(kept, responses, strict=True)
            ]
        )
        retained = [s for s in scored if s.retained]
        seconds["construct"] = self.phase(rnd, "construct", started, questions=len(scored), retained=len(retained))

        # promotions (Eq. 5-6), decided by the memory
        rnd.promote()

        # solver GRPO on the retained questions; failed responses are recorded for diagnosis
        started = time.perf_counter()
        stats = {"questions": 0}
        if retained:

            def reward(i: int, resp: Sequence[str]) -> list[float]:
                return diagevo.solver_rewards(resp, retained[i].pseudo_label)

            out = self.backend.train_solver(
                [s.text for s in retained], reward, cfg.solver.group_size, self.rng(t, "solver")
            )
            failures = [
                Failure(
                    failure_id=failure_id(s.question_id, j),
                    question_id=s.question_id,
                    response=resp,
                    reference=s.reference,
                )
                for s, group, rewards in zip(retained, out.responses, out.rewards, strict=True)
                for j, (resp, rew) in enumerate(zip(group, rewards, strict=True))
                if rew < 0
            ]
            if failures:
                rnd.record_failures(failures)
            # where the world knows the truth (the simulator does): how often the labels were right
            labels = diagevo.audit_labels(
                [s.text for s in retained],
                [s.pseudo_label for s in retained],
                out.responses,
                out.rewards,
                self.backend.truth,
            )
            stats = {**out.stats, **labels.summary(), "failures": len(failures)}
        seconds["solver"] = self.phase(rnd, "solver", started, checkpoint=True, **stats)

        # diagnosis (Sec. 2.3)
        started = time.perf_counter()
        if self.index is None:  # the vectors, kept beside the database across rounds
            self.index = diagevo.vector_index(store, run, self.backend.embedder())
        summary = diagevo.diagnose(
            rnd,
            diagnostician=self.backend.diagnostician(),
            embedder=self.backend.embedder(),
            cfg=cfg.diagnosis,
            index=self.index,
        )
        seconds["diagnose"] = self.phase(rnd, "diagnose", started, dedup_truncated=summary.dedup_truncated)

        # held-out metrics, then the commit
        started = time.perf_counter()
        metrics = self.backend.evaluate(self.rng(t, "evaluate"))
        seconds["evaluate"] = time.perf_counter() - started
        return rnd.commit(
            metrics,
            summary={
                **{k: v for k, v in stats.items() if k.startswith(("retained_label_acc", "wrong_reward_share"))},
                "dedup_truncated": summary.dedup_truncated,
                "heldout_acc": metrics.get("heldout_acc"),
                "pseudo_label_acc": metrics.get("pseudo_label_acc"),
                "timing": seconds,
                **({"val_acc": metrics["val_acc"]} if "val_acc" in metrics else {}),
            },
        )

    # --- several ranks --------------------------------------------------------------------------
    def rank_round(self, t: int, rank: int, ranks: int, meet: Callable[[], object], stopped: Any) -> bool:
        """Round ``t`` as rank ``rank`` of ``ranks`` (``meet``: the ranks' barrier; ``stopped``:
        a flag rank 0 raises for all). Every step goes by ``next_step``, read by every rank
        before any writes, so a round run again continues where it stopped. True once committed."""
        cfg = self.cfg
        rnd = diagevo.Round.open(self.store, self.run, t)  # every rank: the round as it stands (a no-op but once)
        meet()
        step = rnd.next_step  # the same for every rank: nobody writes before the next barrier
        meet()
        if step == "record":  # the same requests in every rank, each rank its share
            reqs = rnd.requests(cfg.train.curriculum_questions or cfg.solver.batch_size)[rank::ranks]
            outputs = self.backend.generate([q.generation_request() for q in reqs], self.rng(t, f"generate{rank}"))
            kept = [
                (q, text) for q, o in zip(reqs, outputs, strict=True) if (text := diagevo.parse_question(o)) is not None
            ]
            responses = self.backend.sample(
                [text for _, text in kept], cfg.grpo.construction_responses, self.rng(t, f"construct{rank}")
            )
            rnd.record(
                [
                    diagevo.Candidate(
                        q.question_id, q.mode, text, q.active_cause, q.mastered_cause, q.node, responses=tuple(resp)
                    )
                    for (q, text), resp in zip(kept, responses, strict=True)
                ]
            )
        meet()  # every rank's evidence is in
        if rank == 0 and step in ("record", "promote"):
            rnd.promote()
        meet()
        if step in ("record", "promote", "record_failures"):  # the solver's step on this rank's share
            retained = [s for s in rnd.questions() if s.retained][rank::ranks]
            failures: list[dict[str, str]] = []
            if retained:
                out = self.backend.train_solver(
                    [s.text for s in retained],
                    lambda i, resp: diagevo.solver_rewards(resp, retained[i].pseudo_label),
                    cfg.solver.group_size,
                    self.rng(t, f"solver{rank}"),
                )
                failures = [
                    Failure(
                        failure_id=failure_id(s.question_id, j),
                        question_id=s.question_id,
                        response=resp,
                        reference=s.reference,
                    )
                    for s, group, rewards in zip(retained, out.responses, out.rewards, strict=True)
                    for j, (resp, rew) in enumerate(zip(group, rewards, strict=True))
                    if rew < 0
                ]
            responses = max(1, len(retained) * cfg.solver.group_size)
            rnd.record_metrics({"failure_rate": len(failures) / responses}, rank=rank, weight=responses)
            rnd.record_failures(failures)
        meet()  # every rank's metrics and failures are in
        if rank == 0 and rnd.next_step == "diagnose":
            try:
                if self.index is None:
                    self.index = diagevo.vector_index(self.store, self.run, self.backend.embedder())
                diagevo.diagnose(
                    rnd,
                    diagnostician=self.backend.diagnostician(),
                    embedder=self.backend.embedder(),
                    cfg=cfg.diagnosis,
                    index=self.index,
                )
            except diagevo.RetryLater as exc:  # not answering: every rank stops, the round stays open
                print(f"round {t} stopped, not committed: {exc}; run the same command again", file=sys.stderr)
                stopped.value = 1
        meet()  # rank 0 has diagnosed, or said it could not
        if stopped.value:
            return False
        if rank == 0:
            done = rnd.commit()  # the ranks' metrics, each weighted
            print(f"round {t}: kept {done.retained}/{done.questions}, failures {done.failures}, ranks {done.ranks}")
        meet()
        return True


def run_rank(argv: list[str], rank: int, ranks: int, barrier: Any, stopped: Any) -> None:
    """One process of a data-parallel trainer: its own store, models and share of each round."""
    args, cfg = arguments(argv)
    with diagevo.open_store(args.db) as store:
        trainer = ExternalTrainer(cfg, store, args.run)
        [run] = [r for r in diagevo.runs(store) if r.run == args.run]  # read before any rank can commit
        for t in range(run.committed + 1, args.rounds + 1):  # those an earlier run of the command left
            if not trainer.rank_round(t, rank, ranks, barrier.wait, stopped):
                sys.exit(3)


def arguments(argv: Sequence[str] | None) -> tuple[argparse.Namespace, diagevo.Config]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ranks", type=int, default=1, help="Processes of a data-parallel trainer (default 1).")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    # the run's target round is part of its config, as `diagevo train --rounds` stores it
    pinned = [f"train.seed={args.seed}", f"train.run={json.dumps(args.run)}", f"train.rounds={args.rounds}"]
    return args, diagevo.load_config(CONFIG, [*args.overrides, *pinned])


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, cfg = arguments(argv)
    with diagevo.open_store(args.db) as store:
        diagevo.start_run(store, args.run, cfg, cfg.train.seed, trainer=TRAINER)
        if args.ranks == 1:
            trainer = ExternalTrainer(cfg, store, args.run)
            for t in range(1, args.rounds + 1):
                done = trainer.round(t)
                print(f"round {t}: kept {done.retained}/{done.questions}, F={done.F}, eps_next={done.epsilon_next:.3f}")
            return
    ctx = mp.get_context("spawn")  # as torchrun starts its ranks: fresh processes
    barrier, stopped = ctx.Barrier(args.ranks), ctx.Value("i", 0)
    procs = [ctx.Process(target=run_rank, args=(argv, r, args.ranks, barrier, stopped)) for r in range(args.ranks)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    if any(proc.exitcode for proc in procs):
        sys.exit(1)


if __name__ == "__main__":
    main()
