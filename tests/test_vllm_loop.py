"""Two rounds of the whole loop on the real vLLM engine (CPU build) and SmolLM2-135M-Instruct, as
a user runs it: ``diagevo train --config configs/smollm2-cpu.toml`` with the vLLM engine, in its
own process (``make test-vllm``).

Reduced for CI: one challenger and one solver step of 2 prompts x G = 2 per round, 4 candidates
with N = 2 votes each, 48-token responses, 4 held-out questions, and no double-confidence filter
so that every round's valid questions reach the solver. The full config, two rounds with each
engine, is ``benchmarks/measure_vllm_loop.py``. Checked: both rounds commit with every phase (challenger GRPO
through TRL's colocate generation on the shared engine, Q^cur, N votes, solver GRPO, diagnosis,
held-out accuracy); the process built one vLLM engine for the whole run, and nothing else built
one; ``memory verify`` finds the log clean.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.vllm_fixtures import skip_without_vllm

skip_without_vllm()
pytest.importorskip("trl")

from diagevo.catalog import PhaseCompleted, QuestionGenerated, RoundCommitted
from diagevo.generation.vllm_server import own_environment  # noqa: E402
from diagevo.log import open_log
from tests.hf_fixtures import smollm2_model  # noqa: E402
from tests.logs import phase_figures  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(2400)]

# counts every vllm.LLM this process builds, whoever builds it (the loop, or TRL for itself)
RUNNER = r"""
import json, sys
import vllm
built = [0]
init = vllm.LLM.__init__
def counted(self, *args, **kwargs):
    built[0] += 1
    init(self, *args, **kwargs)
vllm.LLM.__init__ = counted
from diagevo.generation import vllm_engine
from diagevo.cli.app import main
out, sys.argv = sys.argv[1], [sys.argv[0], *sys.argv[2:]]
try:
    main()
finally:
    with open(out, "w") as f:
        json.dump({"llm": built[0], "engines": vllm_engine.engines_built()}, f)
"""


def test_two_rounds_on_one_real_vllm_engine(tmp_path: Path) -> None:
    model = smollm2_model()
    db = f"sqlite:///{tmp_path / 'x.db'}"
    runner, counts = tmp_path / "runner.py", tmp_path / "counts.json"
    runner.write_text(RUNNER)
    heldout = tmp_path / "heldout.jsonl"  # four of the model's held-out questions
    heldout.write_text("".join((model / "heldout.jsonl").read_text().splitlines(keepends=True)[:4]))
    sets = [
        f"solver.model={json.dumps(str(model))}",
        f"challenger.model={json.dumps(str(model))}",
        f"hf.heldout={json.dumps(str(heldout))}",
        "hf.use_vllm=true",
        'filter.mode="none"',
        "train.challenger_questions=2",
        "train.curriculum_questions=4",
        "grpo.construction_responses=2",
        "challenger.max_steps=1",
        "solver.max_steps=1",
        "challenger.group_size=2",
        "solver.group_size=2",
        "solver.max_new_tokens=48",
        "challenger.max_new_tokens=48",
        "hf.heldout_max_new_tokens=16",
    ]
    cmd = [
        sys.executable,
        str(runner),
        str(counts),
        "train",
        "--config",
        str(ROOT / "configs" / "smollm2-cpu.toml"),
        "--db",
        db,
        "--run",
        "v",
        "--quiet",
        *[x for s in sets for x in ("--set", s)],
    ]
    env = {**own_environment(), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # not this process's rendezvous
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=2000)
    assert out.returncode == 0, out.stderr[-4000:]
    assert json.loads(counts.read_text()) == {"llm": 1, "engines": 1}  # one engine for the whole run

    with open_log(db) as store:
        commits = list(store.read("v", types=(RoundCommitted,)))
        phases = {(e.round, e.event.phase): phase_figures(e.event) for e in store.read("v", types=(PhaseCompleted,))}
        questions = [e for e in store.read("v", types=(QuestionGenerated,))]
    assert [e.round for e in commits] == [1, 2]
    for t in (1, 2):
        assert phases[(t, "construct")]["retained"] > 0, phases[(t, "construct")]  # Q^cur with labels from N votes
        for role in ("challenger", "solver"):
            stats = phases[(t, role)]
            assert stats["steps"] == 1, (t, role, stats)
            assert "sampling_logp_diff" in stats  # TRL sampled the step's completions from vLLM
        assert (t, "diagnose") in phases
        committed = commits[t - 1].event
        assert committed.heldout_acc is not None  # greedy held-out accuracy, sampled by the engine
        assert {"challenger", "construct", "solver", "diagnose", "evaluate"} <= set(committed.timing or {})
    assert {e.round for e in questions} == {1, 2}

    verify = subprocess.run(
        [sys.executable, "-m", "diagevo.cli.app", "memory", "verify", "--db", db, "--run", "v", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
