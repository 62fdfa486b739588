"""The two roles' settings: ``[grpo]``, shared by both, and ``[challenger]`` / ``[solver]``, one
class for what the roles share (:class:`RoleConfig`, Table 8's columns) and one each for what only
that role has: kept apart from :mod:`diagevo.config.sections` as the settings of one job, the
roles' GRPO training."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from diagevo.config.base import Count, NonNegative, PositiveShare, Section, Share, run_setting


class GRPOSettings(Section):
    """``[grpo]``: the optimizer recipe both roles share (Table 7, R-Zero's values; the simulator has
    its own learning rates in ``[sim.params]``) and N."""

    learning_rate: PositiveShare = Field(
        default=1e-6, description="hf backend: GRPO learning rate, held constant (no warmup, no decay) (Table 7: 1e-6)."
    )
    weight_decay: Share = Field(default=1e-2, description="hf backend: AdamW weight decay (Table 7: 0.01).")
    kl_beta: NonNegative = Field(
        default=1e-2,
        description="hf backend: KL penalty coefficient β against the reference policy (Table 7: 0.01).",
    )
    temperature: float = Field(
        default=1.0,
        gt=0,
        le=10,
        description="hf backend: sampling temperature of GRPO rollouts and of every question and response sampled "
        "(Table 7: 1.0).",
    )
    top_p: PositiveShare = Field(
        default=0.99, description="hf backend: nucleus-sampling top-p of rollouts and samples (Table 7: 0.99)."
    )
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo"] = Field(
        default="dapo",
        description="hf backend: how TRL's GRPO loss aggregates its tokens (TRL's loss_type; the paper does not say; "
        "TRL's default, dapo, kept).",
    )
    construction_responses: Count = Field(
        default=12,
        description="N: solver responses sampled per curriculum candidate; their votes give the pseudo-label, p1 and "
        "p2 "
        "(Eq. 3) (Table 8: 12).",
    )


_HF_LENGTH = (
    "hf backend: longest completion of the role in tokens, in GRPO and in sampling (the paper does not give it)."
)


class RoleConfig(Section):
    """``[challenger]`` and ``[solver]``: what differs between the two GRPO roles (Table 8) and,
    on the ``hf`` backend, the model that plays the role; the defaults are the solver's (Table 8's
    solver column), the challenger's section changes some."""

    model: str = run_setting(
        default="Qwen/Qwen3-8B-Base",
        min_length=1,
        description="hf backend: the role's base model, a local model directory (nothing is downloaded).",
    )
    batch_size: Count = Field(
        default=256, description="Prompts per GRPO optimizer step, the global batch (Table 8: 256)."
    )
    group_size: int = Field(
        default=8,
        ge=2,
        description="Completions per prompt, the GRPO group whose rewards are normalised together (Table 8: 8; "
        "G for the solver). At least 2: a group-relative advantage needs two.",
    )
    max_steps: Count = Field(
        default=12, description="Most GRPO optimizer steps per round (Table 8: 12 for the solver)."
    )
    max_new_tokens: Count = run_setting(default=1024, description=_HF_LENGTH)
    learning_rate: float | None = Field(
        default=None, gt=0, le=1, description="hf backend: this role's GRPO learning rate; unset: grpo.learning_rate."
    )
    lr_scheduler: Literal["constant", "linear", "cosine"] = Field(
        default="constant",
        description="hf backend: the learning rate's schedule (the paper: constant, R-Zero's 1e-6 throughout); "
        "linear and cosine decay to 0 over lr_span.",
    )
    lr_span: Literal["phase", "run"] = Field(
        default="phase",
        description="hf backend: the steps a decaying schedule spans: phase, each round's GRPO phase; run, every "
        "round's (train.rounds x max_steps), continued from the role's steps so far. A departure from the paper "
        "when not constant.",
    )
    lr_warmup: int = Field(
        default=0,
        ge=0,
        description="hf backend: steps of linear warm-up from 0 at the start of the schedule's span (the paper: 0). "
        "A fresh Adam's first steps move every weight by about the learning rate: a small model at 1e-4 loses "
        "skills it had. A departure from the paper when set.",
    )
    keep_optimizer: bool = Field(
        default=False,
        description="hf backend: one AdamW state kept across the rounds (saved with each checkpoint) instead of a "
        "fresh optimizer every phase (the paper: each round a fresh training run). A departure from the paper.",
    )


class ChallengerConfig(RoleConfig):
    """``[challenger]``: Table 8's challenger column; a challenger completion is one question."""

    max_steps: Count = Field(
        default=6, description="Most GRPO optimizer steps per round (Table 8: 6 for the challenger)."
    )
    max_new_tokens: Count = run_setting(default=512, description=_HF_LENGTH)
    known_questions_only: bool = Field(
        default=False,
        description="Where the world knows its questions (the simulator's, the mini world's): a question it does not "
        "know is invalid, as a malformed one is (challenger reward 0, never a candidate). A departure from the paper, "
        "whose format checks refuse only malformed questions.",
    )


class SolverConfig(RoleConfig):
    """``[solver]``: Table 8's solver column (the role's defaults), and what its reward compares with."""

    reward: Literal["pseudo_label", "true_answer"] = Field(
        default="pseudo_label",
        description="pseudo_label: +1 for agreeing with the majority vote's label (Sec. 2.2, the method); "
        "true_answer: with the question's true answer, where the world knows it (the oracle arm, an upper reference, "
        "not the method; a question whose answer is unknown keeps its pseudo-label).",
    )
    wrong_label_share: Share = Field(
        default=0.0,
        description="With reward = true_answer: the share of the solver's questions (each drawn by the seed and its "
        "text) whose label is a wrong answer of the kind votes make: the world's shared error of its skill (the mini "
        "world's dropped carry, forgotten borrow), else the most common wrong answer of its GRPO group. A control of "
        "chosen label accuracy (the mini world's dose-response: diagevo docs how-to/mini-world), never the method; 0: "
        "every label the true answer (the oracle).",
    )
    anchor_share: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Share of the solver's GRPO questions drawn from the round's confident questions, those above "
        "filter.p_high that the filter passes over (labelled as retained ones are: majority, or the true answer with "
        "reward=true_answer). Never diagnosed nor counted as retained: a replay of what the solver answers, so a "
        "round on contested questions does not wear down the skills it never sees. A departure from the paper (0).",
    )

    @model_validator(mode="after")
    def _wrong_labels_need_the_truth(self) -> SolverConfig:
        if self.wrong_label_share and self.reward != "true_answer":
            raise ValueError("wrong_label_share needs reward = true_answer (a control of the true answer's labels)")
        return self
