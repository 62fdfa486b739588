"""``VLLMEngine``: vLLM in this process (CUDA), for Q^cur, construction votes and evaluation.

In training there is **one engine per process**, built once from the base model and shared by
TRL's GRPO rollouts (``diagevo/train/hf/vllm_share.py`` hands it to ``GRPOTrainer``) and the loop's
own sampling. Weights are pushed into it in memory (``load_weights``, as TRL's colocate mode does)
from whichever policy is to be sampled, never reloaded from disk; it sleeps while an optimizer
needs the GPU. :class:`TrackedLLM` keeps count of its sleep state and of whose weights it holds,
whoever calls it. vLLM is imported only when an engine is built; the argument builders are plain
functions so they can be checked without a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from diagevo.errors import BadInput, Unavailable
from diagevo.generation import GenerationError, Messages, Sampling, model_text, render_plain
from diagevo.progress import ProgressFn, no_progress

ENGINE_OPTIONS = frozenset({
    "dtype", "gpu_memory_utilization", "seed", "enable_sleep_mode", "tensor_parallel_size", "max_model_len",
    "distributed_executor_backend", "max_num_seqs", "max_num_batched_tokens", "logprobs_mode", "model_impl",
})
DISK = "disk"  # what an engine holds right after it is built: the weights of its model directory


def sampling_params(sampling: Sampling) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for ``sampling`` (greedy: temperature 0)."""
    greedy = sampling.temperature == 0
    return {
        "n": sampling.n,
        "temperature": 0.0 if greedy else sampling.temperature,
        "top_p": 1.0 if greedy else sampling.top_p,
        "max_tokens": sampling.max_new_tokens,
        "seed": sampling.seed,
    }


def engine_args(model: str, **options: Any) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM``: the model directory and the options vLLM knows (``None``
    values are left to vLLM's defaults)."""
    unknown = sorted(set(options) - ENGINE_OPTIONS)
    if unknown:
        raise BadInput(f"unknown vLLM engine option(s): {', '.join(unknown)}")
    return {"model": model, **{k: v for k, v in options.items() if v is not None}}


def launcher_environment() -> None:
    """What ``distributed_executor_backend="external_launcher"`` needs from the environment: this
    process's rank and the world, taken from accelerate's state (set up first, so that the
    variables below do not make a single process look like a launch), and a rendezvous address;
    TRL's colocate mode sets them the same way."""
    from accelerate import PartialState
    from trl.trainer.utils import ensure_master_addr_port

    state = PartialState()
    os.environ["RANK"] = str(state.process_index)
    os.environ["LOCAL_RANK"] = str(state.local_process_index)
    os.environ["WORLD_SIZE"] = str(state.num_processes)
    ensure_master_addr_port()


class TrackedLLM:
    """A vLLM ``LLM`` that knows whether its weights and KV cache are awake and whose weights it
    holds. TRL's rollouts call ``sleep``/``wake_up`` on it directly, so the state is kept here,
    not by the callers; everything else is the ``LLM``'s own (``llm_engine``, ``generate``, ...)."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        self.weights_awake = True
        self.kv_awake = True
        self.holding: Hashable | None = DISK

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def sleep(self, level: int = 1) -> None:
        """Level 1 offloads the weights to host memory, level 2 discards them; both drop the KV
        cache. Sleeping twice is once."""
        if self.weights_awake or self.kv_awake:
            self._llm.sleep(level=level)
        self.weights_awake = self.kv_awake = False
        if level >= 2:
            self.holding = None

    def wake_up(self, tags: list[str] | None = None) -> None:
        wanted = tags or ["weights", "kv_cache"]
        todo = [t for t in wanted if not (self.weights_awake if t == "weights" else self.kv_awake)]
        if todo:
            self._llm.wake_up(tags=todo)
        self.weights_awake = self.weights_awake or "weights" in wanted
        self.kv_awake = self.kv_awake or "kv_cache" in wanted

    def load_weights(self, key: Hashable, named: Iterable[tuple[str, Any]]) -> None:
        """Push ``named`` (parameter name, tensor) into the engine's model in memory, as TRL's
        colocate weight sync does; afterwards it holds ``key``."""
        self.wake_up(["weights"])
        model = self._llm.llm_engine.model_executor.driver_worker.model_runner.model
        for name, tensor in named:
            model.load_weights([(name.replace("_checkpoint_wrapped_module.", ""), tensor)])
        self._llm.reset_prefix_cache()
        self.holding = key


class VLLMEngine:
    """The :class:`~diagevo.generation.Engine` over one vLLM ``LLM`` (a :class:`TrackedLLM`)."""

    name = "vllm"

    def __init__(self, model: str, **options: Any) -> None:
        try:
            from vllm import LLM
        except ImportError:
            raise Unavailable("the vllm engine needs the gpu extra: pip install -e '.[gpu]'") from None
        args = engine_args(model, **options)
        if args.get("distributed_executor_backend") == "external_launcher":
            launcher_environment()
        self.llm = TrackedLLM(LLM(**args))
        self.has_template = bool(getattr(self.llm.get_tokenizer(), "chat_template", None))

    def generate(
        self, prompts: Sequence[Messages], sampling: Sampling, progress: ProgressFn = no_progress
    ) -> list[list[str]]:
        from vllm import SamplingParams

        if self.llm.holding is None:
            raise RuntimeError("the vLLM engine's weights were discarded (sleep level 2): push weights before generating")
        self.llm.wake_up()
        params = SamplingParams(**sampling_params(sampling))
        progress("generate", 0, len(prompts))
        try:
            if self.has_template:
                outs = self.llm.chat([[dict(m) for m in p] for p in prompts], params, use_tqdm=False)
            else:
                outs = self.llm.generate([render_plain(p) for p in prompts], params, use_tqdm=False)
        except RuntimeError as exc:
            raise GenerationError(f"vLLM generation failed: {str(exc).splitlines()[0]}") from None
        progress("generate", len(prompts), len(prompts))
        return [[model_text(c.text) for c in o.outputs] for o in outs]

    def sleep(self) -> None:
        """Release the GPU for an optimizer: weights and KV cache are discarded (level 2); the
        next use pushes weights again, from memory."""
        self.llm.sleep(level=2)

    def close(self) -> None:
        self.llm = None  # type: ignore[assignment]
