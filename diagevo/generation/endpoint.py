"""The ``endpoint`` engine: any OpenAI-compatible server (``vllm serve``, a provider), through
the diagnostician's HTTP client (:class:`diagevo.generation.openai_client.OpenAIClient`).

A server whose model has no chat template (a base model behind ``vllm serve``) answers the chat
route with a 400 naming the chat template; the engine then switches to the completions route
with the messages as plain text for the rest of its life. ``n`` samples of a prompt are asked
for in one request; a server that ignores ``n`` is asked again for the missing ones, each with
its own seed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from diagevo.errors import BadInput
from diagevo.generation import GenerationError, Messages, Sampling, model_text, render_plain
from diagevo.generation.openai_client import BadResponse, OpenAIClient, TransportError, check_endpoint
from diagevo.runtime import aio
from diagevo.runtime.progress import ProgressFn, no_progress

_NO_TEMPLATE_HINTS = ("chat template", "chat_template")


def _texts(data: Any, key: str) -> list[str]:
    """The ``key`` text of every choice of a reply, in choice order."""
    try:
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
        out = [model_text(c["message"]["content"] if key == "message" else c["text"]) for c in choices]
    except (KeyError, TypeError, AttributeError):
        raise BadResponse(f"not a {'chat ' if key == 'message' else ''}completion: {str(data)[:200]!r}") from None
    if not out:
        raise BadResponse("a completion without choices")
    return [t if isinstance(t, str) else "" for t in out]


class EndpointEngine:
    """Samples completions from ``model`` as served at ``url`` (an OpenAI-compatible ``/v1`` base).
    ``chat``: True, always the chat route; False, always completions; None, chat until the model
    turns out to have no chat template. ``extra_body`` is merged into every request."""

    def __init__(
        self,
        model: str,
        *,
        url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 64,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        chat: bool | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not url:
            raise BadInput("the endpoint engine needs the server's base URL (e.g. http://host:8000/v1)")
        self.model = model
        self.url = url
        self.name = f"endpoint:{model}"
        self.chat = chat
        self.extra_body = dict(extra_body or {})
        self.client = OpenAIClient(
            url, api_key=api_key, concurrency=concurrency, timeout_s=timeout_s, max_retries=max_retries
        )

    def generate(
        self, prompts: Sequence[Messages], sampling: Sampling, progress: ProgressFn = no_progress
    ) -> list[list[str]]:
        """``sampling.n`` completions per prompt, in prompt order; raises :class:`GenerationError`
        with one line when the server cannot be used."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return aio.run(self._generate(prompts, sampling, progress))
        raise RuntimeError("EndpointEngine.generate is synchronous: call it outside a running event loop")

    def close(self) -> None:
        """Nothing to release: HTTP pools belong to the event loop of each ``generate`` call."""

    async def _generate(self, prompts: Sequence[Messages], sampling: Sampling, progress: ProgressFn) -> list[list[str]]:
        total = len(prompts)
        done = 0
        progress("generate", 0, total)

        async def one(i: int, messages: Messages) -> list[str]:
            nonlocal done
            out: list[str] = []
            request = 0
            while len(out) < sampling.n:
                # a distinct seed per prompt and per extra request keeps samples reproducible
                seed = sampling.seed + 1_000_003 * i + 7_919 * request
                out.extend(await self._sample(messages, sampling, sampling.n - len(out), seed))
                request += 1
            done += 1
            progress("generate", done, total)
            return out[: sampling.n]

        try:
            first: list[list[str]] = []
            if self.chat is None and prompts:  # the first request settles which route the server takes
                first = [await one(0, prompts[0])]
            rest = await asyncio.gather(*(one(i, m) for i, m in enumerate(prompts) if i >= len(first)))
            return first + list(rest)
        except TransportError as exc:
            if exc.status == 404:  # the route or the model is unknown there: say which models it serves
                check_endpoint(self.url, model=self.model, what="endpoint")
            raise GenerationError(f"endpoint {self.url} ({self.model}): {exc}") from None
        finally:
            await self.client.aclose()

    async def _sample(self, messages: Messages, sampling: Sampling, n: int, seed: int) -> list[str]:
        body: dict[str, Any] = {
            "model": self.model,
            "n": n,
            "temperature": sampling.temperature,
            "max_tokens": sampling.max_new_tokens,
            "seed": seed,
            **({"top_p": sampling.top_p} if sampling.temperature > 0 else {}),
            **self.extra_body,
        }
        limit = self.client.max_body_bytes * max(1, n)  # a reply carries n completions
        if self.chat is not False:
            try:
                texts, _ = await self.client.post(
                    "/chat/completions",
                    {**body, "messages": [dict(m) for m in messages]},
                    lambda d: _texts(d, "message"),
                    max_bytes=limit,
                )
                self.chat = True
                return texts
            except TransportError as exc:
                no_template = exc.status == 400 and any(h in str(exc).lower() for h in _NO_TEMPLATE_HINTS)
                if self.chat is True or not no_template:
                    raise
                self.chat = False  # the model has no chat template: plain text from now on
        texts, _ = await self.client.post(
            "/completions", {**body, "prompt": render_plain(messages)}, lambda d: _texts(d, "text"), max_bytes=limit
        )
        return texts
