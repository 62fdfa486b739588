"""The endpoint engine against a real OpenAI-compatible HTTP server on loopback."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from diagevo.curriculum.prompts import SOLVER_SYSTEM, solver_messages
from diagevo.generation import GenerationError, Sampling, make_engine, render_plain
from diagevo.generation.endpoint import EndpointEngine
from diagevo.generation.openai_client import ModelNotServed
from tests.llm_server import Fail, LLMServer


@pytest.fixture
def srv() -> Any:
    with LLMServer() as server:
        yield server


def echo(body: dict[str, Any]) -> list[str]:
    """n choices naming the question and the choice's index."""
    question = body["messages"][-1]["content"] if "messages" in body else body["prompt"].strip().split("\n\n")[-1]
    return [f"{question.strip()} #{j} \\boxed{{{j}}}" for j in range(body.get("n", 1))]


def test_n_samples_per_prompt_in_prompt_order_with_the_requested_sampling(srv: LLMServer) -> None:
    srv.default("other", echo)
    engine = EndpointEngine("solver", url=srv.url, concurrency=4)
    seen: list[tuple[str, int, int | None]] = []
    prompts = [solver_messages(f"q{i}") for i in range(7)]
    out = engine.generate(
        prompts, Sampling(n=3, temperature=1.0, top_p=0.99, max_new_tokens=77, seed=5), lambda *a: seen.append(a)
    )
    assert out == [[f"q{i} #{j} \\boxed{{{j}}}" for j in range(3)] for i in range(7)]
    bodies = [c["body"] for c in srv.calls("other")]
    assert len(bodies) == 7
    assert {(b["n"], b["temperature"], b["top_p"], b["max_tokens"], b["model"]) for b in bodies} == {
        (3, 1.0, 0.99, 77, "solver")
    }
    assert all(b["messages"][0] == {"role": "system", "content": SOLVER_SYSTEM} for b in bodies)
    assert len({b["seed"] for b in bodies}) == 7  # a seed of its own per prompt
    assert seen[0] == ("generate", 0, 7) and seen[-1] == ("generate", 7, 7) and len(seen) == 8


def test_greedy_sends_temperature_zero_and_no_top_p(srv: LLMServer) -> None:
    srv.default("other", echo)
    out = EndpointEngine("m", url=srv.url).generate([solver_messages("x")], Sampling(n=1, temperature=0.0))
    assert out == [["x #0 \\boxed{0}"]]
    body = srv.calls("other")[0]["body"]
    assert body["temperature"] == 0.0 and "top_p" not in body


def test_a_server_that_ignores_n_is_asked_again_with_fresh_seeds(srv: LLMServer) -> None:
    counter = iter(range(100))
    srv.default("other", lambda body: f"answer {next(counter)}")  # one choice whatever n says
    out = EndpointEngine("m", url=srv.url, concurrency=1).generate([solver_messages("x")], Sampling(n=4, seed=1))
    assert out == [[f"answer {i}" for i in range(4)]]
    bodies = [c["body"] for c in srv.calls("other")]
    assert [b["n"] for b in bodies] == [4, 3, 2, 1]
    assert len({b["seed"] for b in bodies}) == 4


def test_a_model_without_chat_template_falls_back_to_completions_on_plain_text(srv: LLMServer) -> None:
    srv.no_chat_template.add("base")
    srv.default("completion", echo)
    engine = EndpointEngine("base", url=srv.url, concurrency=1)
    prompts = [solver_messages("What is 2+2?"), solver_messages("And 3+3?")]
    out = engine.generate(prompts, Sampling(n=2))
    assert out[0] == ["What is 2+2? #0 \\boxed{0}", "What is 2+2? #1 \\boxed{1}"]
    assert engine.chat is False
    sent = [c["body"]["prompt"] for c in srv.calls("completion")]
    assert sent == [render_plain(p) for p in prompts]
    assert sent[0] == f"{SOLVER_SYSTEM}\n\nWhat is 2+2?\n\n"
    assert len(srv.calls("refused")) == 1  # the chat route is not tried again


def test_chat_forced_on_reports_the_missing_template(srv: LLMServer) -> None:
    srv.no_chat_template.add("base")
    with pytest.raises(GenerationError, match="chat template"):
        EndpointEngine("base", url=srv.url, chat=True).generate([solver_messages("x")], Sampling())


def test_server_errors_are_retried_then_reported_in_one_line(srv: LLMServer) -> None:
    srv.script("other", Fail(500), Fail(429))
    srv.default("other", echo)
    engine = EndpointEngine("m", url=srv.url, max_retries=2)
    engine.client.backoff_s = 0.01
    assert engine.generate([solver_messages("x")], Sampling()) == [["x #0 \\boxed{0}"]]
    srv.script("other", Fail(500), Fail(500), Fail(500))
    with pytest.raises(GenerationError) as info:
        engine.generate([solver_messages("y")], Sampling())
    message = str(info.value)
    assert "\n" not in message and "after 3 attempts" in message and srv.url in message


def test_an_unreachable_server_is_one_line(tmp_path: Any) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = make_engine("endpoint", "m", url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(GenerationError, match="connection refused") as info:
        engine.generate([solver_messages("x")], Sampling())
    assert "\n" not in str(info.value)


def test_make_engine_needs_a_url() -> None:
    with pytest.raises(ValueError, match="base URL"):
        make_engine("endpoint", "m")


def test_a_404_for_a_model_the_server_does_not_serve_names_the_ones_it_does(srv: LLMServer) -> None:
    """Issue 83: vLLM answers a request for a model it does not serve with HTTP 404; the refusal
    names the models the server lists (it said only "HTTP 404"). A 404 for a model it lists stays
    the server's own error."""
    srv.default("other", Fail(404, "The model `solver` does not exist."))
    with pytest.raises(ModelNotServed, match=r"does not serve model 'solver'.*it lists 'test-model', 'm'"):
        EndpointEngine("solver", url=srv.url, max_retries=0).generate([solver_messages("x")], Sampling())
    with pytest.raises(GenerationError, match="HTTP 404"):
        EndpointEngine("m", url=srv.url, max_retries=0).generate([solver_messages("x")], Sampling())
