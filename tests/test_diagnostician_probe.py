"""``diagevo doctor --diagnostician``: one probe per stage against real HTTP servers on loopback
(:mod:`tests.llm_server`): one that honours ``response_format`` (it answers only what the stage's
JSON Schema admits, as a server constraining decoding does), one that ignores it and answers free
text, and the other ways a server fails the diagnostician (refusing the field, down, an HTTP
error, thinking text, too slow)."""

from __future__ import annotations

import json
import re
import socket
from typing import Any

import pytest

from diagevo.config.sections import DiagnosisConfig
from diagevo.diagnosis.llm import LLMDiagnostician
from diagevo.diagnosis.probe import FAILURE, probe_diagnostician, stage_requests
from diagevo.diagnosis.reply_schemas import violation
from diagevo.diagnosis.tools import llm_diagnostician
from diagevo.generation.openai_client import OpenAIClient
from tests.llm_server import Fail, Hang, LLMServer
from tests.test_cli_memory import run_cli

STAGES = ("extract", "deduplicate", "assign_node", "consolidate")
PHRASE = "evaluates addition before multiplication in mixed expressions ignoring the standard order of operations"
PROSE = "The two attempts diverge at the first step: the failing one adds before it multiplies."


def instance(schema: dict[str, Any]) -> Any:
    """A value the schema admits (its first alternative), as constrained decoding would write."""
    if "anyOf" in schema:
        return instance(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    if schema["type"] == "object":
        return {key: instance(sub) for key, sub in schema["properties"].items()}
    if schema["type"] == "null":
        return None
    assert schema["type"] == "string" and re.fullmatch(schema["pattern"], PHRASE), schema
    return PHRASE


def constrained(body: dict[str, Any]) -> str:
    """A server with structured outputs: the reply is an instance of the request's schema."""
    return json.dumps(instance(body["response_format"]["json_schema"]["schema"]))


def serving(reply: Any, server: LLMServer) -> LLMServer:
    for stage in STAGES:
        server.default(stage, reply)
    return server


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_with_structured_outputs_passes_every_stage() -> None:
    with serving(constrained, LLMServer()) as server:
        probe = probe_diagnostician(server.url, "test-model", timeout_s=10)
        sent = server.calls()
    assert probe.ok and [s.stage for s in probe.stages] == list(STAGES)
    assert [s.verdict for s in probe.stages] == ["ok"] * 4, probe
    assert all(s.latency_s is not None and s.fix is None for s in probe.stages)
    # one request a stage, no retry, each with the fields every diagnostician request carries
    assert sorted(r["stage"] for r in sent) == sorted(STAGES)
    for r in sent:
        body = r["body"]
        assert body["model"] == "test-model" and body["temperature"] == 0.0 and body["max_tokens"] == 512
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        assert body["response_format"]["type"] == "json_schema" and body["response_format"]["json_schema"]["strict"]


def test_the_probes_are_the_requests_a_round_sends() -> None:
    """The real call of Prompt 1 (``LLMDiagnostician.extract``, as the pipeline makes it) sends the
    body the extraction probe sends, byte for byte."""
    with serving(constrained, LLMServer()) as server:
        probe_diagnostician(server.url, "test-model", timeout_s=10)
        (probed,) = [r["body"] for r in server.calls("extract")]
        diagnostician = llm_diagnostician(DiagnosisConfig(), llm_url=server.url, model="test-model")
        from diagevo.runtime.aio import run

        reply = run(diagnostician.extract(FAILURE))
        real = [r["body"] for r in server.calls("extract")][-1]
    assert reply.error is None and reply.value is not None and reply.value.matched_cause_id == "c1"
    assert json.dumps(real, sort_keys=True) == json.dumps(probed, sort_keys=True)


def test_a_server_that_ignores_response_format_fails_every_stage_with_the_reason() -> None:
    with serving(PROSE, LLMServer()) as server:
        probe = probe_diagnostician(server.url, "test-model", timeout_s=10)
    assert not probe.ok
    for s in probe.stages:
        assert s.verdict == "no structured outputs", s
        assert "diagevo's check refuses the reply (the reply contains no JSON object)" in s.detail
        assert s.reply == PROSE and s.fix is not None and "response_format" in s.fix.plain()


def test_a_reply_read_leniently_is_still_not_constrained() -> None:
    """JSON inside prose passes a round's lenient reading; the next reply need not: not ok."""
    with serving(lambda body: f"Here is my answer:\n```json\n{constrained(body)}\n```", LLMServer()) as server:
        probe = probe_diagnostician(server.url, "test-model", timeout_s=10)
    for s in probe.stages:
        assert s.verdict == "no structured outputs" and "read this time, but not constrained" in s.detail, s
        assert "not one bare JSON object" in s.detail


def test_a_reply_outside_the_schema_is_named_by_the_field() -> None:
    def extra_field(body: dict[str, Any]) -> str:
        return json.dumps({**json.loads(constrained(body)), "note": "sure"})

    with serving(extra_field, LLMServer()) as server:
        probe = probe_diagnostician(server.url, "test-model", timeout_s=10)
    assert all("field note is not in the schema" in s.detail for s in probe.stages), probe


def test_a_server_that_refuses_the_field_down_failing_thinking_or_slow() -> None:
    with serving(constrained, LLMServer()) as server:
        server.refuse_structured = True
        refused = probe_diagnostician(server.url, "test-model", timeout_s=10)
    assert {s.verdict for s in refused.stages} == {"no structured outputs"}
    assert "refuses response_format: HTTP 400" in refused.stages[0].detail
    down = probe_diagnostician(f"http://127.0.0.1:{_closed_port()}/v1", "m", timeout_s=10)
    assert {s.verdict for s in down.stages} == {"unreachable"} and "connection refused" in down.stages[0].detail
    with LLMServer() as server:
        server.default("extract", Fail(404, "The model `m` does not exist."))
        server.default("deduplicate", Fail(500, "out of memory"))
        server.default("assign_node", lambda body: "<think>The label should be general.</think>" + constrained(body))
        server.default("consolidate", Hang(5.0, '{"merge": false, "merged_label": null}'))
        mixed = {s.stage: s for s in probe_diagnostician(server.url, "m", timeout_s=1).stages}
    assert mixed["extract"].verdict == "http error" and "does not exist" in mixed["extract"].detail
    assert mixed["deduplicate"].verdict == "http error" and "HTTP 500" in mixed["deduplicate"].detail
    assert mixed["assign_node"].verdict == "thinking leaked" and "enable_thinking=false" in mixed["assign_node"].detail
    assert mixed["consolidate"].verdict == "too slow" and "no reply within 1 s" in mixed["consolidate"].detail


def test_the_schemas_admit_what_the_check_reads_and_refuse_what_it_refuses() -> None:
    """The validator the probe uses agrees with each stage's check on a reply of each shape."""
    diagnostician = LLMDiagnostician(OpenAIClient("http://unused/v1"), "m")
    for request in stage_requests(diagnostician):
        schema = request.schema["schema"]
        good = instance(schema)
        assert violation(good, schema) is None
        request.parse(json.dumps(good))  # the check reads what the schema admits
        assert violation({**good, "x": 1}, schema) is not None
        key = next(iter(good))
        assert violation({k: v for k, v in good.items() if k != key}, schema) is not None


def test_doctor_names_each_stage_and_exits_by_the_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DIAGEVO_DB", raising=False)
    for reply, code_wanted in ((constrained, 0), (PROSE, 1)):
        with serving(reply, LLMServer()) as server:
            args = ("--diagnostician", server.url, "--diagnostician-model", "test-model", "--timeout", "10")
            code, out, err = run_cli(capsys, "doctor", "--json", *args)
            assert code == code_wanted, err
            report = json.loads(out)["diagnostician"]
            assert report["ok"] is (code_wanted == 0) and [s["stage"] for s in report["stages"]] == list(STAGES)
            code, out, err = run_cli(capsys, "doctor", *args)
        assert code == code_wanted
        lines = [line for line in out.splitlines() if "(Prompt" in line]
        assert len(lines) == 4, out
        if code_wanted:
            assert all(line.strip().startswith("no structured outputs") for line in lines), out
            assert "not ok: diagnostician" in out and "fix: serve it where response_format" in out
        else:
            assert all(line.strip().startswith("ok") for line in lines), out
    assert list(tmp_path.iterdir()) == []  # doctor creates nothing
