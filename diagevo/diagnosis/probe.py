"""Whether a server can serve the diagnostician: one probe per stage (``diagevo doctor --diagnostician``).

Each probe is a real request of its stage (Prompts 1-4), built by the code that builds the
pipeline's requests (:class:`~diagevo.diagnosis.llm.LLMDiagnostician`: its ``*_request``
methods and :meth:`~diagevo.diagnosis.llm.LLMDiagnostician.request_body`) from one tiny failure
whose answer is known, so a probe cannot drift from the calls a round makes. The probes go out
together, once each (no retry, no re-ask: a doctor reports, it does not insist), and each gets a
:class:`StageProbe`: a verdict and one line of why.

A reply passes when diagevo's own check reads it (what a round would record) *and* it is what a
server constraining decoding to the stage's JSON Schema returns: one bare JSON object that fits
the schema. The lenient reading of a round may accept a reply wrapped in prose; a doctor does
not, because the next reply of an unconstrained server need not be so lucky. Before the stages,
``GET /models``: whether the server lists the model.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from diagevo.config.sections import DiagnosisConfig
from diagevo.diagnosis import reply_schemas
from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView
from diagevo.diagnosis.llm import LLMDiagnostician, StageRequest, refuses_structured
from diagevo.diagnosis.parsing import ReplyError
from diagevo.diagnosis.tools import check_endpoints, llm_diagnostician
from diagevo.errors import BadInput, EndpointUnreachable, Fix
from diagevo.generation.openai_client import ChatMessage, ModelNotServed, TransportError, chat_message
from diagevo.runtime.aio import run
from diagevo.text.urls import endpoint_problem, redact_url

Verdict = Literal[
    "ok",
    "lists no models",
    "model not listed",
    "unreachable",
    "http error",
    "no structured outputs",
    "thinking leaked",
    "too slow",
]

TITLES = {
    "models": "the model (GET /models)",
    "extract": "extraction (Prompt 1)",
    "deduplicate": "deduplication (Prompt 2)",
    "assign_node": "node assignment (Prompt 3)",
    "consolidate": "consolidation (Prompt 4)",
}
SEE = "docs: how-to/diagnostician"
FIXES: dict[Verdict, Fix] = {
    "model not listed": Fix(hint="name a model the server lists (diagnosis.model), or serve this one"),
    "unreachable": Fix(hint=f"start the server, or check the URL (it ends in /v1; {SEE})"),
    "http error": Fix(hint="read the server's message: check the URL (it ends in /v1), the model name, the key"),
    "no structured outputs": Fix(
        hint=f"serve it where response_format json_schema constrains the reply (vLLM, llama-server; {SEE})"
    ),
    "thinking leaked": Fix(
        hint="serve a non-thinking model (Qwen/Qwen3-4B-Instruct-2507), or a server that passes "
        "chat_template_kwargs to the chat template"
    ),
    "too slow": Fix(hint="serve it on a faster machine, or allow more: diagnosis.request_timeout_s"),
}

# one failure of known answer (probe.toml): 2 + 3 × 4 worked left to right; its cause, a node, and a second node
_CASE = tomllib.loads(resources.files("diagevo.diagnosis").joinpath("probe.toml").read_text(encoding="utf-8"))
KNOWN = KnownCause(**_CASE["known"])
NEW_CAUSE: str = _CASE["new_cause"]
FAILURE = ExtractionInput(**_CASE["failure"], known=(KNOWN,))
NODE_A = NodeView(**_CASE["node_a"], causes=(KNOWN.description,))
NODE_B = NodeView(_CASE["node_b"]["id"], _CASE["node_b"]["label"], tuple(_CASE["node_b"]["causes"]))
REPLY_KEPT = 300  # characters of a reply a probe keeps to show
_THINK = re.compile(r"</?think>", re.IGNORECASE)


@dataclass(frozen=True)
class StageProbe:
    """One stage's probe: the stage (as ``llm.called`` names it), its verdict, one line of why
    (or of what came back), the seconds it took (None when no reply came), and the reply's text
    (the server's words: untrusted)."""

    stage: str
    verdict: Verdict
    detail: str
    latency_s: float | None = None
    reply: str = ""

    @property
    def title(self) -> str:
        return TITLES[self.stage]

    @property
    def fix(self) -> Fix | None:
        """What fixes a verdict that is not ``ok``."""
        return FIXES.get(self.verdict)

    @property
    def ok(self) -> bool:
        """Usable: ``ok``, or a server that lists no model (said so: the name is not checked)."""
        return self.verdict in ("ok", "lists no models")


@dataclass(frozen=True)
class DiagnosticianProbe:
    """The probes of one server and model: the URL (without credentials), the model, the
    deadline of each probe, one :class:`StageProbe` a stage, in pipeline order, and whether the
    server lists the model (``listed``: stage ``models``)."""

    url: str
    model: str
    timeout_s: float
    stages: tuple[StageProbe, ...]
    listed: StageProbe | None = None

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stages) and (self.listed is None or self.listed.ok)


def stage_requests(diagnostician: LLMDiagnostician) -> tuple[StageRequest[Any], ...]:
    """The four probe requests, as the diagnostician builds any request of its stages."""
    return (
        diagnostician.extract_request(FAILURE),
        diagnostician.dedup_request(NEW_CAUSE, (KNOWN,)),
        diagnostician.assign_request(NEW_CAUSE, (NODE_A,)),
        diagnostician.consolidate_request(NODE_A, NODE_B),
    )


def _verdict(stage: str, verdict: Verdict, detail: str, latency: float | None, reply: str = "") -> StageProbe:
    return StageProbe(stage, verdict, detail, latency, reply[:REPLY_KEPT])


def _judge(request: StageRequest[Any], message: ChatMessage, latency: float, max_tokens: int | None) -> StageProbe:
    """A reply that came back, judged: a chat completion, no thinking, read by diagevo's check,
    and constrained (one bare JSON object fitting the stage's schema)."""
    stage, content = request.stage, message.content
    if content is None:
        return _verdict(
            stage, "http error", "the server answered 200 with something that is not a chat completion", latency
        )
    if _THINK.search(content) or message.thinking:
        where = "reasoning_content" if message.thinking else "the reply's <think> block"
        said = f"thinking text in {where}: the server did not apply chat_template_kwargs.enable_thinking=false"
        return _verdict(stage, "thinking leaked", said, latency, content or message.thinking)
    if message.finish == "length":
        said = f"the reply was cut at max_tokens={max_tokens} before its JSON ended: it was not constrained"
        return _verdict(stage, "no structured outputs", said, latency, content)
    try:
        request.parse(content)
    except ReplyError as exc:
        said = f"diagevo's check refuses the reply ({exc}): the server did not constrain it to the stage's schema"
        return _verdict(stage, "no structured outputs", said, latency, content)
    try:
        value = json.loads(content)
    except ValueError:
        value = None
    why = (
        reply_schemas.violation(value, request.schema["schema"])
        if isinstance(value, dict)
        else "not one bare JSON object"
    )
    if why:
        said = f"read this time, but not constrained ({why}): the server ignores response_format"
        return _verdict(stage, "no structured outputs", said, latency, content)
    return _verdict(stage, "ok", f"{latency:.2f} s: one JSON object that fits the schema", latency, content)


async def _probe(diagnostician: LLMDiagnostician, request: StageRequest[Any], timeout_s: float) -> StageProbe:
    body = diagnostician.request_body(request.messages, request.schema)
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            message, _ = await diagnostician.client.post("/chat/completions", body, chat_message)
    except TimeoutError:
        return _verdict(request.stage, "too slow", f"no reply within {timeout_s:g} s", None)
    except TransportError as exc:
        line = str(exc)
        if refuses_structured(exc):
            return _verdict(request.stage, "no structured outputs", f"the server refuses response_format: {line}", None)
        if exc.status is not None or line.startswith("HTTP "):  # a 4xx, or a 5xx the one attempt got
            return _verdict(request.stage, "http error", line, None)
        return _verdict(request.stage, "unreachable", line, None)
    return _judge(request, message, time.perf_counter() - t0, diagnostician.max_tokens)


def _probe_models(diagnostician: LLMDiagnostician, cfg: DiagnosisConfig, timeout_s: float) -> StageProbe:
    """Whether the server lists the model (``GET /models``, the check ``diagnose`` makes before its
    first request): a server that lists models but not this one would answer for another, or
    not at all; one that lists none is said so."""
    model = diagnostician.model_name
    t0 = time.perf_counter()
    try:
        unlisted = check_endpoints(cfg, diagnostician, embedder=False, timeout_s=timeout_s)
    except ModelNotServed as exc:
        listed = exc.listed
        shown = ", ".join(repr(m) for m in listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
        said = f"{model!r} is not among the models it lists ({shown})"
        return _verdict("models", "model not listed", said, time.perf_counter() - t0)
    except EndpointUnreachable as exc:
        return _verdict("models", "unreachable", str(exc), None)
    except BadInput as exc:
        return _verdict("models", "http error", str(exc), None)
    latency = time.perf_counter() - t0
    if unlisted:
        return _verdict("models", "lists no models", f"the server lists no models: {model!r} is not checked", latency)
    return _verdict("models", "ok", f"{latency:.2f} s: the server lists {model!r}", latency)


async def _probe_all(diagnostician: LLMDiagnostician, timeout_s: float) -> tuple[StageProbe, ...]:
    try:
        found = await asyncio.gather(*(_probe(diagnostician, r, timeout_s) for r in stage_requests(diagnostician)))
    finally:
        await diagnostician.aclose()
    return tuple(found)


def probe_diagnostician(
    url: str, model: str, config: DiagnosisConfig | None = None, timeout_s: float | None = None
) -> DiagnosticianProbe:
    """Probe the server at ``url`` serving ``model`` with one request per stage. ``config``: the
    ``[diagnosis]`` section whose key, phrase lengths and deadline the real requests use (the
    defaults without it); ``timeout_s``: each probe's deadline (default: the config's
    ``request_timeout_s``)."""
    problem = endpoint_problem(url)
    if problem is not None:
        raise BadInput(f"the diagnostician's URL: {problem}")
    cfg = config or DiagnosisConfig()
    deadline = timeout_s or cfg.request_timeout_s
    # built as a round builds it; the client's own deadline lies past the probe's, which decides
    diagnostician = llm_diagnostician(cfg, llm_url=url, model=model, max_retries=0, timeout_s=deadline + 5)
    listed = _probe_models(diagnostician, cfg, deadline)
    stages = run(_probe_all(diagnostician, deadline))
    return DiagnosticianProbe(redact_url(url), model, deadline, stages, listed)


__all__ = ["DiagnosticianProbe", "StageProbe", "Verdict", "probe_diagnostician", "stage_requests"]
