"""The ``hf`` backend's configuration, beside the backend: ``[hf]`` (how models are run:
vLLM, attention, precision, devices, launch) and the role's model and completion length that
``[challenger]`` and ``[solver]`` hold beside the method's GRPO sizes (:class:`HFRole`).

None of it is the method's, so none of it is checked by the log: a stored run carries it, and
``train --resume`` validates it here when it reads the run's config back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from diagevo.sections import Section

_ROLE_MODEL = "Qwen/Qwen3-8B-Base"


class HFRole(Section):
    """``[challenger]``'s and ``[solver]``'s fields for the ``hf`` backend: the model that plays
    the role and its longest completion. The method's fields of the two sections (Table 8) are
    :class:`diagevo.config.RoleConfig`."""

    model: str = Field(
        default=_ROLE_MODEL,
        min_length=1,
        description="hf backend: the role's base model, a local model directory (nothing is downloaded).",
    )
    max_new_tokens: int = Field(
        default=1024,
        ge=1,
        description="hf backend: longest completion of the role in tokens, in GRPO and in sampling (the paper does not "
        "give it).",
    )


class HFSolver(HFRole):
    """``[solver]``'s fields for the ``hf`` backend."""


class HFChallenger(HFRole):
    """``[challenger]``'s fields for the ``hf`` backend: a challenger completion is one question."""

    max_new_tokens: int = Field(
        default=512,
        ge=1,
        description="hf backend: longest completion of the role in tokens, in GRPO and in sampling (the paper does not "
        "give it).",
    )


class HFConfig(Section):
    """``[hf]``: the real-model backend (transformers + TRL; vLLM on GPUs), as TRL's
    ``GRPOConfig`` is beside its trainer. Each role's model and completion length are in
    ``[challenger]`` and ``[solver]`` (:class:`HFRole`)."""

    use_vllm: bool = Field(
        default=False, description="vLLM for GRPO rollouts and sampling (CUDA, or vLLM's CPU build)."
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
    torch_threads: int | None = Field(
        default=None,
        ge=1,
        description="Threads torch computes with on a CPU; unset: torch's own choice (one per core). One is faster "
        "where other processes hold the other cores.",
    )
    named_errors: Literal["none", "mini"] = Field(
        default="none",
        description="Without diagnosis.llm_url, how the heuristic diagnostician names a failure: none, by where it "
        "departs from the reference; mini, by the mini world's named errors (diagevo models mini).",
    )
    heldout_max_new_tokens: int | None = Field(
        default=None, ge=1, description="Longest held-out response in tokens; unset: solver.max_new_tokens."
    )
    accelerate_config: Path | None = Field(
        default=None,
        strict=False,
        description="On GPUs: the accelerate config the run is launched with (accelerate launch's --config_file; "
        "a dry run of train prints the command).",
    )
    num_processes: int = Field(default=1, ge=1, description="Processes (GPUs) of a launch.")
