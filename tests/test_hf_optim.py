"""A role's optimizer and schedule when the backend owns them (``diagevo/train/hf/optim.py``):
the schedule's rates by hand, TRL's own parameter groups, and the state a checkpoint keeps."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("trl")
import torch  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from diagevo.train.config import load_config  # noqa: E402
from diagevo.train.hf.args import grpo_kwargs, lr_factor, own_optimizer, phase_plan, schedule_horizon  # noqa: E402
from diagevo.train.hf.optim import RoleOptimizer, build_adamw, load_state, optimizers, save_state  # noqa: E402
from diagevo.train.hf.warm import new_model  # noqa: E402
from diagevo.train.mini.tokenizer import build_tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_the_schedules_by_hand() -> None:
    assert [lr_factor("constant", s, 10) for s in (0, 5, 10)] == [1.0, 1.0, 1.0]
    assert [lr_factor("linear", s, 8) for s in (0, 2, 6, 8, 12)] == [1.0, 0.75, 0.25, 0.0, 0.0]
    assert lr_factor("cosine", 0, 4) == 1.0 and lr_factor("cosine", 4, 4) == 0.0
    assert lr_factor("cosine", 1, 4) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    # a warm-up of 4 steps over 12: 0, 1/4, 1/2, 3/4, then the decay over the 8 steps left
    assert [lr_factor("linear", s, 12, warmup=4) for s in (0, 1, 2, 3, 4, 6, 12)] == [0, 0.25, 0.5, 0.75, 1, 0.75, 0]
    assert [lr_factor("constant", s, 12, warmup=2) for s in (0, 1, 2, 11)] == [0, 0.5, 1, 1]


def test_the_role_keys_reach_trl_and_the_paper_configs_keep_them_off() -> None:
    cfg = load_config(
        None,
        [
            "grpo.learning_rate=5e-5",
            "solver.learning_rate=1e-4",
            'solver.lr_scheduler="linear"',
            'solver.lr_span="run"',
            "train.rounds=5",
            "solver.max_steps=60",
            'grpo.loss_type="grpo"',
        ],
    )
    solver, chal = phase_plan(cfg, "solver", 2000), phase_plan(cfg, "challenger", 96)
    kw = grpo_kwargs(cfg, solver, "/tmp/x")
    assert (kw["learning_rate"], kw["lr_scheduler_type"], kw["loss_type"]) == (1e-4, "linear", "grpo")
    assert grpo_kwargs(cfg, chal, "/tmp/x")["learning_rate"] == 5e-5  # the challenger keeps grpo's rate
    assert schedule_horizon(cfg, solver) == 300 and schedule_horizon(cfg, chal) == chal.steps
    assert own_optimizer(cfg, "solver") and not own_optimizer(cfg, "challenger")
    warm = load_config(None, ['solver.lr_span="run"', "solver.lr_warmup=5"])  # a constant rate warmed up over the run
    assert own_optimizer(warm, "solver")
    phase_warm = load_config(None, ["solver.lr_warmup=5"])  # TRL's own: transformers' constant ignores a warm-up
    kw = grpo_kwargs(phase_warm, phase_plan(phase_warm, "solver", 9000), "/tmp/x")
    assert (kw["lr_scheduler_type"], kw["warmup_steps"]) == ("constant_with_warmup", 5)
    for name in ("qwen3-4b-base", "qwen3-8b-base", "octothinker-8b"):  # the paper's: a fresh constant run each phase
        paper = load_config(ROOT / "configs" / f"{name}.toml")
        for role in ("challenger", "solver"):
            r = paper.role(role)
            assert (r.learning_rate, r.lr_scheduler, r.keep_optimizer, own_optimizer(paper, role)) == (
                None,
                "constant",
                False,
                False,
            )
        assert (paper.solver.reward, paper.challenger.known_questions_only) == ("pseudo_label", False)


@pytest.fixture
def model():  # noqa: ANN201
    return new_model(build_tokenizer(), 0, hidden=32, layers=1, heads=2, kv_heads=1, positions=32)


def test_adamw_holds_trls_groups(model, tmp_path: Path) -> None:  # noqa: ANN001
    """The same parameters decay as in the optimizer TRL's trainer would build: every weight but
    biases and norms (a model with only norms and weights: the norms are the second group)."""
    from transformers import Trainer

    args = GRPOConfig(output_dir=str(tmp_path), learning_rate=3e-4, weight_decay=0.01, use_cpu=True, report_to="none")
    opt = build_adamw(model, args)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in opt.param_groups[0]["params"]}
    trl_decays = set(Trainer.get_decay_parameter_names(None, model)) & set(names.values())  # type: ignore[arg-type]
    assert decayed == trl_decays  # (a tied lm_head is the embedding, listed once)
    assert all("norm" in names[id(p)] for p in opt.param_groups[1]["params"]) and opt.param_groups[1]["params"]
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
    assert type(opt).__name__ == "AdamW" and opt.defaults["lr"] == 3e-4


def test_a_kept_optimizer_goes_on_where_it_stood_after_a_checkpoint(model, tmp_path: Path) -> None:  # noqa: ANN001
    args = GRPOConfig(output_dir=str(tmp_path), learning_rate=1e-3, use_cpu=True, report_to="none")
    held = RoleOptimizer()
    opt, sched = optimizers(held, model, args, "linear", horizon=10, keep=True)
    for _ in range(4):  # four steps of a phase
        model(input_ids=torch.tensor([[3, 4, 5]]), labels=torch.tensor([[3, 4, 5]])).loss.backward()
        opt.step(), sched.step(), opt.zero_grad()
    held.steps += 4
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 * 0.6)
    save_state(held, tmp_path)
    again = load_state(tmp_path)
    assert again.steps == 4 and again.optimizer is None and again.pending is not None
    opt2, sched2 = optimizers(again, model, args, "linear", horizon=10, keep=True)
    assert opt2.param_groups[0]["lr"] == pytest.approx(1e-3 * 0.6)  # the schedule goes on at step 4
    first = next(iter(opt.state.values()))
    restored = opt2.state[opt2.param_groups[0]["params"][0]]
    assert int(restored["step"]) == 4 and torch.equal(
        restored["exp_avg"], opt.state[opt.param_groups[0]["params"][0]]["exp_avg"]
    )
    assert first is not restored  # loaded, not shared
    fresh, _ = optimizers(RoleOptimizer(steps=4), model, args, "linear", horizon=10, keep=False)
    assert fresh is not opt2 and not fresh.state  # a fresh one each phase when not kept
