"""The ``hf`` backend's configuration, beside the backend: ``[hf]`` (how models are run:
vLLM, attention, precision, devices, launch). Each role's model and completion length are in
``[challenger]`` and ``[solver]`` (:class:`diagevo.config.sections.RoleConfig`).

The round protocol never reads it, so the log does not check it: a stored run carries it, and
``train --resume`` validates it here when it reads the run's config back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from diagevo.config.base import Count, Positive, Section


class HFConfig(Section):
    """``[hf]``: the real-model backend (transformers + TRL; vLLM on GPUs), as TRL's
    ``GRPOConfig`` is beside its trainer. Each role's model and completion length are in
    ``[challenger]`` and ``[solver]`` (:class:`diagevo.config.sections.RoleConfig`)."""

    use_vllm: bool = Field(
        default=False, description="vLLM for GRPO rollouts and sampling (CUDA, or vLLM's CPU build)."
    )
    vllm_mode: Literal["colocate", "server"] = Field(
        default="colocate",
        description="colocate: one engine in each training process; server: `trl vllm-serve` at vllm_server_url.",
    )
    vllm_server_url: str | None = Field(default=None, description="With vllm_mode = server: the server's base URL.")
    vllm_gpu_memory_utilization: Positive = Field(
        default=0.3, le=1, description="Share of GPU memory a colocated vLLM engine may take."
    )
    vllm_cpu_kv_cache_gib: Positive = Field(
        default=1.0,
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
    per_device_batch: Count = Field(
        default=8,
        description="Most GRPO completions per device per micro-step (gradient accumulation makes up the step).",
    )
    generation_batch: Count = Field(default=8, description="Prompts per local generate call (without vLLM).")
    heldout: Path | None = Field(
        default=None,
        strict=False,
        description=(
            "JSONL of {question, answer} for held-out evaluation; unset: <solver.model>/heldout.jsonl if present."
        ),
    )
    torch_threads: int | None = Field(
        default=None,
        ge=1,
        description="Threads torch computes with on a CPU; unset: torch's own choice (one per core). One is faster "
        "where other processes hold the other cores.",
    )
    named_errors: Literal["none", "mini"] = Field(
        default="none",
        description="Without diagnosis.llm_url, how the heuristic diagnostician names a failure: none, by where it "
        "departs from the reference; mini, by the mini world's named errors (its models built by models mini).",
    )
    shared_label_questions: int = Field(
        default=200,
        ge=0,
        le=10_000,
        description="Where the world knows the answers (the mini world): the shared challenger questions on which "
        "each round's pseudo-label accuracy (Figure 3(c): the majority of 12 responses against the true answer) is "
        "measured, drawn once per seed from the untrained challenger's free exploration; 0: not measured.",
    )
    label_probe: Path | None = Field(
        default=None,
        strict=False,
        description="JSONL of {question, answer} the world's answers stand in for: after each round the solver "
        "answers each question 12 times and its majority is compared with the answer, the round's pseudo_label_acc "
        "(Figure 3(c)) for real models, whose world knows no answers; unset: the world's shared questions where it "
        "knows answers (the mini world), else no figure. Take it from data the run is not evaluated on.",
    )
    heldout_max_new_tokens: int | None = Field(
        default=None, ge=1, description="Longest held-out response in tokens; unset: solver.max_new_tokens."
    )
    accelerate_config: Path | None = Field(
        default=None,
        strict=False,
        description="On GPUs: the accelerate config the run is launched with (accelerate launch's config file; "
        "a dry run of train prints the command).",
    )
    num_processes: Count = Field(default=1, description="Processes (GPUs) of a launch.")
