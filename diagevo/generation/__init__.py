"""One small generation interface for real language models.

The ``hf`` training backend and ``diagevo eval`` both generate through an :class:`Engine`:
``local`` (transformers in this process), ``vllm`` (a vLLM engine in this process) or
``endpoint`` (any OpenAI-compatible server, with the diagnostician's client). A prompt is a list
of chat messages. Importing this module loads none of torch, transformers or vLLM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Literal, Protocol

from diagevo.errors import BadInput, Unavailable
from diagevo.runtime.progress import ProgressFn, no_progress

Messages = Sequence[Mapping[str, str]]  # [{"role": "system"|"user"|"assistant", "content": ...}]
EngineKind = Literal["local", "vllm", "endpoint"]


@dataclass(frozen=True, slots=True)
class Sampling:
    """How to sample. ``temperature == 0`` is greedy decoding (then ``top_p`` is ignored)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 1024
    seed: int = 0


def model_text(text: str) -> str:
    """A model's output as the log can store it: a NUL (which a small or untrained model can
    decode, and PostgreSQL refuses in text) becomes U+FFFD; nothing else changes."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


class GenerationError(Unavailable, RuntimeError):
    """An engine could not generate (an unreachable server, a refused request); one line."""


def render_plain(messages: Messages) -> str:
    """A chat prompt as plain text, for a model without a chat template (a base model): the
    messages' contents, one paragraph each, ready for the model to continue."""
    return "\n\n".join(m["content"].strip() for m in messages) + "\n\n"


class Engine(Protocol):
    """Generates ``sampling.n`` completions for each prompt, in prompt order."""

    name: str

    def generate(
        self, prompts: Sequence[Messages], sampling: Sampling, progress: ProgressFn = no_progress
    ) -> list[list[str]]: ...

    def close(self) -> None: ...


# each kind's class, imported when an engine of the kind is made (the endpoint's pulls in aiohttp)
ENGINES: dict[str, tuple[str, str]] = {
    "local": ("diagevo.generation.local", "LocalEngine"),
    "vllm": ("diagevo.generation.vllm_engine", "VLLMEngine"),
    "endpoint": ("diagevo.generation.endpoint", "EndpointEngine"),
}


def make_engine(kind: EngineKind, model: str, **options: object) -> Engine:
    """The engine of ``kind`` for ``model`` (a local model directory, or the name an endpoint's
    server knows); ``options`` go to the engine."""
    if kind not in ENGINES:
        raise BadInput(f"unknown engine {kind!r}: use local, vllm or endpoint")
    module, name = ENGINES[kind]
    engine: Engine = getattr(import_module(module), name)(model, **options)
    return engine
