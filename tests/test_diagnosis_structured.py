"""Structured outputs of the diagnostician client: each request carries its stage's JSON Schema
(``response_format``), and a server that refuses it is asked again without it, once for all.
The real server (``vllm serve``, constraining a real model) is in ``tests/test_vllm_serve.py``."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator

import pytest

from diagevo.diagnosis import reply_schemas
from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView
from diagevo.diagnosis.llm import LLMDiagnostician
from tests.llm_server import LLMServer
from tests.test_diagnosis_pipeline import dx, j

CAUSE = "misapplies the quadratic formula by dropping the negative root when both roots satisfy the equation"


@pytest.fixture
def srv() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def item(*known: str) -> ExtractionInput:
    return ExtractionInput(
        failure_id="f1",
        question_id="q1",
        question="Solve x^2 = 4.",
        pseudo_label="2",
        response="x = 2 only",
        reference="x = 2 or x = -2; the positive root is 2",
        known=tuple(KnownCause(k, "active", CAUSE) for k in known),
    )


def test_each_stage_asks_for_its_schema_with_the_supplied_ids(srv: LLMServer) -> None:
    srv.script("extract", j(matched_cause_id="C2", error_cause=None))
    srv.script("assign_node", j(create_new_node=True, new_node_label=CAUSE, assigned_node=None))
    d = dx(srv)
    reply = asyncio.run(d.extract(item("C1", "C2")))
    assert reply.value is not None and reply.value.matched_cause_id == "C2"
    node = NodeView("N1", "quadratic equations and their roots", ())
    assert asyncio.run(d.assign_node(CAUSE, [node])).value is not None
    bodies = [r["body"] for r in srv.requests]
    fmt = bodies[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "extraction"
    match, new = fmt["json_schema"]["schema"]["anyOf"]
    assert match["properties"]["matched_cause_id"]["enum"] == ["C1", "C2"]  # only ids the prompt supplied
    assert match["properties"]["error_cause"] == new["properties"]["matched_cause_id"] == {"type": "null"}
    create, existing = bodies[1]["response_format"]["json_schema"]["schema"]["anyOf"]
    assert existing["properties"]["assigned_node"]["enum"] == ["N1"] and create["properties"]["assigned_node"] == {
        "type": "null"
    }
    assert d.structured is True


def test_a_server_without_structured_outputs_is_asked_again_without_them(srv: LLMServer) -> None:
    srv.refuse_structured = True
    srv.default("extract", j(matched_cause_id=None, error_cause=CAUSE))
    d = dx(srv)
    first = asyncio.run(d.extract(item()))
    second = asyncio.run(d.extract(item()))
    assert first.value is not None and first.value.error_cause == CAUSE and second.value == first.value
    stages = [r["stage"] for r in srv.requests]
    assert stages == ["refused", "extract", "extract"]  # refused once, then plain requests only
    assert "response_format" not in srv.requests[2]["body"] and d.structured is False
    assert first.attempts == 1 and [c.error is not None for c in first.calls] == [True, False]


def test_structured_false_never_asks(srv: LLMServer) -> None:
    srv.default("extract", j(matched_cause_id=None, error_cause=None))
    d = LLMDiagnostician(dx(srv).client, "test-model", structured=False)
    assert asyncio.run(d.extract(item())).value is not None
    assert "response_format" not in srv.requests[0]["body"]


def test_a_phrase_schema_admits_exactly_the_lengths_the_parser_accepts() -> None:
    schema = reply_schemas.extraction(set(), 10, 20)["schema"]  # no known causes: a new cause or a slip
    pattern = schema["properties"]["error_cause"]["anyOf"][0]["pattern"]
    for n, ok in ((9, False), (10, True), (20, True), (21, False)):
        assert bool(re.fullmatch(pattern, " ".join(["word"] * n))) is ok
    assert schema["required"] == ["matched_cause_id", "error_cause"] and schema["additionalProperties"] is False
    assert reply_schemas.dedup(set())["schema"]["properties"] == {  # no candidates: only "not a duplicate"
        "duplicate": {"type": "boolean", "enum": [False]},
        "matched_cause_id": {"type": "null"},
    }
    json.dumps(reply_schemas.consolidation(10, 20))  # plain JSON, as sent
