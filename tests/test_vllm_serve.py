"""A real OpenAI-compatible server where the project talks to one: ``vllm serve`` (CPU build) of
SmolLM2-135M-Instruct, started with the platform's flags, as the endpoint of ``diagevo diagnose``
and of ``diagevo eval --url`` (``make test-vllm``). The diagnostician asks it for
schema-constrained replies (structured outputs), which it honours."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.vllm_fixtures import skip_without_vllm

skip_without_vllm()

from diagevo.catalog import LLMCalled
from diagevo.diagnosis.interface import ExtractionInput  # noqa: E402
from diagevo.diagnosis.llm import LLMDiagnostician  # noqa: E402
from diagevo.generation.openai_client import OpenAIClient  # noqa: E402
from diagevo.generation.vllm_server import served  # noqa: E402
from diagevo.log import open_log
from tests.hf_fixtures import smollm2_model  # noqa: E402
from tests.test_cli_memory import run_cli  # noqa: E402
from tests.test_diagnosis_pipeline import D1, L1, RUN, seed  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]
NAME = "smollm2"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("serve") / "vllm-serve.log"
    with served(smollm2_model(), NAME, log, extra=("--seed", "0")) as url:
        yield url


def failure_line(fid: str, question: str, label: str, response: str, reference: str) -> str:
    return json.dumps(
        {
            "failure_id": fid,
            "question_id": "q-" + fid,
            "question": question,
            "pseudo_label": label,
            "response": response,
            "reference": reference,
            "known_causes": [],
        }
    )


def test_the_diagnostician_gets_schema_constrained_replies(server: str) -> None:
    dx = LLMDiagnostician(OpenAIClient(server, concurrency=2, timeout_s=300, max_retries=1), NAME)
    item = ExtractionInput(
        failure_id="f1",
        question_id="q1",
        question="What is 17 + 25?",
        pseudo_label="42",
        response="17 + 25 = 32, so the answer is 32.",
        reference="17 + 25 = 42. The answer is 42.",
    )
    reply = asyncio.run(dx.extract(item))
    assert dx.structured is True  # the server took the schema
    # constrained decoding: one JSON object with exactly the schema's keys, whatever the model
    assert set(json.loads(reply.raw)) == {"matched_cause_id", "error_cause"}
    assert reply.error is None and reply.value is not None


def test_diagnose_and_eval_through_vllm_serve(server: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    with open_log(db) as store:
        seed(store, {"N1": (L1, [("C1", D1)])})
    failures = tmp_path / "failures.jsonl"
    failures.write_text(
        "\n".join(
            [
                failure_line(
                    "f1", "What is 17 + 25?", "42", "17 + 25 = 32. The answer is 32.", "17 + 25 = 42. The answer is 42."
                ),
                failure_line("f2", "What is 6 times 7?", "42", "6 times 7 is 36.", "6 times 7 = 42."),
            ]
        )
        + "\n"
    )
    code, out, err = run_cli(
        capsys,
        "diagnose",
        str(failures),
        "--run",
        RUN,
        "--round",
        "2",
        "--llm-url",
        server,
        "--model",
        NAME,
        "--embedder",
        "local",
        "--db",
        db,
        "--index",
        str(tmp_path / "idx.lance"),
        "--json",
        "--concurrency",
        "2",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["failures"] == 2
    with open_log(db) as store:
        calls = [e.event for e in store.read(RUN, types=(LLMCalled,)) if e.round == 2]
    assert calls and all(c.model == NAME for c in calls)  # every decision asked the real server

    bench = tmp_path / "gsm8k.jsonl"
    bench.write_text(
        "".join(
            json.dumps({"question": q, "answer": a}) + "\n"
            for q, a in (("What is 2 + 3?", "5"), ("What is 10 - 4?", "6"))
        )
    )
    code, out, err = run_cli(
        capsys,
        "eval",
        "--bench",
        f"gsm8k={bench}",
        "--model",
        NAME,
        "--url",
        server,
        "--max-new-tokens",
        "32",
        "--samples",
        "0",
        "--out",
        str(tmp_path / "eval"),
        "--json",
    )
    assert code == 0, err
    results = json.loads(out)["results"]
    assert [(r["benchmark"], r["n"]) for r in results] == [("gsm8k", 2)]
    outputs = list((tmp_path / "eval").rglob("*.jsonl"))
    assert outputs and all(line.strip() for p in outputs for line in p.read_text().splitlines())
