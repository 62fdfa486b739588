"""``diagevo gpu-check`` plumbing on the CPU: the real round, measurements and verdicts of the
acceptance check with CUDA's memory counters stood in (no GPU here) and the tiny model pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402

from diagevo.errors import BadInput, Unavailable  # noqa: E402
from diagevo.train import gpu_check  # noqa: E402
from tests.hf_fixtures import tiny_pair  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
SMALL = [
    'hf.device="cpu"',
    "hf.bf16=false",
    "solver.max_new_tokens=40",
    "challenger.max_new_tokens=24",
    "hf.heldout_max_new_tokens=40",
    "challenger.batch_size=4",
    "solver.batch_size=4",
    "train.challenger_questions=4",
    "train.curriculum_questions=8",
    "challenger.group_size=4",
    "solver.group_size=4",
    "grpo.construction_responses=4",
    "grpo.learning_rate=1e-4",
    'filter.mode="none"',
    "hf.per_device_batch=16",
]


@pytest.fixture
def cuda_counters(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "CPU standing in for CUDA")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *_: calls.append("synchronize"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *_: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *_: 3 * 2**30)
    return calls


def test_refuses_without_cuda_and_without_a_model(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine")
    with pytest.raises(Unavailable, match="no CUDA device"):
        gpu_check.run_check(tmp_path, tmp_path / "out")


def test_one_round_measured_and_checked(
    cuda_counters: list[str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tiny = tiny_pair(request.config)
    with pytest.raises(BadInput, match="not a model directory"):
        gpu_check.run_check(tmp_path / "nothing", tmp_path / "out0")
    seen: list[str] = []
    report = gpu_check.run_check(
        tiny / "solver", tmp_path / "out", overrides=SMALL, progress=lambda p, d, n: seen.append(p)
    )
    assert report.passed, report.failures
    assert report.engine.startswith("transformers generate")  # no vLLM installed here
    assert {"challenger", "solver"} <= set(report.phases)
    assert report.phases["challenger"].completions_per_step == 16  # 4 prompts x G 4
    assert report.phases["challenger"].steps == 1 and report.phases["challenger"].peak_gib == 3.0
    assert all(f.seconds > 0 for f in report.phases.values())
    assert report.sampled_tokens > 0 and report.sampled_tokens_per_s > 0
    assert 0 < report.weights_changed["challenger"] <= 1 and 0 < report.weights_changed["solver"] <= 1
    assert report.verify_problems == [] and "reset" in cuda_counters
    json.dumps(report.as_dict())  # what --json prints
    with pytest.raises(BadInput, match="exists"):
        gpu_check.run_check(tiny / "solver", tmp_path / "out", overrides=SMALL)
