"""The reward manager that hands :func:`~diagevo.verl.challenger_score` one step's rollouts at once.

verl 0.9's trainers score each rollout as it is generated, one call of the reward manager's
``run_single`` per rollout, in the reward worker's event loop. R-Zero's repetition penalty needs
the step's whole batch, so this manager holds the calls of a step until all B of them are in
(B from verl's own config, :func:`~diagevo.verl.rewards.step_size`, checked when verl builds the
manager: a config under which a step's rollouts would not all arrive is refused there, in one
line, before anything is generated) and then calls the batch reward function once. Its state is
the manager's own: one per reward worker, nothing kept between steps.

verl loads it by ``reward.reward_manager.source: importlib``, ``module.path: pkg://diagevo.verl.manager``
and ``name: StepRewardManager`` (configs/verl/challenger.yaml). It has the interface of verl's
``RewardManagerBase`` (built with the config, the tokenizer and the reward function; ``run_single``;
the class's ``assemble_rm_scores``, verl's own) without deriving from it, so that importing it
needs no verl.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from diagevo.errors import BadInput
from diagevo.verl.rewards import step_size

Pending = tuple[str, str, Any, dict[str, Any], "asyncio.Future[dict[str, Any]]"]


class StepRewardManager:
    """Gathers a step's B rollouts and scores them in one call of the batch reward function
    (``reward.custom_reward_function``, its ``reward_kwargs`` bound by verl)."""

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any, **_: Any) -> None:
        self.config, self.tokenizer, self.compute_score = config, tokenizer, compute_score
        if compute_score is None:
            raise BadInput(
                "the step reward manager scores with a batch reward function: set "
                "reward.custom_reward_function.path=pkg://diagevo.verl and .name=challenger_score"
            )
        self.size = step_size(config)
        self.pending: list[Pending] = []

    @classmethod
    def assemble_rm_scores(cls, data: Any, scores: list[float]) -> Any:
        """The batch's reward tensor from the rollouts' scores, as verl's own managers assemble it."""
        from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

        return RewardManagerBase.assemble_rm_scores.__func__(cls, data, scores)  # type: ignore[attr-defined]

    async def run_single(self, data: Any) -> dict[str, Any]:
        item = data[-1]  # a multi-turn rollout is scored on its last output, as verl's own managers do
        response_ids = item.batch["responses"]
        length = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        text = self.tokenizer.decode(response_ids[:length], skip_special_tokens=True)
        extra = item.non_tensor_batch.get("extra_info", None)
        info = dict(extra) if extra is not None else {}
        truth = item.non_tensor_batch["reward_model"].get("ground_truth")
        done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending.append((str(item.non_tensor_batch["data_source"]), text, truth, info, done))
        if len(self.pending) == self.size:
            batch, self.pending = self.pending, []
            await self._score(batch)
        return await done

    async def _score(self, batch: list[Pending]) -> None:
        sources, texts, truths, infos, waiting = (list(column) for column in zip(*batch, strict=True))
        call = partial(self.compute_score, data_sources=sources, solution_strs=texts, ground_truths=truths)
        try:
            results = await asyncio.get_running_loop().run_in_executor(None, partial(call, extra_infos=infos))
            if len(results) != len(batch):
                raise RuntimeError(f"{len(results)} rewards for a batch of {len(batch)}")
        except Exception as exc:  # every waiting rollout fails with it, none waits on
            for done in waiting:
                done.set_exception(exc)
            return
        for done, result in zip(waiting, results, strict=True):
            extras = dict(result) if isinstance(result, dict) else {"score": float(result)}
            done.set_result({"reward_score": extras["score"], "reward_extra_info": extras})
