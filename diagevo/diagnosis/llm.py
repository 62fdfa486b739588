"""The diagnostician over an OpenAI-compatible chat API (vLLM's server or any provider).

One :class:`LLMDiagnostician` serves a whole round over one
:class:`~diagevo.generation.openai_client.OpenAIClient` (concurrency, deadlines, retries), greedy
and in Qwen3's non-thinking mode. A reply that does not validate gets exactly one re-ask stating
the violation; after that, or when the endpoint stays unreachable, the :class:`Reply` carries
``value=None`` and a one-line ``error``. Every HTTP attempt is in ``Reply.calls``, as the
``llm.called`` event the pipeline stores.

Structured outputs: each request asks the server to constrain the reply to its JSON Schema
(:mod:`diagevo.diagnosis.reply_schemas`, ``response_format`` of type ``json_schema``), so a weak
model's reply still parses. A server that refuses the field (HTTP 400 naming it) is asked again
without it, and from then on the client sends none and relies on the lenient parsing alone.
``structured=False`` never asks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from diagevo.catalog import LLMCalled
from diagevo.diagnosis import parsing, prompts, reply_schemas
from diagevo.diagnosis.interface import (
    Assignment,
    Consolidation,
    Dedup,
    Extraction,
    ExtractionInput,
    KnownCause,
    NodeView,
    Reply,
)
from diagevo.generation.openai_client import (
    Attempt,
    Deadline,
    OpenAIClient,
    TransportError,
    first_message,
)

T = TypeVar("T")
# what a server's 400 says when it does not take a response_format of type json_schema
_UNSUPPORTED_HINTS = ("response_format", "json_schema", "structured", "guided", "grammar", "not supported")


def refuses_structured(exc: TransportError) -> bool:
    """Whether a final HTTP error is the server refusing structured outputs (a 400 naming them)."""
    return exc.status == 400 and any(h in str(exc).lower() for h in _UNSUPPORTED_HINTS)


# token counts past this are no server's (and past int64 no database's)
MAX_TOKENS_COUNTED = 2**53


def token_count(value: Any) -> tuple[int | None, str | None]:
    """A ``usage`` count as the log stores it, and why it is refused (a string, a float, a
    negative or a giant number: a server that sends one is not answering as it should)."""
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_TOKENS_COUNTED:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        return None, f"not a whole number of tokens below 2**53: {shown}"
    return value, None


@dataclass(frozen=True)
class StageRequest(Generic[T]):
    """One decision's request before it is sent: its stage, the messages of its prompt, the
    JSON Schema its reply is constrained to, and the check that reads the reply."""

    stage: str
    messages: list[dict[str, str]]
    parse: Callable[[str], T]
    schema: dict[str, Any]


class LLMDiagnostician:
    """Prompts 1-4 through ``chat.completions``; implements :class:`~diagevo.diagnosis.interface.Diagnostician`."""

    def __init__(
        self,
        client: OpenAIClient,
        model: str,
        *,
        min_words: int = 10,
        max_words: int = 20,
        max_tokens: int | None = 512,
        thinking: bool = False,
        structured: bool | None = None,
        failure_timeout_s: float | None = None,
    ) -> None:
        """``client``: the server's, with its concurrency, deadlines, retries and reply limit."""
        self.client = client
        self.model_name = model
        # None: ask for structured outputs until the server refuses them; False: never ask
        self.structured = structured
        self.min_words, self.max_words = min_words, max_words
        self.max_tokens = max_tokens
        self._extra_body = {"chat_template_kwargs": {"enable_thinking": thinking}}
        self.failure_timeout_s = failure_timeout_s

    # --- the four decisions: each request built in one place (``diagevo doctor`` probes with them)

    def extract_request(self, item: ExtractionInput) -> StageRequest[Extraction]:
        supplied = frozenset(c.id for c in item.known)
        return StageRequest(
            "extract",
            prompts.extract_messages(item),
            lambda raw: parsing.parse_extraction(raw, supplied, self.min_words, self.max_words),
            reply_schemas.extraction(supplied, self.min_words, self.max_words),
        )

    def dedup_request(self, new_cause: str, candidates: Sequence[KnownCause]) -> StageRequest[Dedup]:
        ids = frozenset(c.id for c in candidates)
        return StageRequest(
            "deduplicate",
            prompts.dedup_messages(new_cause, candidates),
            lambda raw: parsing.parse_dedup(raw, ids),
            reply_schemas.dedup(ids),
        )

    def assign_request(self, new_cause: str, shortlist: Sequence[NodeView]) -> StageRequest[Assignment]:
        ids: Collection[str] = frozenset(n.id for n in shortlist)
        return StageRequest(
            "assign_node",
            prompts.assign_messages(new_cause, shortlist),
            lambda raw: parsing.parse_assignment(raw, ids, self.min_words, self.max_words),
            reply_schemas.assignment(ids, self.min_words, self.max_words),
        )

    def consolidate_request(self, a: NodeView, b: NodeView) -> StageRequest[Consolidation]:
        return StageRequest(
            "consolidate",
            prompts.consolidate_messages(a, b),
            lambda raw: parsing.parse_consolidation(raw, self.min_words, self.max_words),
            reply_schemas.consolidation(self.min_words, self.max_words),
        )

    async def extract(self, item: ExtractionInput) -> Reply[Extraction]:
        return await self._ask(self.extract_request(item))

    async def deduplicate(self, new_cause: str, candidates: Sequence[KnownCause]) -> Reply[Dedup]:
        return await self._ask(self.dedup_request(new_cause, candidates))

    async def assign_node(self, new_cause: str, shortlist: Sequence[NodeView]) -> Reply[Assignment]:
        return await self._ask(self.assign_request(new_cause, shortlist))

    async def consolidate(self, a: NodeView, b: NodeView) -> Reply[Consolidation]:
        return await self._ask(self.consolidate_request(a, b))

    def request_body(self, messages: list[dict[str, str]], schema: dict[str, Any] | None) -> dict[str, Any]:
        """The JSON body of one chat completion: greedy, ``max_tokens``, the thinking switch, and
        the reply constrained to ``schema`` unless the server has refused structured outputs."""
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "temperature": 0.0,
            **({"max_tokens": self.max_tokens} if self.max_tokens else {}),
            **self._extra_body,
        }
        if schema is not None and self.structured is not False:
            body["response_format"] = reply_schemas.response_format(schema)
        return body

    # --- plumbing -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP pools of the running loop (optional: pools die with their loop)."""
        await self.client.aclose()

    async def _ask(self, request: StageRequest[T]) -> Reply[T]:
        stage, messages, parse, schema = request.stage, request.messages, request.parse, request.schema
        calls: list[LLMCalled] = []
        raw, error = "", None
        # one budget for this decision's requests, retries and the re-ask included
        deadline = Deadline(self.failure_timeout_s) if self.failure_timeout_s else None
        for ask in range(2):  # the first ask and one re-ask
            try:
                raw, problem = await self._complete(stage, messages, calls, schema, deadline)
            except TransportError as exc:
                return self._reply(None, raw, calls, ask + 1, f"endpoint: {exc}")
            try:
                if problem is not None:  # a reply the log cannot take as it is (kept, made storable)
                    raise parsing.ReplyError(problem)
                value = parse(raw)
            except parsing.ReplyError as exc:
                error = str(exc)
                calls[-1] = calls[-1].model_copy(update={"violation": error})
                messages = [*messages, {"role": "assistant", "content": raw}, prompts.reask_message(error)]
                continue
            return self._reply(value, raw, calls, ask + 1, None)
        return self._reply(None, raw, calls, 2, f"invalid reply after a re-ask: {error}")

    def _reply(self, value: T | None, raw: str, calls: list[LLMCalled], asks: int, error: str | None) -> Reply[T]:
        return Reply(value=value, raw=raw, model=self.model_name, attempts=asks, error=error, calls=tuple(calls))

    async def _complete(
        self,
        stage: str,
        messages: list[dict[str, str]],
        calls: list[LLMCalled],
        schema: dict[str, Any] | None = None,
        deadline: Deadline | None = None,
    ) -> tuple[str, str | None]:
        """One chat completion with the client's retries; appends one ``llm.called`` per HTTP
        attempt. Returns the reply as the log can store it, and what makes it unusable as it came
        (a NUL character, a ``usage`` count that is not a whole number of tokens), else None."""
        body = self.request_body(messages, schema)
        constrained = "response_format" in body

        def record(attempt: Attempt, **fields: Any) -> None:
            calls.append(
                LLMCalled(
                    stage=stage, model=self.model_name, attempt=len(calls) + 1, latency_s=attempt.latency_s, **fields
                )
            )

        try:
            (content, usage), attempts = await self.client.post(
                "/chat/completions", body, first_message, deadline=deadline
            )
        except TransportError as exc:
            for a in exc.attempts:
                record(a, raw="", error=a.error)
            if constrained and refuses_structured(
                exc
            ):  # asked again without; a server never seen to constrain is not asked again
                if self.structured is None:
                    self.structured = False
                return await self._complete(stage, messages, calls, None, deadline)
            raise
        if constrained:
            self.structured = True
        for a in attempts[:-1]:
            record(a, raw="", error=a.error)
        tokens = {key: token_count(usage.get(key)) for key in ("prompt_tokens", "completion_tokens")}
        problem = next((f"usage.{key}: {why}" for key, (_n, why) in tokens.items() if why), None)
        if "\x00" in content:
            problem, content = "the reply contains a NUL character (U+0000)", content.replace("\x00", "\ufffd")
        record(attempts[-1], **{key: n for key, (n, _why) in tokens.items()}, raw=content)
        return content, problem
