"""examples/trl_grpo_trainer.py, a plain TRL ``GRPOTrainer`` script on the SmolLM2 model that
``diagevo models smollm2`` builds, drives two rounds through the public API: its log passes
``memory verify``, and ``runs``, ``stats``, ``why`` and ``report`` show it under its trainer's name.

Slow tier: the model is built once (the format warm-up run) into the cache the vLLM tier uses
too (``tests.hf_fixtures.smollm2_model``); ``DIAGEVO_SMOLLM2_DIR`` names one built already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from diagevo.catalog import EvalRecorded, FailureDiagnosed

pytest.importorskip("trl")
pytest.importorskip("gguf")

from tests.test_cli_memory import run_cli  # noqa: E402
from tests.test_examples_copied import copied  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def smollm2_warm() -> Path:
    """SmolLM2-135M-Instruct as ``diagevo models smollm2`` builds it (its default 24 warm-up steps),
    shared with the vLLM tier's cache."""
    from diagevo.train.hf import pretrained
    from tests.hf_fixtures import smollm2_model

    given = os.environ.get("DIAGEVO_SMOLLM2_DIR")
    if given:
        path = Path(given)
        assert (path / pretrained.PROVENANCE).is_file(), f"{path} is not a model diagevo models smollm2 built"
        return path
    return smollm2_model(warm_steps=24)


def test_the_trl_example_drives_two_rounds(
    smollm2_warm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'trl.db'}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    script = copied("trl_grpo_trainer.py", tmp_path / "copy", capsys)  # run where it is copied, as the pages say
    out = subprocess.run(
        [sys.executable, str(script), "--model", str(smollm2_warm)] + ["--db", db, "--run", "trl", "--rounds", "2"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=2000,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("round: kept") == 2

    code, text, err = run_cli(capsys, "memory", "verify", "--run", "trl", "--db", db, "--json")
    assert code == 0, err
    assert json.loads(text)["ok"] is True
    code, text, err = run_cli(capsys, "runs", "--db", db, "--json")
    [run] = json.loads(text)["runs"]
    assert run["trainer"] == "examples/trl_grpo_trainer.py (TRL GRPOTrainer)"
    assert run["status"] == "complete" and run["committed"] == 2
    stats = json.loads(run_cli(capsys, "memory", "stats", "--run", "trl", "--db", db, "--json")[1])
    assert [r["round"] for r in stats["rounds"]] == [1, 2]

    from diagevo import open_store

    with open_store(db) as store:
        types = Counter(e.type for e in store.read("trl"))
        evals = [e.event.metrics or {} for e in store.read("trl", types=(EvalRecorded,))]
        diagnosed = Counter(e.event.failure_id for e in store.read("trl", types=(FailureDiagnosed,)))
    assert types["round.committed"] == 2 and types["question.generated"] > 0
    assert types["failure.recorded"] == types["failure.diagnosed"] and set(diagnosed.values()) <= {1}
    assert len(evals) == 2 and all("solver_reward" in e for e in evals)
    if types["cause.created"]:  # a cause's story names the failure that created it
        shown = json.loads(run_cli(capsys, "memory", "show", "--run", "trl", "--db", db, "--json")[1])
        code, _, err = run_cli(capsys, "memory", "why", shown["causes"][0]["id"], "--run", "trl", "--db", db)
        assert code == 0, err
    report = tmp_path / "trl.html"
    code, _, err = run_cli(capsys, "report", "--db", db, "--run", "trl", "-o", str(report))
    assert code == 0, err
    header = report.read_text().split("<header>")[1].split("</header>")[0]
    assert "trainer examples/trl_grpo_trainer.py (TRL GRPOTrainer)" in header
