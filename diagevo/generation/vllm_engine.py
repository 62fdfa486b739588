"""``VLLMEngine``: a vLLM engine in this process (CUDA), for Q^cur, construction votes and
evaluation on GPUs. vLLM is imported only when an engine is built; the arguments are plain
functions so they can be checked without a GPU."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from diagevo.generation import GenerationError, Messages, Sampling, render_plain
from diagevo.progress import ProgressFn, no_progress


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
    """Keyword arguments of ``vllm.LLM``: the model directory and the options vLLM knows."""
    known = {"dtype", "gpu_memory_utilization", "seed", "enable_sleep_mode", "tensor_parallel_size", "max_model_len"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown vLLM engine option(s): {', '.join(unknown)}")
    return {"model": model, **options}


class VLLMEngine:
    name = "vllm"

    def __init__(self, model: str, **options: Any) -> None:
        try:
            from vllm import LLM
        except ImportError:
            raise ValueError("the vllm engine needs the gpu extra: pip install -e '.[gpu]'") from None
        self.llm: Any = LLM(**engine_args(model, **options))
        self.has_template = bool(getattr(self.llm.get_tokenizer(), "chat_template", None))

    def generate(
        self, prompts: Sequence[Messages], sampling: Sampling, progress: ProgressFn = no_progress
    ) -> list[list[str]]:
        from vllm import SamplingParams

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
        return [[c.text for c in o.outputs] for o in outs]

    def sleep(self) -> None:
        """Free the KV cache and offload weights while a trainer uses the GPU (sleep mode)."""
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        self.llm.wake_up()

    def close(self) -> None:
        self.llm = None
