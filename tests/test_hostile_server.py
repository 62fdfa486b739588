"""What a misbehaving model server can cost is bounded: a reply body is read up to a limit, a
request has a total deadline (connect and the whole body), a decision's requests share one
deadline across their retries, and the other failures of a round go on meanwhile.

Against a real loopback HTTP server (:mod:`tests.llm_server`: dripping, stalling and flooding
replies) and a SQLite log. No wall-clock bounds are asserted: the server counts the bytes it
never got to send, and the log says why each call failed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from diagevo.config.limits import LimitsConfig
from diagevo.diagnosis.llm import LLMDiagnostician
from diagevo.diagnosis.tools import llm_diagnostician
from diagevo.generation.openai_client import Deadline, OpenAIClient, TransportError, first_message
from tests.llm_server import Drip, Flood, LLMServer, Stall
from tests.test_diagnosis_pipeline import (  # noqa: F401  (fixtures)
    D1,
    L1,
    RUN,
    cfg,
    events,
    failure,
    j,
    run_round,
    seed,
    srv,
    store,
)

SMALL = LimitsConfig(text_bytes=1024)  # replies read up to 16 KiB


def small_dx(srv: LLMServer, **kw: Any) -> LLMDiagnostician:  # noqa: F811
    c = cfg(**kw)
    return llm_diagnostician(c, llm_url=srv.url, model="test-model", backoff_s=0.01, max_body_bytes=SMALL.reply_bytes)


@pytest.mark.parametrize("declare", [True, False], ids=["content-length", "close-delimited"])
def test_a_flooding_reply_is_not_read_past_the_limit(srv: LLMServer, store, declare: bool) -> None:  # noqa: F811
    rnd = seed(store, {"N1": (L1, [("C1", D1)])})
    srv.default("extract", Flood(8 * 2**20, declare=declare))
    s = run_round(srv, store, [failure("f1", ("C1",))], rnd, diagnostician=small_dx(srv))
    assert s.failed == 1
    ((_, failed),) = events(store, "diagnosis.failed")
    assert "over the limit of 16384 bytes" in failed["reason"] and failed["reason"].startswith("endpoint:")
    (call,) = [d for _, d in events(store, "llm.called")]
    assert call["error"] == failed["reason"].removeprefix("endpoint: ")
    assert len(srv.calls("extract")) == 1  # final: the same server would flood again
    assert srv.requests[0]["body"]["max_tokens"] == 512  # requests bound what they ask for


def test_a_dripping_reply_is_cut_off_at_the_deadline_and_the_round_goes_on(srv: LLMServer, store) -> None:  # noqa: F811
    rnd = seed(store, {"N1": (L1, [("C1", D1)])})
    good = j(matched_cause_id="C1", error_cause=None)

    def reply(body: dict[str, Any]) -> Any:
        return Drip(good, interval_s=0.05) if "drip" in body["messages"][1]["content"] else good

    srv.default("extract", reply)
    failures = [failure("f0", ("C1",), question="drip drip"), *(failure(f"f{i}", ("C1",)) for i in range(1, 6))]
    s = run_round(srv, store, failures, rnd, diagnostician=small_dx(srv, request_timeout_s=0.5, max_retries=0))
    assert (s.recurrences, s.failed) == (5, 1)
    failed = {d["failure_id"]: d["reason"] for _, d in events(store, "diagnosis.failed")}
    assert failed == {"f0": "endpoint: timed out after 0.5 s (after 1 attempts)"}
    (unsent,) = srv.paced(1)
    assert unsent > 0  # the client left before the body was whole


def test_a_decisions_retries_share_one_deadline(srv: LLMServer, store) -> None:  # noqa: F811
    rnd = seed(store, {"N1": (L1, [("C1", D1)])})
    srv.default("extract", Stall(30.0))
    dx = small_dx(srv, request_timeout_s=0.4, max_retries=20, failure_timeout_s=1.0)
    s = run_round(srv, store, [failure("f1", ("C1",))], rnd, diagnostician=dx)
    assert s.failed == 1
    ((_, failed),) = events(store, "diagnosis.failed")
    assert "the deadline of 1 s" in failed["reason"]  # passed, or leaves no time for another attempt
    calls = [d for _, d in events(store, "llm.called")]
    assert 1 <= len(calls) < 21 and all(c["error"].startswith("timed out") for c in calls)


def test_the_client_alone_stops_at_the_deadline_and_at_the_limit(srv: LLMServer) -> None:  # noqa: F811
    srv.script("other", Stall(30.0), Flood(8 * 2**20, declare=False), "not json")
    client = OpenAIClient(srv.url, timeout_s=5.0, max_retries=0, max_body_bytes=50_000)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    async def ask() -> str:
        try:
            (content, _), _ = await client.post("/chat/completions", body, first_message, deadline=Deadline(0.3))
            return content
        except TransportError as exc:
            return str(exc)
        finally:
            await client.aclose()

    assert asyncio.run(ask()) == "timed out: the deadline of 0.3 s passed (after 1 attempts)"
    assert asyncio.run(ask()) == "reply body over the limit of 50000 bytes: stopped reading"
    assert asyncio.run(ask()) == "not json"
    (flooded,) = srv.paced(1)  # the flood ends first: the stall goes on until the server stops
    assert flooded > 0


def test_the_runs_limits_bound_the_reading_too(srv: LLMServer, store) -> None:  # noqa: F811
    """Without a limit of its own, the client reads up to the limits in effect: the run's."""
    from diagevo.schemas import text_limits

    rnd = seed(store, {"N1": (L1, [("C1", D1)])})
    srv.default("extract", Flood(100_000))
    with text_limits(SMALL):
        s = run_round(srv, store, [failure("f1", ("C1",))], rnd)
    assert s.failed == 1
    ((_, failed),) = events(store, "diagnosis.failed")
    assert "is over the limit of 16384 bytes" in failed["reason"]
