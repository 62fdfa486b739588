"""A loopback OpenAI-compatible server for tests and benchmarks.

Speaks ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` over real HTTP on 127.0.0.1.
Chat replies are scripted per diagnostician stage (recognised from the system message) and
consumed in order; a stage without a script falls back to its default (a callable or a string).
Generation: a callable reply may return a list of strings, one choice each (how a server honours
``n``); ``POST /v1/completions`` is answered from the ``"completion"`` stage; a model named in
``no_chat_template`` gets vLLM's 400 for a tokenizer without a chat template on the chat route;
with ``refuse_structured`` a request carrying a ``response_format`` gets a 400 naming it.
Every request is recorded. Embeddings are deterministic: a text's vector is set explicitly with
:meth:`LLMServer.set_vector` / :meth:`LLMServer.similar`, or derived from a hash of the text
(random unit vectors in 64 dimensions are nearly orthogonal).
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from diagevo.diagnosis.prompts import STAGES


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error status (e.g. 500, 429)."""

    status: int = 500
    message: str = "scripted failure"


@dataclass(frozen=True)
class Hang:
    """Answer only after ``seconds`` (longer than the client's timeout: a timeout)."""

    seconds: float
    content: str = "{}"


@dataclass(frozen=True)
class Drip:
    """Answer 200 at once, then send the body one byte every ``interval_s`` (a server that
    never stops talking but never finishes)."""

    content: str = "{}"
    interval_s: float = 1.0


@dataclass(frozen=True)
class Stall:
    """Answer 200 and the first ``sent`` bytes of the body, then nothing for ``seconds``."""

    seconds: float
    content: str = "{}"
    sent: int = 16


@dataclass(frozen=True)
class Flood:
    """Answer 200 with a chat completion whose content is ``size`` bytes, as fast as it can;
    ``declare``: with its Content-Length, else delimited by closing the connection."""

    size: int
    declare: bool = True


@dataclass(frozen=True)
class Raw:
    """Answer 200 with exactly these body bytes (e.g. not UTF-8)."""

    body: bytes


Scripted = str | Fail | Hang | Drip | Stall | Flood | Raw | Callable[[dict[str, Any]], Any]
_PACED = (Drip, Stall, Flood, Raw)


def stage_of(body: dict[str, Any]) -> str:
    msgs = body.get("messages") or []
    system = next((m.get("content", "") for m in msgs if m.get("role") == "system"), "")
    for stage, text in STAGES.items():
        if system == text:
            return stage
    return "other"


class LLMServer:
    """Start with ``with LLMServer() as srv:``; ``srv.url`` is the ``/v1`` base URL."""

    def __init__(self, delay_s: float = 0.0, dim: int = 64, models: tuple[str, ...] = ("test-model", "m")) -> None:
        self.delay_s = delay_s
        self.dim = dim
        self.models = models  # what GET /models lists (none: a server without a list)
        self.scripts: dict[str, deque[Scripted]] = defaultdict(deque)
        self.defaults: dict[str, Scripted] = {}
        self.requests: list[dict[str, Any]] = []
        self.vectors: dict[str, np.ndarray] = {}
        self.no_chat_template: set[str] = set()
        self.refuse_structured = (
            False  # answer a request with a response_format with a 400, as a server without structured outputs
        )
        self.unsent: list[int] = []  # per paced reply (Drip, Stall, Flood): body bytes never sent
        self._lock = threading.Lock()
        self._paced_done = threading.Condition()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting ------------------------------------------------------------------------------

    def script(self, stage: str, *replies: Scripted) -> LLMServer:
        with self._lock:
            self.scripts[stage].extend(replies)
        return self

    def default(self, stage: str, reply: Scripted) -> LLMServer:
        self.defaults[stage] = reply
        return self

    def set_vector(self, text: str, vec: np.ndarray) -> None:
        v = np.asarray(vec, dtype=np.float64)
        self.vectors[text] = v / np.linalg.norm(v)

    def vector(self, text: str) -> np.ndarray:
        if text in self.vectors:
            return self.vectors[text]
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim)
        return v / np.linalg.norm(v)

    def similar(self, text: str, like: str, cosine: float) -> None:
        """Make ``text``'s vector have exactly ``cosine`` similarity with ``like``'s."""
        base = self.vector(like)
        noise = self.vector("orthogonal:" + text)
        noise = noise - (noise @ base) * base
        noise /= np.linalg.norm(noise)
        self.set_vector(text, cosine * base + np.sqrt(max(0.0, 1 - cosine**2)) * noise)

    def paced(self, n: int, timeout_s: float = 30.0) -> list[int]:
        """:attr:`unsent` once ``n`` paced replies have ended (the client may leave before the
        server notices at its next write)."""
        with self._paced_done:
            self._paced_done.wait_for(lambda: len(self.unsent) >= n, timeout_s)
            return list(self.unsent)

    def calls(self, stage: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if stage is None or r["stage"] == stage]

    # --- serving ----------------------------------------------------------------------------------

    def _next(self, stage: str) -> Scripted | None:
        with self._lock:
            if self.scripts[stage]:
                return self.scripts[stage].popleft()
        return self.defaults.get(stage)

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
        """(status, json body, delay before answering)."""
        if path.endswith("/embeddings"):
            inputs = body.get("input")
            texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
            with self._lock:
                self.requests.append({"path": path, "stage": "embeddings", "body": body})
            data = [
                {"object": "embedding", "index": i, "embedding": self.vector(t).tolist()} for i, t in enumerate(texts)
            ]
            usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
            return 200, {"object": "list", "data": data, "model": body.get("model", ""), "usage": usage}, 0.0
        completion = path.endswith("/v1/completions")
        if not path.endswith("/chat/completions") and not completion:
            return 404, {"error": {"message": f"no route {path}"}}, 0.0
        if not completion and body.get("model") in self.no_chat_template:
            with self._lock:
                self.requests.append({"path": path, "stage": "refused", "body": body})
            message = (
                "As of transformers v4.44, default chat template is no longer allowed, so you must provide "
                "a chat template if the tokenizer does not define one."
            )
            return 400, {"error": {"message": message, "type": "BadRequestError", "code": 400}}, 0.0
        if self.refuse_structured and "response_format" in body:
            with self._lock:
                self.requests.append({"path": path, "stage": "refused", "body": body})
            message = "response_format of type json_schema is not supported by this server"
            return 400, {"error": {"message": message, "type": "BadRequestError", "code": 400}}, 0.0
        stage = "completion" if completion else stage_of(body)
        with self._lock:
            self.requests.append({"path": path, "stage": stage, "body": body})
        reply = self._next(stage)
        if callable(reply) and not isinstance(reply, (Fail, Hang, *_PACED)):
            reply = reply(body)
        delay = self.delay_s
        if isinstance(reply, _PACED):
            return 200, {"paced": reply, "model": body.get("model", "")}, delay
        if reply is None:
            return 500, {"error": {"message": f"nothing scripted for stage {stage}"}}, delay
        if isinstance(reply, Fail):
            return reply.status, {"error": {"message": reply.message, "type": "server_error"}}, delay
        if isinstance(reply, Hang):
            delay, reply = reply.seconds, reply.content
        if isinstance(reply, list) and all(isinstance(r, str) for r in reply):
            contents = list(reply)
        else:
            contents = [reply if isinstance(reply, str) else json.dumps(reply)]
        return 200, _completion(body.get("model", ""), contents, text=completion), delay

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, port: int = 0) -> LLMServer:
        """Serve on ``port`` (0: any free one)."""
        server = self
        self._stop.clear()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms stalls

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the model list, as vLLM's server answers it
                if not self.path.endswith("/models"):
                    self.send_error(404)
                    return
                data = [{"id": m, "object": "model"} for m in server.models]
                out = json.dumps({"object": "list", "data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                if server._stop.is_set():  # stopped: a kept-alive connection is dropped unanswered, as by a dead server
                    self.close_connection = True
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    body = {}
                status, payload, delay = server.handle(self.path, body)
                if delay > 0 and server._stop.wait(delay):
                    return
                if isinstance(payload.get("paced"), _PACED):
                    self._paced(payload["paced"], payload["model"])
                    return
                out = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _paced(self, how: Drip | Stall | Flood | Raw, model: str) -> None:
                if isinstance(how, Raw):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(how.body)))
                    self.end_headers()
                    self.wfile.write(how.body)
                    return
                if isinstance(how, Flood):
                    head, tail = json.dumps(_completion(model, ["\x00"])).encode().split(b"\\u0000")
                    size = len(head) + how.size + len(tail)
                else:
                    out = json.dumps(_completion(model, [how.content])).encode()
                    size = len(out)
                sent = 0
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    if isinstance(how, Flood) and not how.declare:
                        self.send_header("Connection", "close")
                        self.close_connection = True
                    else:
                        self.send_header("Content-Length", str(size))
                    self.end_headers()
                    if isinstance(how, Drip):
                        for i in range(len(out)):
                            self.wfile.write(out[i : i + 1])
                            self.wfile.flush()
                            sent += 1
                            if server._stop.wait(how.interval_s):
                                break
                    elif isinstance(how, Stall):
                        self.wfile.write(out[: how.sent])
                        self.wfile.flush()
                        sent = how.sent
                        if not server._stop.wait(how.seconds):
                            self.wfile.write(out[how.sent :])
                            sent = size
                    else:
                        self.wfile.write(head)
                        sent = len(head)
                        chunk = b"x" * 65536
                        while sent < len(head) + how.size:
                            piece = chunk[: len(head) + how.size - sent]
                            self.wfile.write(piece)
                            sent += len(piece)
                        self.wfile.write(tail)
                        sent += len(tail)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                with server._paced_done:
                    server.unsent.append(size - sent)
                    server._paced_done.notify_all()

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

            def handle_error(self, request: Any, client_address: Any) -> None:
                """A client that hangs up (a probe, a deadline) is not the server's error: quiet,
                so a test reading a command's stderr sees the command's lines alone."""
                if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
                    super().handle_error(request, client_address)

        self._httpd = Server(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def restart(self) -> LLMServer:
        """Serve again on the port it served on before :meth:`stop` (a server that comes back)."""
        assert self._httpd is not None
        return self.start(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"


class ServerProcess:
    """An :class:`LLMServer` in its own process (benchmarks: the client keeps its GIL to itself),
    answering each stage in ``defaults`` with a fixed reply."""

    def __init__(self, delay_s: float = 0.0, defaults: dict[str, str] | None = None) -> None:
        self.delay_s = delay_s
        self.defaults = defaults or {}
        self.url = ""
        self._proc: Any = None

    def __enter__(self) -> ServerProcess:
        import subprocess
        import sys
        from pathlib import Path

        root = Path(__file__).resolve().parent.parent
        cmd = [
            sys.executable,
            "-m",
            "tests.llm_server",
            "--delay",
            str(self.delay_s),
            "--defaults",
            json.dumps(self.defaults),
        ]
        self._proc = subprocess.Popen(cmd, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = self._proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self._proc.kill()
            raise RuntimeError("the test server process did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.stdin.close()  # the child exits when its stdin closes
        try:
            self._proc.wait(timeout=10)
        except Exception:
            self._proc.kill()


def _main() -> None:
    import argparse
    import sys

    ap = argparse.ArgumentParser(description="loopback OpenAI-compatible test server")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--defaults", default="{}", help='JSON object: {"stage": "reply content"}')
    ap.add_argument("--model", action="append", default=[], help="a model GET /models lists (repeatable)")
    args = ap.parse_args()
    server = LLMServer(delay_s=args.delay, **({"models": tuple(args.model)} if args.model else {}))
    for stage, reply in json.loads(args.defaults).items():
        server.default(stage, reply)
    with server:
        sys.stdout.write(server.url + "\n")
        sys.stdout.flush()
        sys.stdin.read()


_counter = 0


def _completion(model: str, contents: list[str], *, text: bool = False) -> dict[str, Any]:
    global _counter
    _counter += 1
    words = sum(len(c.split()) for c in contents)
    if text:
        choices = [{"index": i, "text": c, "finish_reason": "stop", "logprobs": None} for i, c in enumerate(contents)]
    else:
        choices = [
            {"index": i, "message": {"role": "assistant", "content": c}, "finish_reason": "stop", "logprobs": None}
            for i, c in enumerate(contents)
        ]
    return {
        "id": f"{'cmpl' if text else 'chatcmpl'}-test-{_counter}",
        "object": "text_completion" if text else "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": 100, "completion_tokens": max(1, words), "total_tokens": 100 + words},
    }


if __name__ == "__main__":
    _main()
