"""``SimBackend``: the simulator world behind the :class:`~diagevo.train.backend.Backend` interface.

Ground truth is known here, so :meth:`SimBackend.evaluate` measures what the paper measures with
benchmarks and human-verified labels: accuracy on a fixed held-out set per family, and the
accuracy of majority-of-12 pseudo-labels on a fixed shared set of challenger-style questions
(Figure 3c). Both sets depend only on the world seed, so every run and variant sees the same ones.

Granularity: every skill family has several trap variants (44 in the default 12-family world),
each its own sub-skill of the solver with its own wrong path and cause paraphrases, and skill
nodes correspond to families. The memory therefore holds tens of causes under about one node per
family, and a cause collects only the failures of its own mechanism: at the default scale
(|Q^cur| = 192) a cause is targeted by a few questions a round, as at the paper's (256 candidates
for 150-190 Active causes), so a promoted cause stays Mastered unless its mechanism fails again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from diagevo.curriculum.answers import extract_answer
from diagevo.diagnosis.interface import Diagnostician, Embedder
from diagevo.diagnosis.tools import embedder_for, llm_diagnostician
from diagevo.errors import BadInput
from diagevo.files.written import write_replacing
from diagevo.memory.sampler import GenerationRequest
from diagevo.runtime.progress import ProgressFn, no_progress
from diagevo.train.backend import ChallengerRewardFn, SolverRewardFn, SolverRound, Truth
from diagevo.train.labels import SHARED_LABEL_VOTES
from diagevo.train.sim import text as tx
from diagevo.train.sim.challenger import Challenger, Choice
from diagevo.train.sim.diagnostician import SimDiagnostician
from diagevo.train.sim.families import families, variants_of
from diagevo.train.sim.solver import Outcome, Solver, group_advantages, sigmoid
from diagevo.train.sim.world import MAX_DIFFICULTY, MAX_DISTRACT, MAX_PAD, Registry, SimQuestion, Spec, render_response

if TYPE_CHECKING:  # a type only: the composed config imports this package's config, never the reverse
    from diagevo.train.config import Config

STATE_FILE = "sim_backend.json"
UNFAMILIAR = "The statement does not follow a familiar pattern, so estimate the quantity directly."


def wrap(text: str) -> str:
    return f"<question>\n{text}\n</question>"


class SimBackend:
    """The CPU simulator world: challenger, solver and diagnostician in one process."""

    name = "sim"
    checkpoints_are_models = False  # its states are small: every round's is kept, a fork at any round works

    def __init__(self, config: Config, embedder: Embedder | None = None) -> None:
        self.config = config
        self.seed = config.train.seed
        self.params = config.sim.params
        self.fams = families(config.sim.n_families)
        self.variants = variants_of(self.fams)
        self.registry = Registry({v.key: v for v in self.variants})
        self.solver = Solver(self.fams, config.sim)
        self.initial = Solver(self.fams, config.sim)  # the labeler of filter.labeler = "initial": never trained
        self.challenger = Challenger(
            self.fams,
            self.params,
            self.embedder,
            composition=config.sim.composition,
            skewed_start=config.sim.skewed_challenger_start,
        )
        self._emb = embedder
        self._diag: Diagnostician | None = None

    # ------------------------------------------------------------------ models

    def embedder(self) -> Embedder:
        if self._emb is None:
            self._emb = embedder_for(self.config.diagnosis)
        return self._emb

    def diagnostician(self) -> Diagnostician:
        if self._diag is None:
            if self.config.diagnosis.llm_url:  # a real diagnostician over the simulated world's failures
                self._diag = llm_diagnostician(self.config.diagnosis)
            else:
                self._diag = SimDiagnostician(
                    self.fams,
                    self.config.sim.diagnostician_error_rate,
                    self.embedder,
                    self.params.world_seed,
                    dedup_mid=self.params.dedup_mid,
                    dedup_width=self.params.dedup_width,
                    assign_mid=self.params.assign_mid,
                )
        return self._diag

    # ------------------------------------------------------------------ challenger

    def _propose(
        self, requests: Sequence[GenerationRequest], rng: random.Random
    ) -> tuple[list[SimQuestion], list[Choice]]:
        qs, choices = [], []
        for req in requests:
            spec, choice = self.challenger.propose(req, rng)
            qs.append(self.registry.register(spec))
            choices.append(choice)
        return qs, choices

    def generate(self, requests: Sequence[GenerationRequest], rng: random.Random) -> list[str]:
        qs, _ = self._propose(requests, rng)
        return [wrap(q.text) for q in qs]

    def recall(self, requests: Sequence[GenerationRequest], rng: random.Random) -> None:
        self.generate(requests, rng)  # the registry learns the round's questions again

    def train_challenger(
        self,
        requests: Sequence[GenerationRequest],
        reward_fn: ChallengerRewardFn,
        rng: random.Random,
        progress: ProgressFn = no_progress,
    ) -> dict[str, float]:
        """REINFORCE with GRPO advantages.

        With ``sim.paper_challenger_steps`` (the paper's schedule): ``challenger.max_steps``
        steps, each on its share of the prompts, every prompt answered by a group of
        ``challenger.group_size`` questions whose rewards are normalised within the group.
        Otherwise ``challenger_steps`` passes over all prompts, one question each: identical
        prompts form a group (all free requests are one prompt); a prompt drawn once is normalised
        against the batch of its kind instead."""
        if self.config.sim.paper_challenger_steps:
            n, size = len(requests), self.config.challenger.group_size
            steps = max(1, min(self.config.challenger.max_steps, n))
            bounds = [round(i * n / steps) for i in range(steps + 1)]
            batches = [[r for r in requests[bounds[s] : bounds[s + 1]] for _ in range(size)] for s in range(steps)]

            def advantages(
                requests: Sequence[GenerationRequest], choices: Sequence[Choice], rewards: Sequence[float]
            ) -> list[float]:  # each prompt's group of questions normalised on its own
                return [a for i in range(0, len(requests), size) for a in group_advantages(rewards[i : i + size])]
        else:
            steps = max(1, min(self.params.challenger_steps, self.config.challenger.max_steps))
            batches = [list(requests)] * steps
            advantages = _advantages
        rewards_seen: list[float] = []
        words: list[int] = []
        progress("challenger", 0, steps)
        for step, batch in enumerate(batches):
            qs, choices = self._propose(batch, rng)
            rewards = list(reward_fn(batch, [wrap(q.text) for q in qs]))
            self.challenger.update(choices, advantages(batch, choices, rewards))
            rewards_seen.extend(rewards)
            words.extend(q.words for q in qs)
            progress("challenger", step + 1, steps)
        stats = {
            "reward_mean": _mean(rewards_seen),
            "question_words": _mean(words),
            "steps": float(steps),
        }
        for kind in ("free", "guided"):
            for h, v in self.challenger.expected(kind).items():
                stats[f"{kind}_{h}"] = v
        return stats

    # ------------------------------------------------------------------ solver

    def _respond(
        self, text: str, n: int, rng: random.Random, solver: Solver | None = None
    ) -> tuple[SimQuestion | None, list[Outcome], list[str]]:
        """``n`` responses to ``text``: the solver's (or ``solver``'s), with their outcomes, to a
        question the world wrote; to any other text a few hash-derived guesses, no known truth."""
        q = self.registry.lookup(text)
        if q is None:
            guesses = [int(b) % 50 for b in hashlib.sha256(text.encode()).digest()[:3]]
            return None, [], [render_response((UNFAMILIAR,), rng.choices(guesses, (5, 3, 2))[0]) for _ in range(n)]
        outs = (solver or self.solver).outcomes(q, n, rng)
        return q, outs, [render_response(q.paths[o.ok], o.value) for o in outs]

    def sample(self, questions: Sequence[str], n: int, rng: random.Random, *, initial: bool = False) -> list[list[str]]:
        solver = self.initial if initial else self.solver
        return [self._respond(text, n, rng, solver)[2] for text in questions]

    def truth(self, question: str) -> Truth | None:
        """A question the world wrote: its answer as a response boxes it, and its family (a
        stitched question's first part's, as held-out accuracy groups it)."""
        q = self.registry.lookup(question)
        if q is None:
            return None
        return Truth(extract_answer(tx.boxed(q.answer)) or str(q.answer), q.parts[0].family)

    def train_solver(
        self,
        questions: Sequence[str],
        reward_fn: SolverRewardFn,
        group_size: int,
        rng: random.Random,
        progress: ProgressFn = no_progress,
    ) -> SolverRound:
        """GRPO over the retained questions in ``solver.max_steps`` minibatches; then drift."""
        n = len(questions)
        steps = max(1, min(self.config.solver.max_steps, n))
        bounds = [round(i * n / steps) for i in range(steps + 1)]
        out = SolverRound.over(n)
        practice = [0] * len(self.variants)
        index = self.solver.index
        progress("solver", 0, n)
        for s in range(steps):
            grad = self.solver.new_grad()
            for i in range(bounds[s], bounds[s + 1]):
                q, outs, responses = self._respond(questions[i], group_size, rng)
                rewards = out.score(i, responses, reward_fn)
                if q is not None:
                    self.solver.accumulate(grad, q, outs, group_advantages(rewards))
                    for part in q.parts:
                        practice[index[part.skill]] += group_size
            self.solver.apply(grad)
            progress("solver", bounds[s + 1], n)
        self.solver.drift(practice)
        flat = [r for rs in out.rewards for r in rs]
        stats = {
            "reward_mean": _mean(flat),
            "failed_fraction": out.failed_fraction(),
            "steps": float(steps),
            "skill_mean": float(np.mean([sigmoid(t) for t in self.solver.theta])),
            "care": self.solver.care,
        }
        return dataclasses.replace(out, stats=stats)

    # ------------------------------------------------------------------ evaluation

    def _benchmark_like(self, rng: random.Random) -> list[SimQuestion]:
        """Benchmark-like questions: unpadded, every variant of a family and every difficulty
        equally often (``heldout_per_family`` a family)."""
        per = self.config.sim.heldout_per_family
        return [
            self.registry.question(
                Spec(
                    (f.variants[j % len(f.variants)].key,),
                    (j // len(f.variants)) % (MAX_DIFFICULTY + 1),
                    0,
                    0,
                    rng.getrandbits(48),
                )
            )
            for f in self.fams
            for j in range(per)
        ]

    @cached_property
    def _eval_sets(self) -> tuple[list[SimQuestion], list[SimQuestion], list[SimQuestion]]:
        """Held-out, validation and shared pseudo-label questions, fixed by the world seed."""
        rng = random.Random(f"sim-eval:{self.params.world_seed}")
        heldout = self._benchmark_like(rng)
        # validation: drawn from the same distribution with other seeds, for choosing a
        # round without looking at the held-out set (the paper's protocol)
        validation = self._benchmark_like(random.Random(f"sim-validation:{self.params.world_seed}"))
        # shared pseudo-label set: challenger-style questions over the whole range of lengths
        # and distractors (Figure 3c uses round-5 challenger questions), one in five stitched
        # with a sibling variant (stitching pairs causes of one skill node)
        shared = []
        keys = [v.key for v in self.variants]
        siblings = {
            v.key: [w.key for w in self.variants if w.family == v.family and w.key != v.key] for v in self.variants
        }
        for _ in range(self.config.sim.shared_label_questions):
            a = rng.choice(keys)
            skills = (a, rng.choice(siblings[a])) if siblings[a] and rng.random() < 0.2 else (a,)
            spec = Spec(
                skills,
                rng.randint(0, MAX_DIFFICULTY),
                rng.randint(0, MAX_PAD),
                rng.randint(0, MAX_DISTRACT),
                rng.getrandbits(48),
            )
            shared.append(self.registry.question(spec))
        return heldout, validation, shared

    def rewordings(self, questions: Sequence[str], count: int, rng: random.Random) -> list[list[str]]:
        """The simulator writes no rewordings: its solver's errors are drawn per question spec."""
        raise BadInput(
            'filter.shared_error_check = "variants" needs rewordings of the questions, which the simulator does not '
            "write: run it on the mini world (configs/mini-cpu.toml)"
        )

    def evaluate(self, rng: random.Random) -> dict[str, float]:
        heldout, validation, shared = self._eval_sets
        k = self.params.eval_samples

        def accuracy(q: SimQuestion) -> float:
            return sum(o.value == q.answer for o in self.solver.outcomes(q, k, rng)) / k

        per_family: dict[str, list[float]] = defaultdict(list)
        for q in heldout:
            per_family[q.parts[0].family].append(accuracy(q))
        labels_ok = [label_is_right(self.solver, q, rng) for q in shared]
        # after the other two, so that adding it left their random draws unchanged
        val = [accuracy(q) for q in validation]
        accs = [a for v in per_family.values() for a in v]
        out = {
            "heldout_acc": _mean(accs),
            "pseudo_label_acc": _mean(labels_ok),
            "val_acc": _mean(val),
        }
        for f in self.fams:
            out[f"acc/{f.name}"] = _mean(per_family[f.name])
        return out

    # ------------------------------------------------------------------ checkpoints

    def save(self, path: Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        data = {
            "version": 2,
            "seed": self.seed,
            "skills": [v.key for v in self.variants],
            "solver": self.solver.state(),
            "challenger": self.challenger.state(),
            "registry": [spec.to_list() for spec in self.registry.specs.values()],
        }
        write_replacing(path / STATE_FILE, json.dumps(data, separators=(",", ":")))

    def load(self, path: Path) -> None:
        data = read_state(path)
        if data.get("skills") != [v.key for v in self.variants]:
            raise BadInput(f"{path}: checkpoint was written for a different set of sim skills and variants")
        self.solver.load_state(data["solver"])
        self.challenger.load_state(data["challenger"])
        self.registry.specs.clear()
        for item in data["registry"]:
            self.registry.register(Spec.from_list(item))


def read_state(checkpoint: Path) -> dict:
    """The simulator's state saved in ``checkpoint`` (:meth:`SimBackend.save`)."""
    data: dict = json.loads((Path(checkpoint) / STATE_FILE).read_text(encoding="utf-8"))
    return data


def label_is_right(solver: Solver, q: SimQuestion, rng: random.Random) -> bool:
    """Whether the majority of ``SHARED_LABEL_VOTES`` responses of ``solver`` (the pseudo-label of
    Figure 3c) is the true answer."""
    votes = Counter(o.value for o in solver.outcomes(q, SHARED_LABEL_VOTES, rng))
    return bool(votes.most_common(1)[0][0] == q.answer)


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if xs else 0.0


def _advantages(
    requests: Sequence[GenerationRequest], choices: Sequence[Choice], rewards: Sequence[float]
) -> list[float]:
    groups: dict[GenerationRequest, list[int]] = defaultdict(list)
    for i, req in enumerate(requests):
        groups[req].append(i)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for c, r in zip(choices, rewards, strict=True):
        by_kind[c.kind].append(r)
    kind_stats = {k: (float(np.mean(v)), float(np.std(v))) for k, v in by_kind.items()}
    adv = [0.0] * len(rewards)
    for idx in groups.values():
        if len(idx) >= 2:
            for i, a in zip(idx, group_advantages([rewards[i] for i in idx]), strict=True):
                adv[i] = a
        else:
            i = idx[0]
            mean, std = kind_stats[choices[i].kind]
            adv[i] = (rewards[i] - mean) / std if std > 1e-8 else 0.0
    return adv
