"""Untrusted text is stored bounded: a reply past ``limits.text_bytes`` is stored cut, marked as
cut with the whole text's length and SHA-256, once per call; the log stays verifiable.

Against a real loopback HTTP server and a SQLite log."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from diagevo.catalog import LLMCalled
from diagevo.config.limits import LimitsConfig
from diagevo.schemas import InvalidEvent, text_limits, validate_event
from diagevo.views.verify import verify_run
from tests.llm_server import LLMServer
from tests.logs import wire_event
from tests.test_diagnosis_pipeline import D1, L1, RUN, events, failure, j, run_round, seed, srv, store  # noqa: F401


def test_a_long_reply_is_stored_cut_once_per_call(srv: LLMServer, store, tmp_path: Path) -> None:  # noqa: F811
    rnd = seed(store)
    reply = "{" + "é" * 100_000  # 200,001 UTF-8 bytes, not JSON: asked again, then a failed diagnosis
    srv.default("extract", reply)
    whole = reply.encode()
    s = run_round(srv, store, [failure("f1")], rnd)
    assert s.failed == 1
    calls = [d for _, d in events(store, "llm.called")]
    assert len(calls) == 2  # the ask and the re-ask: two calls, each stored once
    for call in calls:
        stored = call["raw"].encode()
        assert len(stored) <= LimitsConfig().text_bytes and whole.startswith(stored)
        assert call["cut"] == {"raw": {"bytes": len(whole), "sha256": hashlib.sha256(whole).hexdigest()}}
    ((_, failed),) = events(store, "diagnosis.failed")
    assert failed["raw"] == "" and "cut" not in failed and calls[failed["call"] - 1]["stage"] == "extract"
    assert verify_run(store, RUN) == []


def test_the_runs_limits_apply(srv: LLMServer, store) -> None:  # noqa: F811
    rnd = seed(store)
    srv.default("extract", "x" * 5000)
    with text_limits(LimitsConfig(text_bytes=1024)):
        run_round(srv, store, [failure("f1")], rnd)
    calls = [d for _, d in events(store, "llm.called")]
    assert [len(c["raw"]) for c in calls] == [1024, 1024] and all(c["cut"]["raw"]["bytes"] == 5000 for c in calls)


def test_phrases_are_cut_at_their_own_limit_at_a_character_boundary() -> None:
    note = "€" * 2000  # 6000 bytes
    ev = wire_event("run.noted", RUN, 0, "n1", note=note)
    assert len(ev.data["note"].encode()) <= LimitsConfig().phrase_bytes and note.startswith(ev.data["note"])
    assert ev.data["cut"]["note"]["bytes"] == 6000
    assert validate_event(ev.line()) == ev  # a stored event handed in again is unchanged


@pytest.mark.parametrize(
    ("cut", "said"),
    [
        ("yes", "data.cut: must be an object"),
        ({"latency_s": {"bytes": 1, "sha256": "0" * 64}}, "data.cut: 'latency_s' is not a text of this type"),
        ({"raw": {"bytes": -1, "sha256": "0" * 64}}, "data.cut.raw: must be"),
        ({"raw": {"bytes": 1, "sha256": "nothex"}}, "data.cut.raw: must be"),
    ],
)
def test_a_malformed_cut_map_is_refused_in_one_line(cut: object, said: str) -> None:
    with pytest.raises(InvalidEvent, match=said) as info:
        wire_event("llm.called", RUN, 1, "c1", stage="extract", raw="x", cut=cut)
    assert "\n" not in str(info.value)


def test_why_joins_the_reply_back_from_its_call(srv: LLMServer, store) -> None:  # noqa: F811
    from diagevo.views.stories import cause_rows, cause_story, recent_cause_rows

    rnd = seed(store, {"N1": (L1, [("C1", D1)])})
    reply = j(matched_cause_id="C1", error_cause=None)
    srv.default("extract", reply)
    run_round(srv, store, [failure("f1", ("C1",))], rnd)
    ((_, diag),) = events(store, "failure.diagnosed")
    assert diag["raw"] == "" and diag["call"] == 1  # stored once, in the call
    whole = cause_story(cause_rows(store, RUN, "C1"), "C1")
    recent = cause_story(recent_cause_rows(store, RUN, "C1")[0], "C1")
    for story in (whole, recent):
        (attributed,) = [e for e in story.timeline if e.failure is not None and e.failure.failure_id == "f1"]
        assert attributed.failure.reply == reply and attributed.to_dict()["failure"]["diagnosis"]["raw"] == reply
    assert any(isinstance(e, LLMCalled) for _, _, e in recent_cause_rows(store, RUN, "C1")[0])
