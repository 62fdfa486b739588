"""The diagnostician's HTTP attempts as ``llm.called`` events, and how a decision names the reply
it rests on."""

from __future__ import annotations

from typing import Any

from diagevo.catalog import LLMCalled
from diagevo.catalog.ids import digest_event_id
from diagevo.diagnosis.interface import Reply
from diagevo.schemas import EventIn, new_event


def call_events(run: str, t: int, key: tuple[object, ...], reply: Reply[Any], **extra: Any) -> list[EventIn]:
    out = []
    for i, c in enumerate(reply.calls):
        data = {
            k: v
            for k, v in c.items()
            if k not in ("stage", "model", "latency_s", "prompt_tokens", "completion_tokens", "raw")
        }
        call = LLMCalled(
            stage=c.get("stage", key[-1]),
            model=c.get("model", reply.model),
            latency_s=float(c.get("latency_s", 0.0)),
            prompt_tokens=c.get("prompt_tokens"),
            completion_tokens=c.get("completion_tokens"),
            raw=c.get("raw", ""),
            **extra,
            **data,
        )
        out.append(new_event(call, run=run, at_round=t, event_id=digest_event_id(run, t, *key, "call", i)))
    return out


def reply_ref(reply: Reply[Any] | None) -> dict[str, Any]:
    """How a decision names its reply: ``call``, the ``attempt`` of the ``llm.called`` event of
    the same decision that holds the reply (stored once, there), or the reply inline as ``raw``
    when no call recorded it (a diagnostician without HTTP calls)."""
    if reply is None or not reply.raw:
        return {"raw": ""}
    for c in reversed(reply.calls):
        if c.get("raw") == reply.raw and isinstance(c.get("attempt"), int):
            return {"raw": "", "call": c["attempt"]}
    return {"raw": reply.raw}
