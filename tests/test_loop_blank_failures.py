"""A failed completion that is empty (a tiny solver writes the end token first) is counted, not
sent to the diagnostician: the round protocol refuses a failure with a blank response."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from diagevo.catalog import PhaseCompleted
from diagevo.log import open_log
from diagevo.train.backend import SolverRewardFn, SolverRound
from diagevo.train.config import load_config
from diagevo.train.run import TrainOptions, train
from diagevo.train.sim.backend import SimBackend

pytestmark = pytest.mark.slow  # a simulator round


class BlankingBackend(SimBackend):
    """The simulator, with every question's first failed response made empty."""

    def train_solver(
        self,
        questions: Sequence[str],
        reward_fn: SolverRewardFn,
        group_size: int,
        rng: random.Random,
        progress=lambda *_: None,  # noqa: ANN001
    ) -> SolverRound:
        out = super().train_solver(questions, reward_fn, group_size, rng, progress)
        responses = [list(rs) for rs in out.responses]
        for rs, rews in zip(responses, out.rewards, strict=True):
            failed = [j for j, r in enumerate(rews) if r < 0]
            if failed:
                rs[failed[0]] = ""
        return replace(out, responses=responses)


def test_blank_failed_responses_are_counted_and_not_recorded(tmp_path: Path) -> None:
    cfg = load_config(
        None,
        [
            "train.challenger_questions=16",
            "train.curriculum_questions=48",
            f'train.out_dir="{tmp_path / "ckpt"}"',
            'train.run="r"',
        ],
    )
    with open_log(f"sqlite:///{tmp_path / 'x.db'}") as store:
        _, reports = train(cfg, store, TrainOptions(rounds=1, backend=BlankingBackend(cfg)))
        recorded = [e.event for e in store.read("r") if e.type == "failure.recorded"]
        solver = next(e.event.stats for e in store.read("r", types=(PhaseCompleted,)) if e.event.phase == "solver")
    assert recorded and all(f.response for f in recorded)
    assert solver["failures_blank"] > 0
