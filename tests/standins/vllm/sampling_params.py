"""``vllm.sampling_params`` of the stand-in: the fields TRL and diagevo set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class StructuredOutputsParams:
    regex: str | None = None


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    max_tokens: int = 16
    seed: int | None = None
    repetition_penalty: float = 1.0
    logprobs: int | None = None
    structured_outputs: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
