"""The HTTP client for OpenAI-compatible servers (vLLM's server, any provider), shared by the
diagnostician and the endpoint generation engine.

Transport errors (timeouts, connection errors, 429, 5xx) and 200 replies that are not what was
asked for are retried with jittered exponential backoff; other 4xx are final. What a server can
cost is bounded: each attempt has a total deadline (``timeout_s``, so a server that drips its
reply byte by byte is cut off), a :class:`Deadline` bounds a request across its retries, and a
reply body is read up to ``max_body_bytes`` only.
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

import aiohttp
from yarl import URL

from diagevo.errors import BadInput, EndpointUnreachable
from diagevo.schemas import current_limits
from diagevo.text.parsing import loads, not_utf8, one_line, quoted
from diagevo.text.urls import redact_url
from diagevo.text.words import did_you_mean

try:  # the HTTP library the installed openai client is built on
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - older openai releases use httpx
    import httpx as _httpx  # type: ignore[no-redef]

T = TypeVar("T")

_RETRYABLE = (TimeoutError, aiohttp.ClientError, OSError)


def failure_line(exc: BaseException) -> str:
    """A transport failure as one short line; a refused connection says so."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or isinstance(
            getattr(cause, "os_error", None), ConnectionRefusedError
        ):
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    return one_line(str(exc), 300) or type(exc).__name__


class ModelNotServed(BadInput):
    """A server that lists its models (``listed``), the one asked for not among them."""

    def __init__(self, message: str, listed: tuple[str, ...]) -> None:
        super().__init__(message)
        self.listed = listed


MODELS_BYTES = 1 << 20
"""The most of a ``GET /models`` reply read (a list of a few thousand models fits)."""


def check_endpoint(
    base_url: str,
    *,
    api_key: str | None = None,
    timeout_s: float = 10.0,
    what: str = "endpoint",
    model: str | None = None,
) -> tuple[str, ...] | None:
    """Ask ``GET {base_url}/models`` once, before any work that would store something: the ids of
    the models the server lists, or None when it lists none (some providers have no ``/models``).
    Any HTTP answer means the server is there, except 401 and 403: the key was refused
    (:class:`~diagevo.errors.BadInput`); no answer at all is :class:`EndpointUnreachable`. With
    ``model``, a server that lists models but not this one is refused (:class:`ModelNotServed`):
    the log would otherwise credit a model that never answered."""
    shown = redact_url(base_url)
    key = api_key or os.environ.get("DIAGEVO_LLM_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = b""
    try:
        with _httpx.stream("GET", base_url.rstrip("/") + "/models", headers=headers, timeout=timeout_s) as resp:
            status = resp.status_code
            if status == 200:
                for chunk in resp.iter_bytes():
                    body += chunk
                    if len(body) > MODELS_BYTES:  # not a list of models: read no further
                        body = b""
                        break
    except _httpx.TimeoutException:
        raise EndpointUnreachable(f"the {what} at {shown} did not answer within {timeout_s:g} s") from None
    except _httpx.HTTPError as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, socket.gaierror):
            cause = cause.__cause__ or cause.__context__
        reason = "unknown host" if cause is not None else failure_line(exc)
        raise EndpointUnreachable(f"cannot reach the {what} at {shown}: {reason}") from None
    if status in (401, 403):
        raise BadInput(
            f"the {what} at {shown} refused the API key (HTTP {status}): give its key in $DIAGEVO_LLM_API_KEY "
            "(or diagnosis.api_key)"
        )
    listed = served_models(body)
    if model is not None and listed is not None and model not in listed:
        more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
        shown_listed = ", ".join(quoted(m, 80) for m in listed[:5]) + more
        raise ModelNotServed(
            f"the {what} at {shown} does not serve model {quoted(model, 80)}"
            f"{did_you_mean(model, listed)} (it lists {shown_listed})",
            listed,
        )
    return listed


def served_models(body: bytes) -> tuple[str, ...] | None:
    """The model ids of a ``GET /models`` reply (``{"data": [{"id": ...}, ...]}``), or None."""
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return None
    ids = (
        tuple(m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))
        if isinstance(data, list)
        else ()
    )
    return ids or None


_ANSWERED = ("not usable JSON", "not a chat completion", "reply body", "more than")
"""How :class:`TransportError`'s lines begin where a server answered with no usable reply (a
body that is not a chat completion, or too large; redirects not followed)."""


def unanswered(line: str) -> bool:
    """Whether a :class:`TransportError`'s line says the server did not answer (a timeout, a
    failed connection, HTTP 408, 429 or 5xx: worth asking again later) rather than answered
    wrongly, which waiting does not change."""
    if line.startswith("HTTP "):
        status = line[5:8]
        return status in ("408", "429") or status.startswith("5")
    return not line.startswith(_ANSWERED)


class BadResponse(Exception):
    """The server answered 200 with something that is not the expected reply (retried)."""


class TransportError(Exception):
    """The server did not answer usefully after the allowed retries; ``status``: a final 4xx's."""

    def __init__(self, message: str, attempts: list[Attempt], status: int | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status


@dataclass(frozen=True, slots=True)
class Attempt:
    """One HTTP attempt: its latency and, when it failed, why."""

    latency_s: float
    error: str | None = None


class ReplyTooLarge(Exception):
    """A reply body past the client's limit (final: the same server will send it again)."""


class Deadline:
    """A time budget in seconds, counted from :meth:`start` (waiting for a free connection slot
    does not spend it)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end: float | None = None

    def start(self) -> None:
        if self._end is None:
            self._end = time.monotonic() + self.seconds

    def left(self) -> float:
        """Seconds left (all of them before :meth:`start`)."""
        return self.seconds if self._end is None else self._end - time.monotonic()


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
        max_body_bytes: int | None = None,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key or os.environ.get("DIAGEVO_LLM_API_KEY")
        self.concurrency = max(1, concurrency)
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._max_body_bytes = max_body_bytes
        # asyncio primitives and HTTP pools belong to one event loop; a CLI or a test may run
        # several loops over the life of one client
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[aiohttp.ClientSession, asyncio.Semaphore]
        ]
        self._per_loop = weakref.WeakKeyDictionary()
        self._rng = random.Random()

    @property
    def max_body_bytes(self) -> int:
        """The most bytes of a reply body read: as given, else the limits in effect (a run's ``[limits]``)."""
        return self._max_body_bytes or current_limits().reply_bytes

    def _loop_state(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        state = self._per_loop.get(loop)
        if state is None or state[0].closed:
            state = (self._session(), asyncio.Semaphore(self.concurrency))
            self._per_loop[loop] = state
        return state

    def _session(self) -> aiohttp.ClientSession:
        # one TLS context for the pool (loading the CA bundle costs ~35 ms); none for http
        tls: Any = ssl.create_default_context() if self.base_url.startswith("https") else False
        connector = aiohttp.TCPConnector(limit=self.concurrency, ssl=tls)
        headers = {"Authorization": f"Bearer {self.api_key or 'unused'}", "Content-Type": "application/json"}
        return aiohttp.ClientSession(connector=connector, headers=headers, timeout=aiohttp.ClientTimeout(total=None))

    async def aclose(self) -> None:
        """Close the HTTP pool of the running loop (optional: pools die with their loop)."""
        state = self._per_loop.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state[0].close()

    async def post(
        self,
        path: str,
        body: dict[str, Any],
        read: Callable[[Any], T],
        *,
        deadline: Deadline | None = None,
        max_bytes: int | None = None,
    ) -> tuple[T, list[Attempt]]:
        """POST ``body`` to ``path``: ``read(parsed JSON reply)`` and the attempts made; ``read``
        raises :class:`BadResponse` for a reply it cannot use, retried like a transport error.
        Raises :class:`TransportError` when no attempt succeeded."""
        session, sem = self._loop_state()
        limit = max_bytes or self.max_body_bytes
        data = json.dumps(body).encode()
        attempts: list[Attempt] = []
        for attempt in range(self.max_retries + 1):
            t0 = time.perf_counter()
            budget, timed_out = self.timeout_s, f"timed out after {self.timeout_s:g} s"
            try:
                async with sem:
                    t0 = time.perf_counter()
                    if deadline is not None:
                        deadline.start()
                        if deadline.left() < budget:
                            budget, timed_out = (
                                deadline.left(),
                                f"timed out: the deadline of {deadline.seconds:g} s passed",
                            )
                    if budget <= 0:
                        raise TimeoutError
                    async with asyncio.timeout(budget):
                        status, payload = await self._exchange(session, path, data, limit)
                if status >= 400:
                    raise _HTTPStatus(status, _error_message(status, payload))
                value = read(_parse_json(_text(payload)))
            except ReplyTooLarge as exc:
                attempts.append(Attempt(time.perf_counter() - t0, str(exc)))
                raise TransportError(str(exc), attempts) from None
            except _HTTPStatus as exc:
                attempts.append(Attempt(time.perf_counter() - t0, str(exc)))
                if exc.status != 429 and exc.status < 500:  # 4xx other than 429: retrying will not help
                    raise TransportError(str(exc), attempts, exc.status) from None
                await self._retry(attempt, str(exc), attempts, deadline)
            except (*_RETRYABLE, BadResponse) as exc:
                line = timed_out if isinstance(exc, TimeoutError) else failure_line(exc)
                attempts.append(Attempt(time.perf_counter() - t0, line))
                await self._retry(attempt, line, attempts, deadline)
            else:
                attempts.append(Attempt(time.perf_counter() - t0))
                return value, attempts
        raise TransportError("no attempt was made", attempts)  # unreachable: the loop returns or raises

    async def _retry(self, attempt: int, line: str, attempts: list[Attempt], deadline: Deadline | None) -> None:
        """Sleep the backoff before another attempt; :class:`TransportError` when none is left."""
        delay = min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + self._rng.random() / 2)
        no_time = deadline is not None and deadline.left() <= delay
        if attempt == self.max_retries or (no_time and line.startswith("timed out: the deadline")):
            raise TransportError(f"{line} (after {attempt + 1} attempts)", attempts) from None
        if deadline is not None and no_time:
            raise TransportError(
                f"{line} (after {attempt + 1} attempts: the deadline of {deadline.seconds:g} s leaves no time for "
                "another)",
                attempts,
            ) from None
        await asyncio.sleep(delay)

    async def _exchange(self, session: aiohttp.ClientSession, path: str, data: bytes, limit: int) -> tuple[int, bytes]:
        """One request: the status and the body, read up to ``limit`` bytes. A redirect is followed
        only as :func:`redirect_target` allows: the body holds the failures' texts and the key goes
        with it."""
        url = self.base_url.rstrip("/") + path
        for _ in range(MAX_REDIRECTS + 1):
            async with session.post(url, data=data, allow_redirects=False) as resp:
                if 300 <= resp.status < 400:
                    url = redirect_target(url, resp.status, resp.headers.get("Location"))
                    continue
                declared = resp.content_length
                if declared is not None and declared > limit:
                    raise ReplyTooLarge(f"reply body of {declared} bytes is over the limit of {limit} bytes")
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.content.iter_any():
                    size += len(chunk)
                    if size > limit:
                        raise ReplyTooLarge(f"reply body over the limit of {limit} bytes: stopped reading")
                    chunks.append(chunk)
                return resp.status, b"".join(chunks)
        raise _HTTPStatus(310, f"more than {MAX_REDIRECTS} redirects: not followed further")


MAX_REDIRECTS = 5


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs share scheme, host and port (the port a scheme implies included)."""
    x, y = URL(a), URL(b)
    return (x.scheme.lower(), (x.host or "").lower(), x.port) == (y.scheme.lower(), (y.host or "").lower(), y.port)


def redirect_target(url: str, status: int, location: str | None) -> str:
    """Where a redirect of a POST to ``url`` may go: the same origin, with the method kept (307,
    308); any other is a final :class:`_HTTPStatus`."""
    if not location:
        raise _HTTPStatus(status, f"HTTP {status}: a redirect without a Location")
    target = str(URL(url).join(URL(location)))
    if not same_origin(url, target):
        raise _HTTPStatus(
            status, one_line(f"HTTP {status}: a redirect to another origin ({target[:200]}) not followed")
        )
    if status not in (307, 308):
        raise _HTTPStatus(status, f"HTTP {status}: a redirect that turns the POST into a GET, not followed")
    return target


class _HTTPStatus(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error_message(status: int, payload: bytes) -> str:
    """``HTTP 400: <the server's error message>`` in one short line."""
    text = payload[:4096].decode("utf-8", "replace")
    try:
        err = json.loads(text).get("error")
        detail = err.get("message") if isinstance(err, dict) else err
    except (ValueError, AttributeError):
        detail = text
    return one_line(f"HTTP {status}: {detail}" if detail else f"HTTP {status}", 300)


def _text(payload: bytes) -> str:
    """A reply body as UTF-8 text; :class:`BadResponse` naming the first bad byte and its offset."""
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadResponse(f"reply body: {not_utf8(payload, exc.start)}") from None


def _parse_json(text: str) -> Any:
    try:
        return loads(text, "the response")
    except BadInput as exc:
        raise BadResponse(f"not usable JSON ({exc}): {quoted(text, 200)}") from None


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """The first choice of a chat completion: its text (None: the reply is not a chat completion),
    any thinking the server returned beside it, and why it finished."""

    content: str | None
    thinking: str = ""
    finish: str | None = None


def chat_message(data: Any) -> ChatMessage:
    """The first choice of a chat completion, as :class:`ChatMessage` (a content that is not a
    string reads as ``""``)."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        return ChatMessage(None)
    content = message.get("content") if isinstance(message, dict) else None
    thinking = message.get("reasoning_content") or message.get("reasoning") if isinstance(message, dict) else None
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    return ChatMessage(content if isinstance(content, str) else "", str(thinking or ""), finish)


def first_message(data: Any) -> tuple[str, dict[str, Any]]:
    """Content of the first choice of a chat completion and its usage; :class:`BadResponse`
    when ``data`` is not one."""
    content = chat_message(data).content
    if content is None:
        raise BadResponse(f"not a chat completion: {json.dumps(data)[:200]!r}")
    return content, usage_of(data)


def usage_of(data: Any) -> dict[str, Any]:
    usage = data.get("usage") if isinstance(data, dict) else None
    return usage if isinstance(usage, dict) else {}
