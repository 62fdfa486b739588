"""The interface between the co-evolution loop and the models.

The loop (``diagevo/train/loop.py``) owns the schedule, votes, filtering, rewards and events; a
backend owns the models: it generates questions, answers them, and runs GRPO updates given a
reward function the loop supplies. ``sim`` implements it with a procedural world on the CPU;
``hf`` with transformers + TRL ``GRPOTrainer`` (whose reward functions are batch-level, which is
why the reward functions here are too).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from diagevo.diagnosis.interface import Diagnostician, Embedder
from diagevo.memory.sampler import GenerationRequest
from diagevo.runtime.progress import ProgressFn, no_progress

# rewards for a batch of challenger outputs (one per request), computed by the loop with the
# frozen solver's votes and the repetition penalty over the whole batch
ChallengerRewardFn = Callable[[Sequence[GenerationRequest], Sequence[str]], list[float]]
# rewards for the responses to question i (+1 agrees with its pseudo-label, -1 otherwise)
SolverRewardFn = Callable[[int, Sequence[str]], list[float]]


def numbers(values: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of ``values`` (booleans and texts left out): what of a trainer's row
    (TRL's, a round's figures) the log and the trackers take."""
    out = {}
    for k, v in values.items():
        if isinstance(v, int | float) and not isinstance(v, bool) and v == v and abs(v) != float("inf"):
            out[k] = float(v)
    return out


@dataclass(frozen=True, slots=True)
class Truth:
    """What the world knows of a question: its true answer and the skill it exercises (None:
    none of the world's). The simulator knows it for every question it wrote, the mini world for
    every question of its skills; a world of real models knows none. ``shared_error``: the wrong
    answer the skill's systematic error gives (the mini world's dropped carry, forgotten borrow),
    where the world names one: what the label-accuracy control pays instead of the answer."""

    answer: str
    skill: str | None = None
    shared_error: str | None = None


@dataclass(frozen=True)
class SolverRound:
    """What a solver update produced: every optimization response per question, in the order they
    were drawn (G per draw; a question drawn in two steps has 2G, one never drawn none), their rewards
    (failed ones, reward < 0, go to diagnosis) and training statistics."""

    responses: list[list[str]]
    rewards: list[list[float]]
    stats: dict[str, float] = field(default_factory=dict)

    @classmethod
    def over(cls, n: int) -> SolverRound:
        """A phase over ``n`` questions, before any is drawn (:meth:`score` fills it)."""
        return cls([[] for _ in range(n)], [[] for _ in range(n)])

    def score(self, i: int, responses: Sequence[str], reward_fn: SolverRewardFn) -> list[float]:
        """The rewards of ``responses`` to question ``i``, both kept beside the question's earlier
        draws in the phase."""
        rewards = list(reward_fn(i, responses))
        self.responses[i].extend(responses)
        self.rewards[i].extend(rewards)
        return rewards

    def failed_fraction(self) -> float:
        """The share of the phase's responses rewarded below 0 (those go to diagnosis)."""
        flat = [r for rs in self.rewards for r in rs]
        return sum(r < 0 for r in flat) / len(flat) if flat else 0.0


class Backend(Protocol):
    name: str
    # whether its checkpoints are model weights, which ``train.keep_checkpoints`` prunes; the
    # simulator's are its small states, all kept, so a run forks at any of its rounds
    checkpoints_are_models: bool

    def generate(self, requests: Sequence[GenerationRequest], rng: random.Random) -> list[str]:
        """One raw challenger output per request (``<question>...</question>`` expected)."""
        ...

    def train_challenger(
        self,
        requests: Sequence[GenerationRequest],
        reward_fn: ChallengerRewardFn,
        rng: random.Random,
        progress: ProgressFn = no_progress,
    ) -> dict[str, float]:
        """GRPO on the challenger for Q^chal built from ``requests``; returns statistics."""
        ...

    def sample(self, questions: Sequence[str], n: int, rng: random.Random, *, initial: bool = False) -> list[list[str]]:
        """``n`` solver responses per question (construction responses, or the frozen solver's
        answers for the challenger reward); ``initial``: the solver's as the run started (the
        labeler of ``filter.labeler = "initial"``), whatever it has learnt since."""
        ...

    def recall(self, requests: Sequence[GenerationRequest], rng: random.Random) -> None:
        """A round resumed after its questions were generated (and its last checkpoint before
        them): a world that holds its questions in memory (the simulator's registry) writes them
        again from the same requests and stream, so it answers them as it did; a world that reads
        a question from its text (the hf backend's) has nothing to do."""
        ...

    def rewordings(self, questions: Sequence[str], count: int, rng: random.Random) -> list[list[str]]:
        """Up to ``count`` rewordings of each question whose answer is the question's, for the
        shared-error check (``filter.shared_error_check = "variants"``); a question none can be
        written for has none. A backend that writes none refuses in one line (:class:`BadInput`)."""
        ...

    def train_solver(
        self,
        questions: Sequence[str],
        reward_fn: SolverRewardFn,
        group_size: int,
        rng: random.Random,
        progress: ProgressFn = no_progress,
    ) -> SolverRound:
        """GRPO on the solver over the retained questions, ``group_size`` responses each."""
        ...

    def evaluate(self, rng: random.Random) -> dict[str, float]:
        """Held-out metrics after the round (``heldout_acc`` at least; the sim also reports
        ``pseudo_label_acc`` and per-family accuracies as ``acc/<family>``)."""
        ...

    def truth(self, question: str) -> Truth | None:
        """The question's true answer and skill where the world knows them, else None. Read for
        the label accuracy a round records, the oracle reward (``solver.reward = "true_answer"``)
        and ``challenger.known_questions_only``; never by the method itself."""
        ...

    def diagnostician(self) -> Diagnostician: ...

    def embedder(self) -> Embedder: ...

    def save(self, path: Path) -> None:
        """Write the models' state (a checkpoint) under ``path``."""
        ...

    def load(self, path: Path) -> None: ...
