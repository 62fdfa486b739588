"""The two reward functions verl calls, by the signature of its custom reward functions
(``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)``).

The solver's is one response against one pseudo-label. The challenger's is not: R-Zero's
repetition penalty (Eq. 9) clusters the whole update batch, and verl 0.9 scores one rollout at
a time, each call as soon as its rollout is done. :func:`challenger_score` is therefore a
coroutine (verl awaits a coroutine reward function in its reward worker's event loop): the
calls of one batch wait for each other until ``batch_size`` of them are in, or until
``wait_s`` has passed since the first (a last, smaller batch), and are scored together, once.
All the calls of a batch must reach one process (``reward.num_workers=1``), and a batch must be
one step's rollouts (verl's synchronous trainer, ``trainer.v1.trainer_mode=sync``, its default).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from diagevo.errors import BadInput


def compute_score(
    data_source: str, solution_str: str, ground_truth: str | None, extra_info: Mapping[str, Any] | None = None, **_: Any
) -> dict[str, float | str]:
    """The solver's reward on a retained question (Sec. 2.2): ``+1`` when the response's final
    answer agrees with the round's pseudo-label (``ground_truth``: diagevo's answer check, the one
    that counted the construction responses in the label's class), else ``-1``, a failure that
    diagnosis reads back. Returns ``score``, ``acc`` (1 or 0: verl's validation reports it as the
    accuracy against the pseudo-labels) and the ``question_id`` of ``extra_info``."""
    from diagevo.curriculum import solver_rewards

    [score] = solver_rewards([solution_str], ground_truth)
    return {"score": score, "acc": float(score > 0), "question_id": _question_id(extra_info)}


async def challenger_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | None,
    extra_info: Mapping[str, Any] | None = None,
    *,
    solver_url: str,
    solver_model: str,
    batch_size: int,
    wait_s: float = 1800.0,
    max_tokens: int = 1024,
    **_: Any,
) -> dict[str, float | str]:
    """The challenger's reward (Appendix C, Eq. 8-10, R-Zero's): ``max(0, r_unc - λ r_rep)`` of
    the question in ``solution_str`` (0 when it holds no ``<question>`` block). ``r_unc`` comes
    from the majority vote share of the frozen solver's N answers, sampled from the
    OpenAI-compatible server at ``solver_url`` serving ``solver_model``; ``r_rep`` from the BLEU
    clusters of the update batch (``batch_size``: verl's ``data.train_batch_size`` x
    ``actor_rollout_ref.rollout.n``). N, λ, the clustering threshold and the sampling are the
    run's, carried by each row's ``extra_info`` (``diagevo export verl`` writes them there);
    ``max_tokens`` bounds each answer. Set as ``reward.custom_reward_function.reward_kwargs``."""
    settings = ChallengerSettings.from_extra_info(extra_info)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise BadInput(f"batch_size must be a whole number of at least 1, not {batch_size!r}")
    key = (solver_url, solver_model, batch_size, max_tokens, settings)
    loop = asyncio.get_running_loop()
    batches = _BATCHES.setdefault(loop, {})
    if key not in batches:
        batches[key] = Batch(batch_size, wait_s, _scorer(solver_url, solver_model, max_tokens, settings))
    reward = await batches[key].add(solution_str)
    return {"score": reward, "question_id": _question_id(extra_info)}


def _question_id(extra_info: Mapping[str, Any] | None) -> str:
    qid = (extra_info or {}).get("question_id")
    return qid if isinstance(qid, str) else ""


@dataclass(frozen=True, slots=True)
class ChallengerSettings:
    """What the challenger reward takes from the run's config (``extra_info`` of a challenger row):
    N answers per question, their sampling, λ and the clustering's distance threshold."""

    votes: int
    temperature: float
    top_p: float
    lam: float
    cluster_distance_threshold: float

    @classmethod
    def from_extra_info(cls, extra_info: Mapping[str, Any] | None) -> ChallengerSettings:
        info = extra_info or {}
        missing = [f.name for f in fields(cls) if info.get(f.name) is None]
        if missing:
            raise BadInput(
                f"a challenger row's extra_info has no {missing[0]}: the challenger reward reads N, the sampling, "
                "lam and the clustering threshold from the rows that diagevo's verl export writes"
            )
        return cls(
            votes=int(info["votes"]),
            temperature=float(info["temperature"]),
            top_p=float(info["top_p"]),
            lam=float(info["lam"]),
            cluster_distance_threshold=float(info["cluster_distance_threshold"]),
        )


def _scorer(url: str, model: str, max_tokens: int, s: ChallengerSettings) -> Callable[[list[str]], list[float]]:
    """Eq. 8-10 for a batch of challenger outputs, the solver sampled from the server."""

    def score(outputs: list[str]) -> list[float]:
        from diagevo.curriculum import challenger_output_rewards, solver_messages
        from diagevo.generation import Sampling
        from diagevo.generation.endpoint import EndpointEngine

        engine = EndpointEngine(model, url=url)
        sampling = Sampling(n=s.votes, temperature=s.temperature, top_p=s.top_p, max_new_tokens=max_tokens)

        def answer(questions: list[str]) -> list[list[str]]:
            return engine.generate([solver_messages(q) for q in questions], sampling)

        return challenger_output_rewards(outputs, answer, lam=s.lam, threshold=s.cluster_distance_threshold)

    return score


class Batch:
    """Calls that wait for one another: the outputs of an update batch, scored together by
    ``score`` (run in a thread: the reward worker's event loop goes on) when ``size`` of them are
    in, or ``wait_s`` after the first of a batch. Each call gets its own output's reward."""

    def __init__(self, size: int, wait_s: float, score: Callable[[list[str]], Sequence[float]]) -> None:
        self.size, self.wait_s, self.score = size, wait_s, score
        self._pending: list[tuple[str, asyncio.Future[float]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._scoring: set[asyncio.Task[None]] = set()

    async def add(self, output: str) -> float:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[float] = loop.create_future()
        self._pending.append((output, done))
        if len(self._pending) >= self.size:
            self._flush()
        elif len(self._pending) == 1:
            self._timer = loop.call_later(self.wait_s, self._flush)
        return await done

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._score(batch))
            self._scoring.add(task)  # held until done: the loop keeps only a weak reference
            task.add_done_callback(self._scoring.discard)

    async def _score(self, batch: list[tuple[str, asyncio.Future[float]]]) -> None:
        try:
            rewards = await asyncio.to_thread(self.score, [output for output, _ in batch])
            if len(rewards) != len(batch):
                raise RuntimeError(f"{len(rewards)} rewards for a batch of {len(batch)}")
        except BaseException as exc:  # every waiting call fails with it, none waits forever
            for _, done in batch:
                if not done.done():
                    done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, done), reward in zip(batch, rewards, strict=True):
            if not done.done():
                done.set_result(float(reward))


_BATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Batch]] = (
    weakref.WeakKeyDictionary()
)
"""The open batch of each setting, per event loop (a batch's futures belong to its loop)."""
