"""TRL and vLLM arguments of the ``hf`` backend, built from the config without loading a model
(so GPU configurations are checked on any machine, and ``train --dry-run`` can print them)."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any, Literal

from diagevo.config import Config

Role = Literal["challenger", "solver"]


def steps_and_prompts(cfg: Config, role: Role, n_prompts: int) -> tuple[int, int]:
    """(optimizer steps, prompts per step): every prompt of the phase is seen once in at most
    ``<role>_max_steps`` steps."""
    max_steps = cfg.grpo.challenger_max_steps if role == "challenger" else cfg.grpo.solver_max_steps
    n = max(1, n_prompts)
    steps = min(max_steps, n)
    return steps, math.ceil(n / steps)


def grpo_kwargs(cfg: Config, role: Role, n_prompts: int, output_dir: Path | str, seed: int = 0) -> dict[str, Any]:
    """Keyword arguments of ``trl.GRPOConfig`` for one phase: Table 7 (shared) and Table 8
    (group size per role). One prompt's group of G completions per micro-batch; the prompts of
    one step are gradient-accumulated, so one generation batch is exactly one step's prompts."""
    g, h = cfg.grpo, cfg.hf
    group = g.challenger_group_size if role == "challenger" else g.solver_group_size
    steps, per_step = steps_and_prompts(cfg, role, n_prompts)
    per_process = math.ceil(per_step / h.num_processes)  # a step's prompts, spread over the processes
    per_device = max(1, min(h.per_device_batch // group, per_process)) * group
    accumulate = max(1, math.ceil(per_step * group / (per_device * h.num_processes)))
    cpu = h.device == "cpu"
    kwargs: dict[str, Any] = {
        "output_dir": str(output_dir),
        "learning_rate": g.learning_rate,
        "weight_decay": g.weight_decay,
        "beta": g.kl_beta,
        "temperature": g.temperature,
        "top_p": g.top_p,
        "num_generations": group,
        "per_device_train_batch_size": per_device,
        "gradient_accumulation_steps": accumulate,
        "max_steps": steps,
        "max_completion_length": h.challenger_max_new_tokens if role == "challenger" else h.max_new_tokens,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "seed": seed,
        "use_cpu": cpu,
        "bf16": h.bf16 and not cpu,
        "gradient_checkpointing": h.gradient_checkpointing,
        "disable_tqdm": True,
        "use_vllm": h.use_vllm,
    }
    if h.use_vllm:
        if cpu:
            raise ValueError("hf.use_vllm needs hf.device = \"cuda\"")
        kwargs["vllm_mode"] = h.vllm_mode
        if h.vllm_mode == "colocate":
            kwargs["vllm_gpu_memory_utilization"] = h.vllm_gpu_memory_utilization
            kwargs["vllm_enable_sleep_mode"] = True  # frees the KV cache while the optimizer steps
        else:
            if not h.vllm_server_url:
                raise ValueError("hf.vllm_mode = \"server\" needs hf.vllm_server_url")
            kwargs["vllm_server_base_url"] = h.vllm_server_url
    return kwargs


def vllm_kwargs(cfg: Config, model: str) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for the sampling engine (construction votes, Q^cur)."""
    h = cfg.hf
    return {
        "model": model,
        "dtype": "bfloat16" if h.bf16 else "auto",
        "gpu_memory_utilization": h.vllm_gpu_memory_utilization,
        "seed": cfg.train.seed,
        "enable_sleep_mode": h.vllm_mode == "colocate",
        "tensor_parallel_size": 1,
    }


def launch_command(cfg: Config, config_path: str | None, run: str | None) -> list[str]:
    """How the run is started on GPUs: the training command under ``accelerate launch``."""
    cmd = ["diagevo", "train"]
    if config_path:
        cmd += ["--config", config_path]
    if run:
        cmd += ["--run", run]
    if cfg.hf.device == "cpu" or cfg.hf.accelerate_config is None:
        return cmd
    return [
        "accelerate", "launch", "--config_file", str(cfg.hf.accelerate_config),
        "--num_processes", str(cfg.hf.num_processes), "-m", "cli.app", *cmd[1:],
    ]


def ranks(n: int) -> str:
    """How ``n`` launched processes share a run (``diagevo/train/hf/distributed.py``)."""
    if n == 1:
        return "1: the loop, the store, both GRPO phases, sampling, checkpoints"
    workers = "rank 1" if n == 2 else f"ranks 1-{n - 1}"
    return (
        f"{n}: rank 0 leads (the loop, the store, sampling, checkpoints, rewards over the global batch); "
        f"{workers} follow its GRPO phases on their shards"
    )


def plan(cfg: Config, *, config_path: str | None, run: str | None, checkpoints: Path, db: str) -> dict[str, Any]:
    """What ``train`` would do, without loading a model."""
    n_chal = cfg.train.challenger_questions or cfg.grpo.challenger_batch_size
    n_cur = cfg.train.curriculum_questions or cfg.grpo.solver_batch_size
    engine = "vllm" if cfg.hf.use_vllm else "local"
    out: dict[str, Any] = {
        "backend": cfg.train.backend,
        "rounds": cfg.train.rounds,
        "database": db,
        "checkpoints": str(checkpoints),
        "launch": shlex.join(launch_command(cfg, config_path, run)),
        "processes": ranks(cfg.hf.num_processes if cfg.train.backend == "hf" else 1),
        "batches": {
            "challenger_questions": n_chal,
            "curriculum_questions": n_cur,
            "construction_responses": cfg.grpo.construction_responses,
            "solver_group_size": cfg.grpo.solver_group_size,
            "challenger_group_size": cfg.grpo.challenger_group_size,
        },
        "diagnostician": cfg.diagnosis.llm_url or ("heuristic (offline)" if cfg.train.backend == "hf" else "sim"),
    }
    if cfg.train.backend == "hf":
        out["models"] = {"challenger": cfg.hf.challenger_model, "solver": cfg.hf.solver_model}
        out["engine"] = engine
        out["grpo"] = {
            "challenger": grpo_kwargs(cfg, "challenger", n_chal, checkpoints / "trl-challenger", cfg.train.seed),
            "solver": grpo_kwargs(cfg, "solver", n_cur, checkpoints / "trl-solver", cfg.train.seed),
        }
        if cfg.hf.use_vllm:
            out["vllm"] = vllm_kwargs(cfg, cfg.hf.solver_model)
    return out
