"""The HTTP client for OpenAI-compatible servers (vLLM's server, any provider).

Shared by the diagnostician (:mod:`diagevo.diagnosis.llm`) and the endpoint generation engine
(:mod:`diagevo.generation.endpoint`): at most ``concurrency`` requests in flight, each with a
timeout; transport errors (timeouts, connection errors, 429, 5xx) and 200 replies that are not
what was asked for are retried with jittered exponential backoff; other 4xx are final. Every
HTTP attempt is described by an :class:`Attempt`, so callers can store or count them.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import ssl
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import openai
from openai import AsyncOpenAI, DefaultAioHttpClient, DefaultAsyncHttpxClient

from diagevo.errors import Unavailable
from diagevo.parsing import one_line

try:  # the HTTP library the installed openai client is built on
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - older openai releases use httpx
    import httpx as _httpx  # type: ignore[no-redef]

T = TypeVar("T")

_RETRYABLE = (
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.RateLimitError,
    openai.InternalServerError,
)

_CONNECTIONS_PER_CLIENT = 8
try:
    import aiohttp  # noqa: F401  (used by openai's DefaultAioHttpClient)

    HAVE_AIOHTTP = True
except ImportError:  # pragma: no cover - depends on the installed extras
    HAVE_AIOHTTP = False


def failure_line(exc: BaseException) -> str:
    """A transport failure as one short line. A refused connection says so: the openai client's
    aiohttp transport reports it as a connect timeout."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    return one_line(str(exc), 300) or type(exc).__name__


class EndpointUnreachable(Unavailable, ValueError):
    """An OpenAI-compatible endpoint did not answer at all (the message is one line)."""


def check_endpoint(
    base_url: str, *, api_key: str | None = None, timeout_s: float = 10.0, what: str = "endpoint"
) -> None:
    """Ask ``GET {base_url}/models`` once, before any work that would store something.

    Any HTTP answer means the server is there (some providers have no ``/models``), except 401
    and 403: the key was refused. A refused connection, an unknown host or silence raise
    :class:`EndpointUnreachable` with the reason in words."""
    key = api_key or os.environ.get("DIAGEVO_LLM_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        resp = _httpx.get(base_url.rstrip("/") + "/models", headers=headers, timeout=timeout_s)
    except _httpx.TimeoutException:
        raise EndpointUnreachable(f"the {what} at {base_url} did not answer within {timeout_s:g} s") from None
    except _httpx.HTTPError as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, socket.gaierror):
            cause = cause.__cause__ or cause.__context__
        reason = "unknown host" if cause is not None else failure_line(exc)
        raise EndpointUnreachable(f"cannot reach the {what} at {base_url}: {reason}") from None
    if resp.status_code in (401, 403):
        raise EndpointUnreachable(f"the {what} at {base_url} refused the API key (HTTP {resp.status_code})")


class BadResponse(Exception):
    """The server answered 200 with something that is not the expected reply (retried)."""


class TransportError(Exception):
    """The server did not answer usefully after the allowed retries. ``status`` is the HTTP
    status of a final 4xx answer (None for timeouts, connection errors and exhausted retries)."""

    def __init__(self, message: str, attempts: list[Attempt], status: int | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status


@dataclass(frozen=True, slots=True)
class Attempt:
    """One HTTP attempt: its latency and, when it failed, why."""

    latency_s: float
    error: str | None = None


class OpenAIClient:
    """POSTs JSON bodies to one OpenAI-compatible base URL with bounded concurrency and retries."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        concurrency: int = 64,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        self.base_url = base_url
        self._api_key = api_key or os.environ.get("DIAGEVO_LLM_API_KEY") or "unused"
        self.concurrency = max(1, concurrency)
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        # asyncio primitives and HTTP pools belong to one event loop; a CLI or a test may run
        # several loops over the life of one client
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[list[AsyncOpenAI], asyncio.Semaphore]
        ]
        self._per_loop = weakref.WeakKeyDictionary()
        self._rng = random.Random()
        self._next_client = 0

    def _loop_state(self) -> tuple[list[AsyncOpenAI], asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        state = self._per_loop.get(loop)
        if state is None:
            state = (self.make_clients(), asyncio.Semaphore(self.concurrency))
            self._per_loop[loop] = state
        return state

    def make_clients(self) -> list[AsyncOpenAI]:
        """The client's HTTP transport costs more CPU per request than a 50 ms reply leaves
        (~3 ms with httpx at 64 in flight). The aiohttp transport the openai package offers
        (``openai[aiohttp]``) halves that; without it, several small httpx pools stand in for one
        large one, because httpcore scans every pooled connection for each queued request."""

        def client(http_client: Any) -> AsyncOpenAI:
            return AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._api_key,
                timeout=self.timeout_s,
                max_retries=0,
                http_client=http_client,
            )

        # one TLS context for all pools (loading the CA bundle costs ~35 ms each); none for http
        verify: Any = ssl.create_default_context() if self.base_url.startswith("https") else False
        if HAVE_AIOHTTP:
            return [client(DefaultAioHttpClient(timeout=self.timeout_s, verify=verify))]
        shards = max(1, -(-self.concurrency // _CONNECTIONS_PER_CLIENT))
        per = -(-self.concurrency // shards)
        limits = _httpx.Limits(max_connections=per, max_keepalive_connections=per)
        return [
            client(DefaultAsyncHttpxClient(limits=limits, timeout=self.timeout_s, verify=verify)) for _ in range(shards)
        ]

    async def aclose(self) -> None:
        """Close the HTTP pools of the running loop (optional: pools die with their loop)."""
        state = self._per_loop.pop(asyncio.get_running_loop(), None)
        if state is not None:
            for client in state[0]:
                await client.close()

    async def post(self, path: str, body: dict[str, Any], read: Callable[[Any], T]) -> tuple[T, list[Attempt]]:
        """POST ``body`` to ``path`` and return ``read(parsed JSON reply)`` with the attempts made.

        ``read`` raises :class:`BadResponse` for a reply it cannot use; that attempt is retried
        like a transport error. Raises :class:`TransportError` when no attempt succeeded."""
        clients, sem = self._loop_state()
        self._next_client += 1
        client = clients[self._next_client % len(clients)]
        attempts: list[Attempt] = []
        for attempt in range(self.max_retries + 1):
            t0 = time.perf_counter()
            try:
                async with sem:
                    t0 = time.perf_counter()
                    # the documented raw-request path of the client: chat.completions.create()
                    # walks the whole request through its TypedDict transform, ~2 ms per call
                    text = await client.post(path, body=body, cast_to=str)
                value = read(_parse_json(text))
            except (*_RETRYABLE, BadResponse) as exc:
                attempts.append(Attempt(time.perf_counter() - t0, failure_line(exc)))
                if attempt == self.max_retries:
                    raise TransportError(f"{failure_line(exc)} (after {attempt + 1} attempts)", attempts) from None
                delay = min(self.max_backoff_s, self.backoff_s * 2**attempt)
                await asyncio.sleep(delay * (0.5 + self._rng.random() / 2))
                continue
            except openai.APIStatusError as exc:  # 4xx other than 429: retrying will not help
                attempts.append(Attempt(time.perf_counter() - t0, failure_line(exc)))
                raise TransportError(failure_line(exc), attempts, exc.status_code) from None
            except openai.APIError as exc:
                attempts.append(Attempt(time.perf_counter() - t0, failure_line(exc)))
                raise TransportError(failure_line(exc), attempts) from None
            attempts.append(Attempt(time.perf_counter() - t0))
            return value, attempts
        raise TransportError("no attempt was made", attempts)  # unreachable: the loop returns or raises


def _parse_json(text: str) -> Any:
    from diagevo.errors import BadInput
    from diagevo.parsing import loads, shorten

    try:
        return loads(text, "the response")
    except BadInput as exc:
        raise BadResponse(f"not usable JSON ({exc}): {shorten(text, 200)}") from None


def first_message(data: Any) -> tuple[str, dict[str, Any]]:
    """Content of the first choice of a chat completion and its usage; :class:`BadResponse`
    when ``data`` is not a chat completion."""
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise BadResponse(f"not a chat completion: {json.dumps(data)[:200]!r}") from None
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else "", usage_of(data)


def usage_of(data: Any) -> dict[str, Any]:
    usage = data.get("usage") if isinstance(data, dict) else None
    return usage if isinstance(usage, dict) else {}
