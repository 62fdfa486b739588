"""The co-evolution loop (Sec. 2, Appendix D-E), one round at a time.

Round t reads the schedule projected from M_{t-1}, updates the challenger on Q^chal, samples
Q^cur under the same schedule, votes and filters, promotes, updates the solver, records the
failures of retained questions, diagnoses them, and commits. The loop never changes the memory
itself: it reads projections and appends events. Every event id is derived from (run, round,
phase, item), every random stream from (seed, round, phase), so a round cut short is finished
by ``resume`` without counting anything twice.

Every read of the schedule and every write to the memory goes through :mod:`diagevo.rounds`, the
protocol any external trainer uses too: one path into the memory.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagevo.catalog import (
    CheckpointPruned,
    CheckpointSelected,
    CheckpointWritten,
    PhaseCompleted,
    QuestionScored,
    RunForked,
    TrainStep,
    failure_id,
    of_type,
)
from diagevo.catalog.failure import Failure
from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.filtering import anchor_count, confident
from diagevo.curriculum.prompts import parse_question
from diagevo.curriculum.reward import challenger_output_rewards, solver_scores
from diagevo.diagnosis.pipeline import DiagnosisSummary, diagnose
from diagevo.errors import BadServer, DiagnosesFailed, EndpointUnreachable, RetryLater, resume_call
from diagevo.files.confined import checkpoint_name, no_links_below, owned_dir, remove_owned
from diagevo.log import Recorder
from diagevo.log.paths import run_name
from diagevo.memory.sampler import GenerationRequest
from diagevo.results.stats import RoundRow
from diagevo.rounds import (
    OUR_TRAINER,
    Candidate,
    Request,
    Round,
    RoundProgress,
    logged_questions,
    seeded,
    start_run,
)
from diagevo.runtime.progress import ProgressFn, no_progress
from diagevo.schemas import text_limits
from diagevo.train.backend import Backend, Truth, numbers
from diagevo.train.config import Config
from diagevo.train.folders import RunFolders
from diagevo.train.labels import LABEL_FIELDS, audit_labels, in_wrong_share, wrong_label
from diagevo.train.tracking import Tracker, open_tracker
from diagevo.views.admission import admitted_rows
from diagevo.views.checkpoints import checkpoint_log, resume_checkpoint
from diagevo.views.index import VectorIndex, kept_index_path
from diagevo.views.memory import committed_rounds
from diagevo.views.stats import round_stats

# the longest wait between two asks of a diagnostician that stopped answering
MAX_OUTAGE_PAUSE_S = 60.0


def outage_line(exc: EndpointUnreachable | DiagnosesFailed) -> str:
    """What stopped the diagnosis, short enough to leave room for the command that resumes."""
    if isinstance(exc, EndpointUnreachable):
        return exc.message[:160]
    why, _n = exc.reasons[0] if exc.reasons else ("", 0)
    return f"{exc.failed} of {exc.total} failures failed to diagnose (the most: {why[:100]})"


@dataclass
class RoundReport:
    """What one round did, for the CLI's table: its row of the run's statistics
    (:mod:`diagevo.views.stats`, the same figures as ``memory stats``), the metrics the backend
    measured, the seconds of each phase and the diagnosis's own counts."""

    round: int
    stats: RoundRow
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    dedup_truncated: int = 0  # Prompt 2 lists cut to diagnosis.dedup_candidates


@dataclass
class _LoopState:
    """Working state of round t: where the round protocol says it stands, and what the loop
    holds of it (the questions the solver trains on, each phase's seconds and figures)."""

    t: int
    progress: RoundProgress
    questions: dict[str, str] = field(default_factory=dict)  # question_id -> text
    scored: dict[str, QuestionScored] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    phases: dict[str, PhaseCompleted] = field(default_factory=dict)  # phase -> its phase.completed
    finished: set[str] = field(default_factory=set)  # phases done in this process

    def done(self, phase: str) -> bool:
        return phase in self.finished or self.progress.done(phase)

    def dedup_truncated(self) -> int:
        """How many failures the round's diagnosis left out of deduplication (its phase's figure)."""
        diagnosed = self.phases.get("diagnose")
        return int(diagnosed.dedup_truncated or 0) if diagnosed else 0


class Trainer:
    """Runs rounds of one run against one store and one backend."""

    def __init__(
        self,
        config: Config,
        store: Recorder,
        backend: Backend,
        run: str,
        *,
        folders: RunFolders | None = None,
        progress: ProgressFn = no_progress,
        on_round: Callable[[RoundReport], None] = lambda r: None,
    ) -> None:
        self.cfg = config
        self.folders = folders or RunFolders.of(config, store.url)  # keyed by database
        self.store = store
        self.backend = backend
        self.run = run
        self.progress = progress
        self.on_round = on_round
        self.seed = config.train.seed
        self.ckpt_root = self.folders.checkpoints
        # absolute (a resume may start elsewhere), reached without a link (nothing is written or
        # pruned outside the folder)
        self.ckpt_dir = owned_dir(self.ckpt_root, run_name(run), create=False)
        self.index: VectorIndex | None = None
        self.tracker = Tracker()  # train.report_to's, opened by train()

    # --- plumbing -----------------------------------------------------------------------------
    def rng(self, t: int, phase: str) -> random.Random:
        return seeded(self.seed, t, phase)

    def finish_phase(
        self, rnd: Round, r: _LoopState, phase: str, started: float, *, checkpoint: bool = False, **stats: Any
    ) -> None:
        """Record a finished phase; with ``checkpoint``, first save the models. The checkpoint
        and the phase land in one append, so a resumed round never starts from a checkpoint
        whose phase it would then run again."""
        events = []
        pruned: list[Path] = []
        if checkpoint:
            path = owned_dir(self.ckpt_root, run_name(self.run), f"round{r.t:03d}-{phase}")
            no_links_below(path)  # a phase run again writes over its own checkpoint, nothing planted there
            self.backend.save(path)
            size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())  # the checkpoint's files
            written = CheckpointWritten(path=path.name, phase=phase, bytes=size)  # in the run's folder
            events.append(rnd.event(f"checkpoint/{phase}", written))
            for where, gone in self.to_prune(phase, r.t):
                events.append(rnd.event(f"pruned/{phase}/{gone.written_round}", gone))
                pruned.append(Path(where))
        r.seconds[phase] = time.perf_counter() - started
        steps = self.step_events(rnd, phase)
        events += steps
        r.phases[phase] = PhaseCompleted(phase=phase, seconds=r.seconds[phase], stats=stats)
        events.append(rnd.event(f"phase/{phase}", r.phases[phase]))
        rnd.notes(events)
        for s in of_type(TrainStep, steps):  # the tracker's copy, once the log has them
            self.tracker.log({f"{phase}/{k}": v for k, v in numbers(s.metrics).items()}, s.global_step)
        if pruned:  # after the log says so: a crash in between leaves a file the log calls gone
            here = owned_dir(self.ckpt_root, run_name(self.run), create=False)  # still no link on the way
            for dead in pruned:
                remove_owned(here, dead)
        r.finished.add(phase)

    def to_prune(self, phase: str, t: int) -> list[tuple[str, CheckpointPruned]]:
        """The checkpoints of ``phase`` that ``train.keep_checkpoints`` lets go once round ``t``'s
        is written: all but the last N of this run's own directory (a fork's copied ones live in
        its source's), keeping the ones a fork of this run or a selected checkpoint names. Model
        checkpoints only: a backend whose checkpoints are small states (the simulator's) keeps
        them all, so its runs fork at any round. The checkpoint events the rule refuses are
        passed over (:func:`~diagevo.views.checkpoints.checkpoint_log`)."""
        keep = self.cfg.train.keep_checkpoints
        if keep <= 0 or not getattr(self.backend, "checkpoints_are_models", True):
            return []
        log = checkpoint_log(self.store, self.run)
        mine = [
            (e.round, c)
            for e in log.written
            if isinstance(c := e.event, CheckpointWritten) and c.phase == phase and e.round < t
            if log.gone(e) is None and self.own_checkpoint(c.path) is not None
        ]
        needed = self.needed_rounds()
        old = mine[: max(0, len(mine) - (keep - 1))]  # the new one is the last of the N kept
        return [
            (
                str(self.own_checkpoint(c.path)),
                CheckpointPruned(path=c.path, phase=phase, written_round=t0, bytes=c.bytes or 0),
            )
            for t0, c in old
            if t0 not in needed
        ]

    def own_checkpoint(self, path: str) -> Path | None:
        """Where a checkpoint this run wrote lies, in its own folder (None: a fork's copied one,
        in its source's folder, or a name the loop never gives)."""
        name = checkpoint_name(path)
        if name is None or (path.startswith("/") and Path(os.path.abspath(path)).parent != self.ckpt_dir):
            return None
        where = self.ckpt_dir / name
        return where if where.is_dir() and not where.is_symlink() else None

    def needed_rounds(self) -> set[int]:
        """Rounds of this run whose checkpoints are still needed: a fork's round (its resume loads
        them) and a selected checkpoint's."""
        rounds = {e.round for e in admitted_rows(self.store, self.run, types=(CheckpointSelected,))}
        for other in self.store.runs():
            if other == self.run:
                continue
            forks = of_type(RunForked, self.store.rows(other, types=(RunForked,)))
            rounds.update(f.source_round for f in forks if f.source_run == self.run)
        return rounds

    def step_events(self, rnd: Round, phase: str) -> list[Any]:
        """``train.step`` for each GRPO step the backend's last phase logged (a backend without
        per-step rows, the simulator's, gives none), numbered on from the role's earlier phases.
        They land in the phase's append: a phase run again after a crash logs its steps once."""
        take = getattr(self.backend, "take_steps", None)
        rows = take() if take is not None and phase in ("challenger", "solver") else []
        if not rows:
            return []
        steps = of_type(TrainStep, admitted_rows(self.store, self.run, types=(TrainStep,)))
        before = max((s.global_step for s in steps if s.role == phase), default=0)
        return [
            rnd.event(f"step/{phase}/{step}", TrainStep(role=phase, step=step, global_step=before + step, metrics=row))
            for step, row in rows
        ]

    # --- run ----------------------------------------------------------------------------------
    def load_embedder(self) -> None:
        """Load the embedding model once, as its own phase (``embedder`` 0/1, then 1/1), before
        any round's clock runs: the first round's diagnosis is not charged with it."""
        self.progress("embedder", 0, 1)
        load = getattr(self.backend.embedder(), "load", None)
        if load is not None:
            load()
        self.progress("embedder", 1, 1)

    def train(self, rounds: int | None = None) -> list[RoundReport]:
        # ``run.started``: a no-op when the run exists (it goes on with the config it holds)
        if self.cfg.filter.shared_error_check == "variants":  # a backend that writes no rewordings says so first
            self.backend.rewordings([], self.cfg.filter.check_variants, random.Random(0))
        start_run(self.store, self.run, self.cfg, self.seed, resume="allow", trainer=OUR_TRAINER)
        last = max(committed_rounds(self.store, self.run), default=0)
        total = rounds if rounds is not None else self.cfg.train.rounds
        reports = []
        self.progress("rounds", last, total)
        if last < total:
            self.load_embedder()
            self.tracker = open_tracker(self.cfg, self.run, self.folders)
        try:
            with text_limits(self.cfg.limits):  # the rounds' untrusted texts stored under the run's [limits]
                for t in range(last + 1, total + 1):
                    reports.append(self.round(t))
                    self.progress("rounds", t, total)
        finally:
            self.tracker.close()
            self.tracker = Tracker()
        return reports

    def _rebuild(self, rnd: Round) -> _LoopState:
        """What round t already did, from the round protocol (its phases with their figures, its
        checkpoint), and its questions only when the solver has still to train on them. A round
        that starts fresh or got past its solver reads a few dozen events, however long the log."""
        r = _LoopState(t=rnd.t, progress=rnd.progress())
        r.phases.update(r.progress.phases)
        r.seconds.update((phase, p.seconds or 0.0) for phase, p in r.phases.items())
        if r.done("construct") and not r.done("solver"):
            for q in logged_questions(self.store, self.run, t=rnd.t):
                r.questions[q.question_id], r.scored[q.question_id] = q.text, q.votes
        return r

    def round(self, t: int) -> RoundReport:
        rnd = Round.open(self.store, self.run, t)  # reads the config and M_{t-1} once
        r = self._rebuild(rnd)
        resumed = resume_checkpoint(self.store, self.run, t, self.ckpt_root)
        if resumed is not None:
            self.backend.load(resumed)
        m = self.cfg.memory
        n_chal, n_cur = self.cfg.challenger_questions, self.cfg.train.curriculum_questions

        def requests(n: int, purpose: str) -> list[Request]:
            # drawn from the schedule of M_{t-1} (Eq. 1-2)
            return rnd.requests(n, purpose=purpose, seed=self.seed)

        # (1) challenger GRPO on Q^chal against the frozen solver's votes (Eq. 8-10)
        if not r.done("challenger"):
            started = time.perf_counter()
            stats: dict[str, float] = {}
            if m.challenger_updates:
                with self.tracker.phase(t, "challenger"):
                    stats = self.backend.train_challenger(
                        [q.generation_request() for q in requests(n_chal, "challenger")],
                        self._challenger_reward(t),
                        self.rng(t, "challenger"),
                        lambda _p, d, n: self.progress("challenger", d, n),
                    )
            self.finish_phase(rnd, r, "challenger", started, checkpoint=True, **stats)

        # (2) Q^cur under the same schedule, (3) N construction responses, votes, filter (Eq. 3)
        if not r.done("construct"):
            started = time.perf_counter()
            self._generate_and_score(rnd, r, requests(n_cur, "curriculum"))
            retained = sum(s.retained for s in r.scored.values())
            self.finish_phase(rnd, r, "construct", started, questions=len(r.questions), retained=retained)

        # (4) promotions from M_{t-1} and the round's evidence (Eq. 5-6)
        if not r.done("promote"):
            rnd.promote(allow_empty=True)  # a challenger none of whose outputs parsed leaves none: the round goes on
            r.finished.add("promote")

        # (5) solver GRPO on retained questions; failed responses go to diagnosis
        if not r.done("solver"):
            if "construct" not in r.finished:  # resumed past the generation: the world writes the questions again
                reqs = [q.generation_request() for q in requests(n_cur, "curriculum")]
                self.backend.recall(reqs, self.rng(t, "generate"))
            started = time.perf_counter()
            with self.tracker.phase(t, "solver"):
                stats = self._train_solver(rnd, r)
            self.finish_phase(rnd, r, "solver", started, checkpoint=True, **stats)

        # (6) diagnosis and memory maintenance (Sec. 2.3)
        if not r.done("diagnose"):
            started = time.perf_counter()
            summary = self._diagnose(rnd)
            self.finish_phase(rnd, r, "diagnose", started, dedup_truncated=summary.dedup_truncated)

        # (7) held-out evaluation, then commit M_t
        started = time.perf_counter()
        metrics = self.backend.evaluate(self.rng(t, "evaluate"))
        r.seconds["evaluate"] = time.perf_counter() - started
        solver_stats = r.phases["solver"].stats if "solver" in r.phases else None
        rnd.commit(
            metrics,
            summary={
                **{k: v for k, v in (solver_stats or {}).items() if k in LABEL_FIELDS},  # where the truth is known
                "dedup_truncated": r.dedup_truncated(),
                # the round's own figures in round.committed too (the ablation reads val_acc there)
                "heldout_acc": metrics.get("heldout_acc"),
                "pseudo_label_acc": metrics.get("pseudo_label_acc"),
                **({"val_acc": metrics["val_acc"]} if "val_acc" in metrics else {}),  # the sim's validation split
                "timing": dict(r.seconds),
            },
        )
        row = next(row for row in round_stats(self.store, self.run) if row.round == t)
        report = RoundReport(t, row, metrics, dict(r.seconds), r.dedup_truncated())
        figures = {f"round/{k}": v for k, v in numbers({**row.to_json(), **metrics}).items() if k != "round"}
        self.tracker.log(figures, t)
        self.on_round(report)
        return report

    # --- phases -------------------------------------------------------------------------------
    def _challenger_reward(self, t: int) -> Callable[[Sequence[GenerationRequest], Sequence[str]], list[float]]:
        n = self.cfg.grpo.construction_responses
        calls = [0]

        def reward(requests: Sequence[GenerationRequest], outputs: Sequence[str]) -> list[float]:
            calls[0] += 1
            rng = self.rng(t, f"chal-votes-{calls[0]}")
            return challenger_output_rewards(
                outputs,
                lambda qs: self.backend.sample(qs, n, rng),
                lam=self.cfg.reward.lam,
                threshold=self.cfg.reward.cluster_distance_threshold,
                parse=self.question_of,
            )

        return reward

    def question_of(self, output: str) -> str | None:
        """The question a challenger output holds (Appendix J's format), None for an invalid one:
        malformed, or with ``challenger.known_questions_only`` one the world does not know."""
        text = parse_question(output)
        if text is None or not self.cfg.challenger.known_questions_only:
            return text
        known = self.backend.truth(text)
        return text if known is not None and known.skill is not None else None

    def _generate_and_score(self, rnd: Round, r: _LoopState, reqs: list[Request]) -> None:
        t = r.t
        self.progress("generate", 0, len(reqs))
        outputs = self.backend.generate([q.generation_request() for q in reqs], self.rng(t, "generate"))
        candidates: list[tuple[Request, str]] = []
        for req, out in zip(reqs, outputs, strict=True):
            text = self.question_of(out)
            if text is not None:  # a format-invalid output is not a candidate
                candidates.append((req, text))
        self.progress("generate", len(reqs), len(reqs))

        n = self.cfg.grpo.construction_responses
        self.progress("construct", 0, len(candidates))
        initial = self.cfg.filter.labeler == "initial"  # the run's first solver votes, never the trained one
        responses = self.backend.sample([text for _, text in candidates], n, self.rng(t, "construct"), initial=initial)
        reworded = self._variant_answers([text for _, text in candidates], n, t)
        scored = rnd.record(
            [
                Candidate(
                    question_id=q.question_id,
                    mode=q.mode,
                    text=text,
                    active_cause=q.active_cause,
                    mastered_cause=q.mastered_cause,
                    node=q.node,
                    responses=tuple(resp),
                    variant_answers=variants,
                )
                for (q, text), resp, variants in zip(candidates, responses, reworded, strict=True)
            ]
        )
        for s in scored:
            r.questions[s.question_id] = s.text
            r.scored[s.question_id] = s.event()
        self.progress("construct", len(candidates), len(candidates))

    def _variant_answers(self, texts: list[str], n: int, t: int) -> list[tuple[tuple[str | None, ...], ...] | None]:
        """The shared-error check's evidence (``filter.shared_error_check = "variants"``): the
        backend's rewordings of each question, each answered ``n`` times by the solver as the
        question was; None for every question without the check."""
        if self.cfg.filter.shared_error_check != "variants":
            return [None] * len(texts)
        rewordings = self.backend.rewordings(texts, self.cfg.filter.check_variants, self.rng(t, "variants"))
        flat = [v for vs in rewordings for v in vs]
        initial = self.cfg.filter.labeler == "initial"
        answered = iter(self.backend.sample(flat, n, self.rng(t, "variant-votes"), initial=initial))
        return [tuple(tuple(extract_answer(r) for r in next(answered)) for _ in vs) for vs in rewordings]

    def _train_solver(self, rnd: Round, r: _LoopState) -> dict[str, Any]:
        t = r.t
        retained = [qid for qid, s in r.scored.items() if s.retained]
        labels = [r.scored[q].pseudo_label for q in retained]
        if not retained:
            return {"questions": 0}
        anchors = self._anchors(r, len(retained))
        texts = [r.questions[q] for q in retained]
        trained = texts + [r.questions[q] for q in anchors]
        targets = labels + [r.scored[q].pseudo_label for q in anchors]
        wrong: list[Truth | None] = [None] * len(trained)  # the label-accuracy control's questions
        if self.cfg.solver.reward == "true_answer":  # the oracle arm: the world's answer where it knows one
            truths = [self.backend.truth(q) for q in trained]
            targets = [k.answer if k is not None else lab for k, lab in zip(truths, targets, strict=True)]
            share = self.cfg.solver.wrong_label_share
            wrong = [k if k and in_wrong_share(self.seed, q, share) else None for k, q in zip(truths, trained)]

        unchecked: set[tuple[int, str]] = set()  # responses whose check passed their own limits: no failure known

        def reward(i: int, responses: Sequence[str]) -> list[float]:
            # the same agreement that put responses in the label's class (p1): +1 exactly for those
            known = wrong[i]
            scores = solver_scores(responses, targets[i] if known is None else wrong_label(known, responses))
            unchecked.update((i, resp) for resp, s in zip(responses, scores, strict=True) if not s.checked)
            return [s.score for s in scores]

        out = self.backend.train_solver(
            trained,
            reward,
            self.cfg.solver.group_size,
            self.rng(t, "solver"),
            lambda _p, d, n: self.progress("solver", d, n),
        )
        # every failed optimization response, in whichever step its question was drawn (Appendix E)
        cap = self.cfg.diagnosis.max_failures_per_question
        failures: list[Failure] = []
        capped = blank = skipped = 0
        kept = len(retained)  # the anchors' responses are no evidence: neither failures nor label audit
        responses_of, rewards_of = out.responses[:kept], out.rewards[:kept]
        for i, (qid, responses, rewards) in enumerate(zip(retained, responses_of, rewards_of, strict=True)):
            failed = [(j, resp) for j, (resp, rew) in enumerate(zip(responses, rewards, strict=True)) if rew < 0]
            skipped += sum(1 for _, resp in failed if (i, resp) in unchecked)
            failed = [(j, resp) for j, resp in failed if (i, resp) not in unchecked]
            # an empty completion (the end token first) leaves the diagnostician nothing to read
            blank += sum(1 for _, resp in failed if not resp.strip())
            failed = [(j, resp) for j, resp in failed if resp.strip()]
            if cap is not None and len(failed) > cap:
                capped += len(failed) - cap
                failed = failed[:cap]
            reference = r.scored[qid].reference
            failures += [
                Failure(failure_id=failure_id(qid, j), question_id=qid, response=resp, reference=reference)
                for j, resp in failed
            ]
        if failures:
            rnd.record_failures(failures)
        labelled = audit_labels(texts, labels, responses_of, rewards_of, self.backend.truth)
        return {
            **out.stats,
            **({"anchors": len(anchors)} if anchors else {}),
            **labelled.summary(),
            "failures": len(failures),
            **({"failures_capped": capped} if cap is not None else {}),
            **({"failures_blank": blank} if blank else {}),
            **({"failures_unchecked": skipped} if skipped else {}),
        }

    def _anchors(self, r: _LoopState, retained: int) -> list[str]:
        """The confident questions that join the retained ones (``solver.anchor_share``; none in
        the paper), drawn with the round's own seed so a resumed round draws the same."""
        pool = [
            qid
            for qid, s in r.scored.items()
            if not s.retained and s.pseudo_label is not None and confident(s.p1, self.cfg.filter.p_high)
        ]
        count = anchor_count(self.cfg.solver.anchor_share, retained, len(pool))
        return sorted(self.rng(r.t, "anchors").sample(pool, count)) if count else []

    def _diagnose(self, rnd: Round) -> DiagnosisSummary:
        """Diagnose the round; a diagnostician that stopped answering is asked again with
        backoff for ``diagnosis.outage_wait_s`` (each call asks only for the failures not yet
        diagnosed), then the run stops, the round uncommitted, with the command that resumes it."""
        if self.index is None:  # kept in step across rounds (and on disk, for a costly embedder)
            emb = self.backend.embedder()
            self.index = VectorIndex(emb, kept_index_path(self.store.url, emb), self.run)
        d = self.cfg.diagnosis
        started, pause = time.monotonic(), d.outage_backoff_s
        while True:
            try:
                return diagnose(
                    rnd,
                    diagnostician=self.backend.diagnostician(),
                    embedder=self.backend.embedder(),
                    cfg=d,
                    index=self.index,
                    progress=self.progress,
                )
            except (EndpointUnreachable, DiagnosesFailed) as exc:
                waited = time.monotonic() - started
                down = isinstance(exc, RetryLater)  # not answering: asked again; answering wrongly: not
                if not down or waited + pause > d.outage_wait_s:
                    raise (RetryLater if down else BadServer)(
                        f"run {self.run!r} stopped in round {rnd.t}, not committed: {outage_line(exc)}; once the "
                        f"diagnostician answers{'' if down else ' as it should'}, continue with",
                        resume_call(self.run, self.cfg.train.out_dir),
                        then=f" (waited {waited:.0f} s, diagnosis.outage_wait_s {d.outage_wait_s:g})",
                        about=self.run,
                    ) from None
                self.progress("outage", round(waited + pause), None)  # the seconds waited, said before the wait
                time.sleep(pause)
                pause = min(2 * pause, MAX_OUTAGE_PAUSE_S)
