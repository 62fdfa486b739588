"""``diagevo eval`` with the local engine on the tiny solver (the hf backend's model pair, built on
this machine): MATH-500 as it is, the paper's solver prompt in the model's chat template, per-
question outputs and resuming."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from diagevo.curriculum.prompts import SOLVER_SYSTEM  # noqa: E402
from tests.hf_fixtures import tiny_pair  # noqa: E402
from tests.test_cli_memory import run_cli  # noqa: E402
from tests.test_eval import SHARED  # noqa: E402

pytestmark = pytest.mark.slow
MATH500 = SHARED / "math500.jsonl"


@pytest.fixture(scope="session")
def tiny_dir(request: pytest.FixtureRequest) -> Path:
    return tiny_pair(request.config)


def test_the_tiny_solver_on_20_math500_questions(tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    solver = str(tiny_dir / "solver")
    args = ["eval", "--model", solver, "--bench", f"math500={MATH500}", "--limit", "20", "--out", str(tmp_path / "o"), "--json"]
    started = time.perf_counter()
    code, out, err = run_cli(capsys, *args)
    wall = time.perf_counter() - started
    assert code == 0, err
    report = json.loads(out)
    assert report["engine"] == "local"
    (result,) = report["results"]
    assert (result["benchmark"], result["n"], result["resumed"]) == ("math500", 20, 0)
    assert 0 <= result["correct"] <= 20 and result["accuracy"] == result["correct"] / 20
    rows = [json.loads(line) for line in Path(result["outputs"]).read_text(encoding="utf-8").splitlines()]
    assert [r["index"] for r in rows] == list(range(20))
    problems = [json.loads(line)["problem"] for line in MATH500.read_text(encoding="utf-8").splitlines()[:20]]
    assert [r["question"] for r in rows] == problems
    assert sum(bool(r["correct"]) for r in rows) == result["correct"]
    assert sum(r["answer"] is None for r in rows) == result["unparsed"]
    # the paper's solver prompt, rendered with the tiny model's ChatML template
    for r in rows:
        assert r["prompt"] == (
            f"<|im_start|>system\n{SOLVER_SYSTEM}<|im_end|>\n<|im_start|>user\n{r['question']}<|im_end|>\n<|im_start|>assistant\n"
        )
    with capsys.disabled():
        print(f"\n20 MATH-500 questions, tiny solver, local engine: {wall:.1f} s, accuracy {result['accuracy']:.3f}")

    # a second run generates nothing: every question is read back from the outputs file
    lines = Path(result["outputs"]).read_text(encoding="utf-8")
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    (again,) = json.loads(out)["results"]
    assert again["resumed"] == 20 and again["correct"] == result["correct"]
    assert Path(result["outputs"]).read_text(encoding="utf-8") == lines

    # an interrupted run (the last 5 lines lost) generates those 5 only, greedily the same
    kept = lines.splitlines(keepends=True)
    Path(result["outputs"]).write_text("".join(kept[:15]), encoding="utf-8")
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    (resumed,) = json.loads(out)["results"]
    assert resumed["resumed"] == 15
    again_rows = [json.loads(line) for line in Path(result["outputs"]).read_text(encoding="utf-8").splitlines()]
    assert [r["response"] for r in again_rows] == [r["response"] for r in rows]
