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
import logging
import time
from functools import partial
from typing import Any

from diagevo.errors import BadInput
from diagevo.text.parsing import error_line
from diagevo.verl.rewards import check_reward_kwargs, setting, step_size

Pending = tuple[str, str, Any, dict[str, Any], "asyncio.Future[dict[str, Any]]"]

log = logging.getLogger(__name__)

WAIT_LOG_S = 60.0
"""How often a step still gathering its rollouts says so (a WARNING, the level verl shows): how many
of how many, for how long."""
STALL_S = 600.0
"""A wait this long since the last rollout came in is said to have stalled: a step whose rollouts
stopped arriving (a setting that splits it) would otherwise hold the trainer without a word."""


class StepRewardManager:
    """Gathers a step's B rollouts and scores them in one call of the batch reward function
    (``reward.custom_reward_function``, its ``reward_kwargs`` bound by verl). While it waits it
    logs how many of the B are in (Python logging, ``diagevo.verl.manager``); a rollout it cannot
    read fails the whole step in one line, the rollouts already waiting and those still to come."""

    wait_log_s = WAIT_LOG_S
    stall_s = STALL_S

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any, **_: Any) -> None:
        self.config, self.tokenizer, self.compute_score = config, tokenizer, compute_score
        if compute_score is None:
            raise BadInput(
                "the step reward manager scores with a batch reward function: set "
                "reward.custom_reward_function.path=pkg://diagevo.verl and .name=challenger_score"
            )
        check_reward_kwargs(setting(config, "reward.custom_reward_function.reward_kwargs") or {})
        self.size = step_size(config)
        self.pending: list[Pending] = []
        self.failed: BadInput | None = None  # the step that failed, refusing its rollouts still to come
        self.to_refuse = 0
        self.arrived = 0.0  # when the step's last rollout came in (time.monotonic)
        self.scoring: float | None = None  # since when the gathered step is being scored
        self.watchers: set[asyncio.Task[None]] = set()

    @classmethod
    def assemble_rm_scores(cls, data: Any, scores: list[float]) -> Any:
        """The batch's reward tensor from the rollouts' scores, as verl's own managers assemble it."""
        from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

        return RewardManagerBase.assemble_rm_scores.__func__(cls, data, scores)  # type: ignore[attr-defined]

    async def run_single(self, data: Any) -> dict[str, Any]:
        if self.to_refuse:  # a rollout of a step that failed already: refused as the step was
            self.to_refuse -= 1
            raise self.failed or BadInput("the step failed")
        try:
            source, text, truth, info = self._read(data)
        except Exception as exc:  # noqa: BLE001 - any rollout it cannot read fails the whole step, in one line
            raise self._fail(exc) from None
        done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending.append((source, text, truth, info, done))
        self.arrived = time.monotonic()
        if len(self.pending) == 1 and self.size > 1:
            watcher = asyncio.get_running_loop().create_task(self._watch(done))
            self.watchers.add(watcher)  # held: the loop keeps only a weak reference to a task
            watcher.add_done_callback(self.watchers.discard)
        if len(self.pending) == self.size:
            batch, self.pending = self.pending, []
            await self._score(batch)
        return await done

    def _read(self, data: Any) -> tuple[str, str, Any, dict[str, Any]]:
        """A rollout's data source, response text, ground truth and extra_info, as verl's own
        managers read them (a multi-turn rollout on its last output)."""
        item = data[-1]
        response_ids = item.batch["responses"]
        length = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        text = self.tokenizer.decode(response_ids[:length], skip_special_tokens=True)
        extra = item.non_tensor_batch.get("extra_info", None)
        truth = item.non_tensor_batch["reward_model"].get("ground_truth")
        return str(item.non_tensor_batch["data_source"]), text, truth, dict(extra) if extra is not None else {}

    def _fail(self, exc: BaseException) -> BadInput:
        """The step's failure, in one line: every rollout waiting fails with it, and the step's
        rollouts still to come are refused with it (none waits for a step that cannot be whole)."""
        n = len(self.pending) + 1
        said = f"{type(exc).__name__}: {error_line(exc)}" if not isinstance(exc, KeyError) else f"no {exc}"
        error = BadInput(
            f"the challenger reward cannot read rollout {n} of {self.size} of this step ({said}): the step fails "
            "(each rollout needs data_source, reward_model and extra_info, as diagevo's verl export writes them)"
        )
        for *_, done in self.pending:
            done.set_exception(error)
        self.failed, self.to_refuse, self.pending = error, self.size - n, []
        return error

    async def _watch(self, first: asyncio.Future[dict[str, Any]]) -> None:
        """Say, every :attr:`wait_log_s`, how many of the step's rollouts are in and for how long,
        until the step that ``first`` belongs to is scored or fails."""
        started = time.monotonic()
        while not first.done():
            await asyncio.sleep(self.wait_log_s)
            if first.done():
                return
            now = time.monotonic()
            # WARNING: the level verl leaves its loggers at (VERL_LOGGING_LEVEL), so a step that
            # waits is seen waiting; INFO showed nothing until the stall
            if self.scoring is not None:
                log.warning(
                    "challenger reward: scoring the step's %d rollouts, for %.0f s", self.size, now - self.scoring
                )
                continue
            waited, quiet = now - started, now - self.arrived
            stalled = f"; none came in for {quiet:.0f} s: a setting may split the step" if quiet >= self.stall_s else ""
            log.warning(
                "challenger reward: waiting for the step's rollouts: %d of %d in, for %.0f s (the last %.0f s ago)%s",
                len(self.pending),
                self.size,
                waited,
                quiet,
                stalled,
            )

    async def _score(self, batch: list[Pending]) -> None:
        sources, texts, truths, infos, waiting = (list(column) for column in zip(*batch, strict=True))
        call = partial(self.compute_score, data_sources=sources, solution_strs=texts, ground_truths=truths)
        self.scoring = time.monotonic()
        try:
            results = await asyncio.get_running_loop().run_in_executor(None, partial(call, extra_infos=infos))
            if len(results) != len(batch):
                raise RuntimeError(f"{len(results)} rewards for a batch of {len(batch)}")
        except Exception as exc:  # every waiting rollout fails with it, none waits on
            for done in waiting:
                done.set_exception(exc)
            return
        finally:
            self.scoring = None
        for done, result in zip(waiting, results, strict=True):
            extras = dict(result) if isinstance(result, dict) else {"score": float(result)}
            done.set_result({"reward_score": extras["score"], "reward_extra_info": extras})
