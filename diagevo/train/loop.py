"""The co-evolution loop (Sec. 2, Appendix D-E), one round at a time.

Round t reads the schedule projected from M_{t-1}, updates the challenger on Q^chal, samples
Q^cur under the same schedule, votes and filters, promotes, updates the solver, records the
failures of retained questions, diagnoses them, and commits. The loop never changes the memory
itself: it reads projections and appends events. Every event id is derived from (run, round,
phase, item), every random stream from (seed, round, phase), so a round cut short is finished
by ``resume`` without counting anything twice.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagevo import curriculum as cur
from diagevo.config import Config
from diagevo.diagnosis.index import VectorIndex, default_index_path
from diagevo.diagnosis.pipeline import DiagnosisSummary, FailureInput, diagnose_round
from diagevo.events.schemas import EventIn, new_event
from diagevo.events.store import EventStore
from diagevo.memory.deciders import decide_promotions
from diagevo.memory.sampler import GenerationRequest, sample_requests
from diagevo.memory.schedule import schedule
from diagevo.paths import beside_database, run_dir
from diagevo.replay import committed_rounds, load_memory, refresh_snapshots
from diagevo.train.backend import Backend, ProgressFn, no_progress

@dataclass
class RoundReport:
    """What one round did; the CLI prints it as a table row."""

    round: int
    questions: int = 0
    retained: int = 0
    failures: int = 0
    new_causes: int = 0
    attributions: int = 0
    promotions: int = 0
    reactivations: int = 0
    merges: int = 0
    failed_diagnoses: int = 0
    dedup_truncated: int = 0  # Prompt 2 lists cut to diagnosis.dedup_candidates
    F: int = 0
    epsilon_next: float = 1.0
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class _Round:
    """Working state of round t (what resumption rebuilds from the log)."""

    t: int
    done: set[str]
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)  # question_id -> generated
    scored: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)
    checkpoint: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)  # phase -> its phase.completed data


class Trainer:
    """Runs rounds of one run against one store and one backend."""

    def __init__(
        self,
        config: Config,
        store: EventStore,
        backend: Backend,
        run: str,
        *,
        progress: ProgressFn = no_progress,
        on_round: Callable[[RoundReport], None] = lambda r: None,
    ) -> None:
        self.cfg = config
        self.store = store
        self.backend = backend
        self.run = run
        self.progress = progress
        self.on_round = on_round
        self.seed = config.train.seed
        root = config.train.out_dir or beside_database(store.url, ".runs")  # keyed by database
        self.ckpt_dir = run_dir(Path(root), run).resolve()  # absolute: a resume may start elsewhere
        self.index: VectorIndex | None = None

    # --- plumbing -----------------------------------------------------------------------------
    def rng(self, t: int, phase: str) -> random.Random:
        return random.Random(f"{self.seed}/{t}/{phase}")

    def event(self, t: int, key: str, type: str, **data: Any) -> EventIn:
        return new_event(type, self.run, t, f"{self.run}/{t}/{key}", **data)

    def append(self, events: Sequence[EventIn]) -> None:
        if events:
            self.store.append(events)

    def finish_phase(self, r: _Round, phase: str, started: float, *, checkpoint: bool = False, **stats: Any) -> None:
        """Record a finished phase; with ``checkpoint``, first save the models. The checkpoint
        and the phase land in one append, so a resumed round never starts from a checkpoint
        whose phase it would then run again."""
        events = []
        if checkpoint:
            path = self.ckpt_dir / f"round{r.t:03d}-{phase}"
            self.backend.save(path)
            r.checkpoint = str(path)
            events.append(self.event(r.t, f"checkpoint/{phase}", "checkpoint.written", path=str(path), phase=phase))
        r.seconds[phase] = time.perf_counter() - started
        events.append(self.event(r.t, f"phase/{phase}", "phase.completed", phase=phase, seconds=r.seconds[phase], **stats))
        self.append(events)
        r.done.add(phase)
        r.stats[phase] = stats

    # --- run ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Append ``run.started`` (a no-op when the run exists)."""
        config = self.cfg.redacted() | {"k": self.cfg.memory.k}
        self.append([new_event("run.started", self.run, 0, f"{self.run}/0/run.started", config=config, seed=self.seed)])

    def train(self, rounds: int | None = None) -> list[RoundReport]:
        self.start()
        last = max(committed_rounds(self.store, self.run), default=0)
        total = rounds if rounds is not None else self.cfg.train.rounds
        reports = []
        self.progress("rounds", last, total)
        for t in range(last + 1, total + 1):
            reports.append(self.round(t))
            self.progress("rounds", t, total)
        return reports

    def _rebuild(self, t: int) -> _Round:
        """What round t already did, read back from the log: the round's own events and the
        checkpoints (indexed reads; the rest of the run is not read)."""
        r = _Round(t=t, done=set())
        last_ckpt: str | None = None
        for e in self.store.read(self.run, types=("checkpoint.written",)):
            if e.round < t:
                last_ckpt = e.data["path"]
        for e in self.store.read(self.run, round=t, texts=True):
            if e.type == "phase.completed":
                r.done.add(e.data["phase"])
                r.seconds[e.data["phase"]] = e.data.get("seconds", 0.0)
                r.stats[e.data["phase"]] = e.data
            elif e.type == "checkpoint.written":
                last_ckpt = e.data["path"]
            elif e.type == "question.generated":
                r.questions[e.data["question_id"]] = e.data
            elif e.type == "question.scored":
                r.scored[e.data["question_id"]] = e.data
            elif e.type == "failure.recorded":
                r.failures[e.data["failure_id"]] = e.data
        r.checkpoint = last_ckpt
        return r

    def round(self, t: int) -> RoundReport:
        r = self._rebuild(t)
        if r.checkpoint is not None:
            self.backend.load(Path(r.checkpoint))
        self.append([self.event(t, "round.started", "round.started")])
        memory = load_memory(self.store, self.run, t - 1)  # M_{t-1}
        sched = schedule(memory)
        m = self.cfg.memory
        n_chal = self.cfg.train.challenger_questions or self.cfg.grpo.challenger_batch_size
        n_cur = self.cfg.train.curriculum_questions or self.cfg.grpo.solver_batch_size

        def requests(n: int, phase: str) -> list[GenerationRequest]:
            return sample_requests(
                memory, sched, n, self.rng(t, phase),
                generation=m.generation, fixed_free_ratio=m.fixed_free_ratio, stitching=m.stitching,
            )

        # (1) challenger GRPO on Q^chal against the frozen solver's votes (Eq. 8-10)
        if "challenger" not in r.done:
            started = time.perf_counter()
            stats: dict[str, float] = {}
            if m.challenger_updates:
                stats = self.backend.train_challenger(
                    requests(n_chal, "chal-requests"), self._challenger_reward(t), self.rng(t, "challenger"),
                    lambda _p, d, n: self.progress("challenger", d, n),
                )
            self.finish_phase(r, "challenger", started, checkpoint=True, **stats)

        # (2) Q^cur under the same schedule, (3) N construction responses, votes, filter (Eq. 3)
        if "construct" not in r.done:
            started = time.perf_counter()
            self._generate_and_score(r, requests(n_cur, "cur-requests"))
            retained = sum(s["retained"] for s in r.scored.values())
            self.finish_phase(r, "construct", started, questions=len(r.questions), retained=retained)

        # (4) promotions from M_{t-1} and the round's evidence (Eq. 5-6)
        evidence = [(q["active_cause"], r.scored[qid]["p1"]) for qid, q in r.questions.items() if qid in r.scored]
        promotions = decide_promotions(memory, evidence, m.theta_up, enabled=m.state_updates)
        self.append([self.event(t, f"promote/{d['cause_id']}", typ, **d) for typ, d in promotions])

        # (5) solver GRPO on retained questions; failed responses go to diagnosis
        if "solver" not in r.done:
            started = time.perf_counter()
            stats = self._train_solver(r)
            self.finish_phase(r, "solver", started, checkpoint=True, **stats)

        # (6) diagnosis and memory maintenance (Sec. 2.3)
        if "diagnose" not in r.done:
            started = time.perf_counter()
            summary = self._diagnose(r)
            self.finish_phase(r, "diagnose", started, dedup_truncated=summary.dedup_truncated)

        # (7) held-out evaluation, then commit M_t
        started = time.perf_counter()
        metrics = self.backend.evaluate(self.rng(t, "evaluate"))
        r.seconds["evaluate"] = time.perf_counter() - started
        report = self._report(r, metrics)
        self.append(
            [
                self.event(t, "eval", "eval.recorded", **metrics),
                self.event(
                    t, "round.committed", "round.committed",
                    questions=report.questions, retained=report.retained, failures=report.failures,
                    F=report.F, epsilon_next=report.epsilon_next, dedup_truncated=report.dedup_truncated,
                    heldout_acc=metrics.get("heldout_acc"), pseudo_label_acc=metrics.get("pseudo_label_acc"),
                    timing=report.seconds,
                ),
            ]
        )
        refresh_snapshots(self.store, self.run)
        self.on_round(report)
        return report

    # --- phases -------------------------------------------------------------------------------
    def _challenger_reward(self, t: int) -> Callable[[Sequence[GenerationRequest], Sequence[str]], list[float]]:
        n = self.cfg.grpo.construction_responses
        calls = [0]

        def reward(requests: Sequence[GenerationRequest], outputs: Sequence[str]) -> list[float]:
            calls[0] += 1
            questions = [cur.parse_question(o) for o in outputs]
            valid = {i: q for i, q in enumerate(questions) if q is not None}
            answers = self.backend.sample(list(valid.values()), n, self.rng(t, f"chal-votes-{calls[0]}"))
            p1 = [0.0] * len(questions)
            for i, responses in zip(valid, answers, strict=True):
                p1[i] = cur.votes([cur.extract_answer(x) for x in responses]).p1
            return cur.challenger_rewards(questions, p1, lam=self.cfg.reward.lam, threshold=self.cfg.reward.cluster_distance_threshold)

        return reward

    def _generate_and_score(self, r: _Round, reqs: list[GenerationRequest]) -> None:
        t = r.t
        self.progress("generate", 0, len(reqs))
        outputs = self.backend.generate(reqs, self.rng(t, "generate"))
        generated: list[EventIn] = []
        for i, (req, out) in enumerate(zip(reqs, outputs, strict=True)):
            text = cur.parse_question(out)
            if text is None:
                continue  # format-invalid: not a candidate
            qid = f"q{t}-{i:05d}"
            data: dict[str, Any] = {
                "question_id": qid, "mode": req.mode, "active_cause": req.active_cause,
                "mastered_cause": req.mastered_cause, "node": req.node, "text": text,
            }
            r.questions[qid] = data
            generated.append(self.event(t, f"gen/{qid}", "question.generated", **data))
        self.progress("generate", len(reqs), len(reqs))

        qids = list(r.questions)
        n = self.cfg.grpo.construction_responses
        responses = self.backend.sample([r.questions[q]["text"] for q in qids], n, self.rng(t, "construct"))
        scored: list[EventIn] = []
        for j, (qid, resp) in enumerate(zip(qids, responses, strict=True)):
            answers = [cur.extract_answer(x) for x in resp]
            v = cur.votes(answers)
            retained = v.label is not None and cur.keep(v.p1, v.p2, self.cfg.filter)
            ref = v.reference if retained else None  # earliest response of the label's class
            data = {
                "question_id": qid, "n": n, "p1": v.p1, "p2": v.p2, "pseudo_label": v.label,
                "retained": retained, "reference": resp[ref] if ref is not None else "",
            }
            r.scored[qid] = data
            scored.append(self.event(t, f"score/{qid}", "question.scored", **data))
            if j % 32 == 0:
                self.progress("construct", j, len(qids))
        self.progress("construct", len(qids), len(qids))
        self.append(generated + scored)

    def _train_solver(self, r: _Round) -> dict[str, float]:
        t = r.t
        retained = [qid for qid, s in r.scored.items() if s["retained"]]
        labels = [r.scored[q]["pseudo_label"] for q in retained]
        if not retained:
            return {"questions": 0}

        def reward(i: int, responses: Sequence[str]) -> list[float]:
            # the same agreement that put responses in the label's class (p1): +1 exactly for those
            return [1.0 if cur.agrees(cur.extract_answer(x), labels[i]) else -1.0 for x in responses]

        out = self.backend.train_solver(
            [r.questions[q]["text"] for q in retained], reward, self.cfg.grpo.solver_group_size,
            self.rng(t, "solver"), lambda _p, d, n: self.progress("solver", d, n),
        )
        failures: list[EventIn] = []
        for qid, responses, rewards in zip(retained, out.responses, out.rewards, strict=True):
            for j, (resp, rew) in enumerate(zip(responses, rewards, strict=True)):
                if rew < 0:
                    fid = f"f{t}-{qid[qid.index('-') + 1:]}-{j}"
                    data = {"failure_id": fid, "question_id": qid, "response": resp, "reference": r.scored[qid]["reference"]}
                    r.failures[fid] = data
                    failures.append(self.event(t, f"fail/{fid}", "failure.recorded", **data))
        self.append(failures)
        return {**out.stats, "failures": len(failures)}

    def _diagnose(self, r: _Round) -> DiagnosisSummary:
        inputs = []
        for fid, f in sorted(r.failures.items()):
            q = r.questions[f["question_id"]]
            known = tuple(c for c in (q["active_cause"], q["mastered_cause"]) if c is not None)
            inputs.append(
                FailureInput(
                    failure_id=fid, question_id=q["question_id"], question=q["text"],
                    pseudo_label=r.scored[q["question_id"]]["pseudo_label"] or "",
                    response=f["response"], reference=f["reference"], known_causes=known,
                )
            )
        if self.index is None:  # the LanceDB projection, kept in step across rounds
            self.index = VectorIndex(self.backend.embedder(), default_index_path(self.store.url), self.run)
        return asyncio.run(
            diagnose_round(
                store=self.store, run=self.run, round=r.t, failures=inputs,
                diagnostician=self.backend.diagnostician(), embedder=self.backend.embedder(),
                cfg=self.cfg.diagnosis, index=self.index, progress=self.progress,
            )
        )

    def _report(self, r: _Round, metrics: dict[str, float]) -> RoundReport:
        counts = Counter({etype: n for (_, etype), n in self.store.type_counts(self.run, round=r.t).items()})
        s = schedule(load_memory(self.store, self.run))
        return RoundReport(
            round=r.t,
            questions=len(r.questions),
            retained=sum(1 for d in r.scored.values() if d["retained"]),
            failures=len(r.failures),
            new_causes=counts["cause.created"],
            attributions=counts["failure.attributed"],
            promotions=counts["cause.promoted"],
            reactivations=counts["cause.reactivated"],
            merges=counts["nodes.merged"],
            failed_diagnoses=counts["diagnosis.failed"],
            dedup_truncated=int(r.stats.get("diagnose", {}).get("dedup_truncated", 0)),
            F=s.F,
            epsilon_next=s.epsilon,
            metrics=metrics,
            seconds=dict(r.seconds),
        )

