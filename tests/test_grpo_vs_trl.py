"""diagevo's hf backend against plain TRL GRPO (``benchmarks/bench_grpo_vs_trl.py``), small: on the
same questions and settings both learn, and the learning rate diagevo's trainers log is plain
TRL's linear schedule step by step, over one phase and across two phases with the optimizer kept."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.scripts import load_script

pytest.importorskip("trl")
import torch  # noqa: E402

from tests.test_mini_loop import pair  # noqa: E402,F401  # the two-skill pair, one cache entry for both files

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[1]


def _bench():  # noqa: ANN202
    return load_script("benchmarks/bench_grpo_vs_trl.py", "bench_grpo_vs_trl")


bench = _bench()
SMALL = bench.Settings(steps=8, group=4, batch=4, lr=1e-4, beta=0.04, loss_type="grpo", phases=1, seed=0)


@pytest.fixture
def copy(pair: Path, tmp_path: Path) -> Path:  # noqa: F811  (the imported fixture)
    torch.set_num_threads(1)
    shutil.copytree(pair, tmp_path / "pair")
    return tmp_path / "pair"


def linear(s) -> list[float]:  # noqa: ANN001
    """The rate logged at each step of one linear schedule without warm-up over all the steps
    (a step is logged with the rate it stepped at: lr x (1 - k / total), k = 0, 1, ...)."""
    return [s.lr * (1 - k / s.steps) for k in range(s.steps)]


def moved(start: dict, model) -> bool:  # noqa: ANN001
    return any(not torch.equal(start[k], v) for k, v in model.state_dict().items())


def test_one_phase_learns_at_plain_trls_rates(copy: Path) -> None:
    from transformers import AutoModelForCausalLM

    start = bench.weights(AutoModelForCausalLM.from_pretrained(copy / "solver"))
    questions = bench.training_questions(copy, SMALL.steps * SMALL.batch, SMALL.seed)
    trl = bench.train_trl(copy / "solver", questions, SMALL)
    ours = bench.train_diagevo(copy, questions, SMALL, "diagevo-new")
    assert moved(start, trl["model"]) and moved(start, ours["model"])
    assert trl["lrs"] == pytest.approx(linear(SMALL), rel=1e-6)
    assert ours["lrs"] == pytest.approx(trl["lrs"], rel=1e-6)


def test_two_phases_continue_one_schedule_and_one_optimizer(copy: Path) -> None:
    two = replace(SMALL, phases=2)
    questions = bench.training_questions(copy, two.steps * two.batch, two.seed)
    new = bench.train_diagevo(copy, questions, two, "diagevo-new")
    assert new["lrs"] == pytest.approx(linear(two), rel=1e-6)  # phase 2's step k: step steps/2 + k of one schedule
    kept = new["backend"]._optim["solver"].optimizer
    assert max(int(st["step"]) for st in kept.state.values()) == two.steps  # Adam's state went on too
    old = bench.train_diagevo(copy, questions, two, "diagevo-old")  # the loop's old recipe: restarts each phase
    assert old["lrs"] == pytest.approx([two.lr] * two.steps, rel=1e-6)
    assert old["backend"]._optim["solver"].optimizer is None
