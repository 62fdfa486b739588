"""The real vLLM engine (CPU build) on the real SmolLM2-135M-Instruct: the platform's arguments,
and weights that follow the policy through a real TRL GRPO step (``make test-vllm``).

One engine for the module, built the way the ``hf`` backend builds it for a run. The GRPO step is
TRL's colocate mode on that shared engine, its weight sync going through vLLM's in-place
``reload_weights`` as the loop's own pushes do. The step's learning rate is raised (1e-4) so the
policy moves far beyond the engine-vs-trainer numerical difference and the two can be told apart.
The engine's kernels (oneDNN on the CPU) differ from the trainer's, so its log-probabilities of
the same weights differ a little, more for unlikely tokens (a bfloat16-like relative error): the
engine after a push must be as close to the trained policy as the freshly built engine was to the
base model, and much closer than to the weights it held before. Figures (log-prob and probability
differences, push seconds) are printed (``-s``); the bounds asserted are numerical, never times.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from pathlib import Path

import pytest

from tests.vllm_fixtures import skip_without_vllm

skip_without_vllm()
pytest.importorskip("trl")

from diagevo.curriculum.prompts import solver_messages  # noqa: E402
from diagevo.generation import vllm_engine  # noqa: E402
from diagevo.generation.vllm_platform import SLEEP_MODE_PLATFORMS, current_platform  # noqa: E402
from diagevo.train.config import load_config  # noqa: E402
from diagevo.train.hf.backend import HFBackend  # noqa: E402
from diagevo.train.hf.vllm_share import TRAINER  # noqa: E402
from tests.hf_fixtures import smollm2_model  # noqa: E402
from tests.vllm_fixtures import engine_greedy, engine_logprobs, policy_logits, policy_logprobs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(2400)]
QUESTIONS = ["What is 7 + 5?", "What is 9 times 3?"]
ANSWERS = ["7 + 5 = 12. The answer is \\boxed{12}.", "9 times 3 is 27, so the answer is \\boxed{27}."]


def gaps(a: list[list[float]], b: list[list[float]]) -> tuple[float, float, float]:
    """Mean and max |log-prob difference| and max |probability difference| over every token."""
    pairs = [(x, y) for xs, ys in zip(a, b, strict=True) for x, y in zip(xs, ys, strict=True)]
    diffs = [abs(x - y) for x, y in pairs]
    probs = max(abs(math.exp(x) - math.exp(y)) for x, y in pairs)
    return round(sum(diffs) / len(diffs), 5), round(max(diffs), 5), round(probs, 5)


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return smollm2_model()


def test_the_sleep_mode_table_is_vllms_own_answer() -> None:
    from vllm.platforms.interface import Platform, PlatformEnum

    for enum in PlatformEnum:
        platform = type("P", (Platform,), {"_enum": enum})()
        assert (enum.name.lower() in SLEEP_MODE_PLATFORMS) == platform.is_sleep_mode_available(), enum
    assert current_platform() == ("cpu", False)  # the CPU build, here


def test_the_engine_follows_the_policy_through_a_real_grpo_step(smollm2: Path, tmp_path: Path) -> None:
    sets = [
        f"solver.model={json.dumps(str(smollm2))}",
        f"challenger.model={json.dumps(str(smollm2))}",
        f"train.out_dir={json.dumps(str(tmp_path / 'ckpt'))}",
        "hf.use_vllm=true",
        "solver.max_new_tokens=24",
        "solver.max_steps=1",
        "grpo.learning_rate=1e-4",
    ]
    cfg = load_config(ROOT / "configs" / "smollm2-cpu.toml", sets)
    backend = HFBackend(cfg)
    tok = backend.tokenizer("solver")
    prompts = [
        tok.apply_chat_template(solver_messages(q), tokenize=True, add_generation_prompt=True, return_dict=True)[
            "input_ids"
        ]
        for q in QUESTIONS
    ]
    answers = [list(p) + tok(a, add_special_tokens=False)["input_ids"] for p, a in zip(prompts, ANSWERS, strict=True)]
    base = {k: v.detach().clone() for k, v in backend.model("solver").named_parameters()}

    engine = backend.engine("solver")  # built once, with the platform's arguments
    assert engine.platform == "cpu" and engine.llm.sleep_mode is False
    before_lp = engine_logprobs(engine.llm, answers)
    built_gap = gaps(before_lp, policy_logprobs(backend.model("solver"), answers))  # kernels, not weights
    before_greedy = engine_greedy(engine.llm, prompts, 24)
    pushes = engine.llm.pushes

    def reward(i: int, texts: list[str]) -> list[float]:  # varies within a group whatever the model writes
        return [1.0 if len(re.findall(r"\d", t)) % 2 == 0 else -1.0 for t in texts]

    out = backend.train_solver(QUESTIONS, reward, cfg.solver.group_size, random.Random(0))
    assert out.stats["steps"] == 1 and all(len(r) == 4 for r in out.responses)
    # TRL's rollouts ran on the shared engine, after TRL pushed its weights the engine's way
    assert engine.llm.holding == TRAINER and engine.llm.pushes > pushes
    trl_gap = (out.stats.get("sampling_logp_diff"), out.stats.get("sampling_logp_diff_max"))

    policy = backend.model("solver")
    policy.eval()
    moved = sum(not v.detach().equal(base[k]) for k, v in policy.named_parameters())
    assert moved == len(base)  # a step at 1e-4 moves every tensor

    started = time.perf_counter()
    assert backend.engine("solver") is engine  # the trained policy pushed into the same engine
    push_s = time.perf_counter() - started
    after_lp = engine_logprobs(engine.llm, answers)
    sync = gaps(after_lp, policy_logprobs(policy, answers))  # the engine vs the policy it was given
    step = gaps(after_lp, before_lp)  # what the step changed, as the engine sees it
    print(
        f"\nengine vs policy, |log-prob| mean/max, |prob| max: as built {built_gap}, after the step and a push {sync}; "
        f"the step moved them by {step}; TRL's rollouts vs its trainer (mean, max) {trl_gap}; push {push_s:.1f} s"
    )
    # as close to the trained policy as the freshly built engine was to the base model ...
    assert sync[0] <= 2 * built_gap[0] + 1e-3 and sync[2] <= 2 * built_gap[2] + 1e-3 and sync[2] < 0.02
    # ... and far closer than to the weights it held before
    assert step[0] > 10 * sync[0] and step[2] > 10 * sync[2]

    # greedy: every token the engine picks is the policy's own argmax (up to a numerical tie)
    after_greedy = engine_greedy(engine.llm, prompts, 24)
    for p, gen in zip(prompts, after_greedy, strict=True):
        logits = policy_logits(policy, list(p) + gen)
        for i, token in enumerate(gen):
            row = logits[len(p) - 1 + i]
            assert row[token] >= row.max() - 0.05, (i, token, int(row.argmax()))  # 0.05: the kernels' logit noise

    # the old weights pushed back: the engine is exactly what it was
    engine.llm.load_weights("base", base.items())
    assert engine_logprobs(engine.llm, answers) == before_lp
    assert engine_greedy(engine.llm, prompts, 24) == before_greedy
    assert vllm_engine.engines_built() == 1
