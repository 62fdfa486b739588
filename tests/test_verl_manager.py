"""The step reward manager (``diagevo.verl.manager``) without verl: rollouts as verl's reward loop
hands them to ``run_single`` (stand-ins holding what it reads), gathered into one call of the
batch reward function per step; never waiting in silence (a log line saying how many of how many
are in, for how long), a rollout it cannot read failing its whole step in one line, and the
misconfigurations verl's own loading would meet only at the first rollout refused when verl
builds the manager. ``make verl-contracts`` runs the same manager inside verl's reward worker."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from diagevo.errors import BadInput
from diagevo.verl import challenger_score
from diagevo.verl.manager import StepRewardManager
from tests.test_verl import verl_config


class Tokenizer:
    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return " ".join(str(int(i)) for i in ids)


def rollout(i: int, *, reward_model: bool = True) -> list[Any]:
    """One rollout as ``run_single`` takes it (a list of turns, the last one scored): response ids
    padded to 4, the attention mask over prompt and response."""
    tensors = {"responses": np.array([i, i + 1, 0, 0]), "attention_mask": np.array([1, 1, 1, 1, 0, 0])}
    extras: dict[str, Any] = {"data_source": "diagevo/challenger", "extra_info": {"question_id": f"c1-{i:05d}"}}
    if reward_model:
        extras["reward_model"] = {"style": "rule", "ground_truth": ""}
    return [SimpleNamespace(batch=tensors, non_tensor_batch=extras)]


class Batches:
    """A batch reward function that records each call and scores rollout k of a batch k/10."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, *, data_sources: list[str], solution_strs: list[str], **_: Any) -> list[dict[str, Any]]:
        self.calls.append(list(solution_strs))
        return [{"score": k / 10, "question_id": ""} for k in range(len(solution_strs))]


def manager(size: int, fn: Any, **reward: Any) -> StepRewardManager:
    config = verl_config(data__train_batch_size=size, actor_rollout_ref__rollout__n=1)
    config["reward"].update(reward)
    return StepRewardManager(config=config, tokenizer=Tokenizer(), compute_score=fn)


def test_a_step_is_scored_in_one_call_once_all_its_rollouts_are_in() -> None:
    fn = Batches()
    m = manager(3, fn)

    async def two_steps() -> list[dict[str, Any]]:
        return await asyncio.gather(*(m.run_single(rollout(i)) for i in range(6)))

    out = asyncio.run(two_steps())
    assert fn.calls == [["0 1", "1 2", "2 3"], ["3 4", "4 5", "5 6"]]
    assert [o["reward_score"] for o in out] == [0.0, 0.1, 0.2] * 2


def test_a_step_waiting_for_its_rollouts_says_how_many_of_how_many(caplog: pytest.LogCaptureFixture) -> None:
    fn = Batches()
    m = manager(3, fn)
    m.wait_log_s = 0.01

    async def a_late_rollout() -> list[dict[str, Any]]:
        waiting = [asyncio.ensure_future(m.run_single(rollout(i))) for i in range(2)]
        while not any("2 of 3 in" in r.getMessage() for r in caplog.records):
            await asyncio.sleep(0.01)
        m.stall_s = 0.0  # no rollout for longer than this: said to have stalled
        while not any("none came in for" in r.getMessage() for r in caplog.records):
            await asyncio.sleep(0.01)
        return await asyncio.gather(*waiting, m.run_single(rollout(2)))

    # at WARNING, the level verl leaves its loggers at: the wait is seen (issue 83: it was INFO)
    with caplog.at_level(logging.WARNING, logger="diagevo.verl.manager"):
        out = asyncio.run(a_late_rollout())
    assert len(out) == 3 and fn.calls == [["0 1", "1 2", "2 3"]]
    said = [r.getMessage() for r in caplog.records if r.name == "diagevo.verl.manager"]
    assert said and all("\n" not in s for s in said)
    assert said[0].startswith("challenger reward: waiting for the step's rollouts: 2 of 3 in, for ")


def test_a_rollout_that_cannot_be_read_fails_its_whole_step_in_one_line() -> None:
    """A rollout without reward_model raised before it was counted, and the step's others waited
    for ever: now the step fails, the rollouts waiting and those still to come, and the next step
    is gathered as any other."""
    fn = Batches()
    m = manager(3, fn)

    async def one_bad_rollout() -> tuple[list[Any], list[dict[str, Any]]]:
        first = asyncio.ensure_future(m.run_single(rollout(0)))
        await asyncio.sleep(0)
        failed = await asyncio.gather(
            first, m.run_single(rollout(1, reward_model=False)), m.run_single(rollout(2)), return_exceptions=True
        )
        return failed, await asyncio.gather(*(m.run_single(rollout(i)) for i in range(3, 6)))

    failed, after = asyncio.run(one_bad_rollout())
    assert all(isinstance(e, BadInput) for e in failed) and len({str(e) for e in failed}) == 1, failed
    said = str(failed[0])
    assert "\n" not in said and "cannot read rollout 2 of 3 of this step (no 'reward_model'): the step fails" in said
    assert fn.calls == [["3 4", "4 5", "5 6"]] and [o["reward_score"] for o in after] == [0.0, 0.1, 0.2]


def test_a_stray_reward_kwarg_is_refused_when_verl_builds_the_manager() -> None:
    """``reward_kwargs.batch_size`` (a setting that is gone) was refused only at the first scored
    rollout, after a step's generation: now when verl builds the manager, before anything runs."""
    stray = {"reward_kwargs": {"solver_url": "u", "solver_model": "m", "batch_size": 2048}}
    with pytest.raises(BadInput, match="^challenger_score takes no batch_size: its reward_kwargs are solver_url"):
        manager(3, Batches(), custom_reward_function=stray)
    assert manager(3, Batches(), custom_reward_function={"reward_kwargs": {"solver_url": "u"}}).size == 3


def test_the_reward_function_called_by_verls_default_manager_says_what_to_set() -> None:
    """Without the yaml's reward_manager block, verl's default manager calls the reward function
    once per rollout (``data_source``, ``solution_str``, ...) with its reward_kwargs: a raw
    TypeError before; now one line naming the settings that select the step's manager."""
    with pytest.raises(BadInput) as err:
        challenger_score(
            data_source="diagevo/challenger",
            solution_str="<question>x</question>",
            ground_truth="",
            extra_info={},
            solver_url="u",
            solver_model="m",
        )
    said = str(err.value)
    assert "\n" not in said and "called for one rollout" in said
    assert "reward.reward_manager.name=StepRewardManager" in said and "pkg://diagevo.verl.manager" in said
