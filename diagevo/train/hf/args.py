"""TRL and vLLM arguments of the ``hf`` backend, built from the config without loading a model
(so GPU configurations are checked on any machine, and ``train --dry-run`` can print them).

A GRPO phase follows Table 8 of the paper per optimizer step: each step draws a global batch of
``<role>.batch_size`` prompts (256) with a group of G completions each (8), for up to
``<role>.max_steps`` steps (6 for the challenger, 12 for the solver). So |Q^chal| is
steps x 256 prompts, each seen once, and the solver takes as many steps as its retained questions
fill (a step's batch that the questions cannot fill is topped up with questions drawn again). The
learning rate is constant (R-Zero's recipe: 1e-6, no warmup, no decay); every phase builds a
fresh optimizer, as each R-Zero round starts a fresh training run from the merged checkpoint.
A role's section can depart from that recipe, for a small model that a constant rate and a fresh
Adam every few steps unlearn: its own learning rate, a decaying schedule over the phase or the
whole run, one optimizer state kept across rounds (:mod:`diagevo.train.hf.optim`).
"""

from __future__ import annotations

import math
import random
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagevo.config.sections import Role
from diagevo.errors import BadInput
from diagevo.generation.vllm_platform import Decision, decide, engine_options, environment, explain, platform_of

if TYPE_CHECKING:  # a type only: the composed config imports this package's config, never the reverse
    from diagevo.train.config import Config


@dataclass(frozen=True)
class PhasePlan:
    """How one GRPO phase uses its prompts: the numbers ``train --dry-run`` prints per phase."""

    role: Role
    prompts: int  # distinct prompts the phase has (|Q^chal|, or the retained questions)
    steps: int  # optimizer steps
    prompts_per_step: int  # the global batch of a step (Table 8: 256)
    group: int  # completions per prompt (Table 8: 8)
    per_device: int  # completions per device per micro-step
    accumulation: int  # micro-steps per optimizer step on each device

    @property
    def completions_per_step(self) -> int:
        return self.prompts_per_step * self.group

    @property
    def rows(self) -> int:
        """Prompts drawn in the whole phase (steps x prompts per step)."""
        return self.steps * self.prompts_per_step


def phase_plan(cfg: Config, role: Role, n_prompts: int) -> PhasePlan:
    """The plan of a phase with ``n_prompts`` distinct prompts: steps = min(max steps, ⌈n / batch⌉),
    each step a global batch of min(batch, n) prompts, rounded up to a multiple of the processes so
    every process gets whole prompts."""
    r, h = cfg.role(role), cfg.hf
    batch, max_steps, group = r.batch_size, r.max_steps, r.group_size
    n = max(1, n_prompts)
    procs = h.num_processes
    per_step = math.ceil(min(batch, n) / procs) * procs
    steps = min(max_steps, math.ceil(n / min(batch, n)))
    per_process = per_step // procs * group
    # the largest divisor of the process's completions that is at most hf.per_device_batch
    per_device = max(d for d in range(1, min(per_process, h.per_device_batch) + 1) if per_process % d == 0)
    return PhasePlan(
        role=role,
        prompts=n_prompts,
        steps=steps,
        prompts_per_step=per_step,
        group=group,
        per_device=per_device,
        accumulation=per_process // per_device,
    )


def step_order(plan: PhasePlan, rng: random.Random) -> list[int]:
    """Which prompt (an index into the phase's prompts) each row of the phase trains on, in step
    order: every prompt once in a random order, the last batches topped up with prompts drawn again
    (each draw without repetition until all are used); cut to the phase's rows when there are more
    prompts than its steps can take."""
    order: list[int] = []
    while len(order) < plan.rows:
        draw = list(range(plan.prompts))
        rng.shuffle(draw)
        order.extend(draw)
    return order[: plan.rows]


def role_learning_rate(cfg: Config, role: Role) -> float:
    """The role's GRPO learning rate: its own section's, else ``grpo.learning_rate``."""
    return cfg.role(role).learning_rate or cfg.grpo.learning_rate


def own_optimizer(cfg: Config, role: Role) -> bool:
    """Whether the backend builds the role's optimizer and schedule itself (one AdamW kept across
    the rounds, or a schedule spanning the run) rather than TRL building both each phase."""
    r = cfg.role(role)
    return r.keep_optimizer or (r.lr_span == "run" and (r.lr_scheduler != "constant" or r.lr_warmup > 0))


def lr_factor(kind: str, step: int, horizon: int, warmup: int = 0) -> float:
    """The share of the base learning rate at ``step`` of a schedule over ``horizon`` steps, the
    first ``warmup`` of them rising linearly from 0 (transformers' constant, linear and cosine
    schedules, with warm-up)."""
    if step < warmup:
        return step / warmup
    if kind == "constant" or horizon <= warmup:
        return 1.0
    done = min(1.0, (step - warmup) / (horizon - warmup))
    return 1.0 - done if kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * done))


def schedule_horizon(cfg: Config, plan: PhasePlan) -> int:
    """The steps a decaying schedule spans: the phase's, or every round's (``lr_span = "run"``)."""
    r = cfg.role(plan.role)
    return cfg.train.rounds * r.max_steps if r.lr_span == "run" else plan.steps


def attention(cfg: Config) -> str:
    """The attention implementation a role loads with: the config's on CUDA (FlashAttention 2 in
    the paper's configs), SDPA on a CPU, where FlashAttention does not exist."""
    h = cfg.hf
    if h.device == "cpu":
        return "sdpa" if h.attn_implementation == "flash_attention_2" else h.attn_implementation
    return h.attn_implementation


def grpo_kwargs(cfg: Config, plan: PhasePlan, output_dir: Path | str, seed: int = 0) -> dict[str, Any]:
    """Keyword arguments of ``trl.GRPOConfig`` for one phase: Table 7 (shared) and Table 8 (per
    step: a generation batch of ``prompts_per_step`` x G completions is exactly one optimizer step,
    split into ``per_device``-completion micro-batches)."""
    g, h, r = cfg.grpo, cfg.hf, cfg.role(plan.role)
    cpu = h.device == "cpu"
    kwargs: dict[str, Any] = {
        "output_dir": str(output_dir),
        "learning_rate": role_learning_rate(cfg, plan.role),
        # R-Zero: constant, 1e-6 throughout, no warmup, no decay (transformers' constant ignores a warm-up)
        "lr_scheduler_type": "constant_with_warmup" if r.lr_scheduler == "constant" and r.lr_warmup else r.lr_scheduler,
        "warmup_steps": r.lr_warmup,
        "weight_decay": g.weight_decay,
        "beta": g.kl_beta,
        "loss_type": g.loss_type,
        "temperature": g.temperature,
        "top_p": g.top_p,
        "num_generations": plan.group,
        "per_device_train_batch_size": plan.per_device,
        "gradient_accumulation_steps": plan.accumulation,
        "max_steps": plan.steps,
        "shuffle_dataset": False,  # the rows come in step order (step_order), drawn by the loop's seed
        "max_completion_length": cfg.role(plan.role).max_new_tokens,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": cfg.train.report_to,  # TensorBoard's folder: diagevo.train.tracking
        **({"run_name": cfg.train.run} if cfg.train.run else {}),
        "seed": seed,
        "use_cpu": cpu,
        "bf16": h.bf16 and not cpu,
        "gradient_checkpointing": h.gradient_checkpointing,
        "disable_tqdm": True,
        "use_vllm": h.use_vllm,
    }
    if h.use_vllm:  # on GPUs, and on a CPU with vLLM's CPU build
        kwargs["vllm_mode"] = h.vllm_mode
        if h.vllm_mode == "colocate":
            kwargs["vllm_gpu_memory_utilization"] = h.vllm_gpu_memory_utilization
            # TRL's rollouts sleep and wake the shared engine only where it was built with sleep mode
            kwargs["vllm_enable_sleep_mode"] = engine_decisions(cfg)["enable_sleep_mode"].value
        else:
            if not h.vllm_server_url:
                raise BadInput('hf.vllm_mode = "server" needs hf.vllm_server_url')
            kwargs["vllm_server_base_url"] = h.vllm_server_url
    return kwargs


def engine_decisions(
    cfg: Config, platform: str | None = None, sleep_mode_available: bool | None = None
) -> dict[str, Decision]:
    """The engine's platform-dependent arguments with their reasons
    (``diagevo/generation/vllm_platform.py``): for the config's declared device, or for the
    ``platform`` vLLM reports when the engine is built."""
    h = cfg.hf
    return decide(
        platform or platform_of(h.device),
        bf16=h.bf16,
        gpu_memory_utilization=h.vllm_gpu_memory_utilization,
        cpu_kv_cache_gib=h.vllm_cpu_kv_cache_gib,
        sleep_mode_available=sleep_mode_available,
    )


def vllm_kwargs(cfg: Config, model: str, decisions: dict[str, Decision] | None = None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for the process's one colocated engine. It is built once,
    from the base model, and shared by TRL's GRPO rollouts and the loop's sampling; weights are
    pushed into it in memory. Several processes each run one under ``external_launcher``, as TRL's
    colocate mode does. The platform's choices are ``decisions`` (default: the declared device's)."""
    return {
        "model": model,
        "seed": cfg.train.seed,
        **engine_options(decisions or engine_decisions(cfg)),
        "tensor_parallel_size": 1,
        "distributed_executor_backend": "external_launcher",
        "max_model_len": cfg.hf.vllm_max_model_len,
        "logprobs_mode": "processed_logprobs",  # as TRL's own engine: the log-probs of what was sampled (T, top-p)
    }


def engines_per_process(cfg: Config) -> str:
    if not cfg.hf.use_vllm:
        return "0 vLLM engines: transformers generate on the policies being trained"
    if cfg.hf.vllm_mode == "server":
        return f"0: generation and weight sync go to the vLLM server at {cfg.hf.vllm_server_url}"
    sleep = "sleep mode" if engine_decisions(cfg)["enable_sleep_mode"].value else "no sleep mode"
    return f"1 vLLM engine (colocated, {sleep}), shared by GRPO rollouts, Q^cur, votes and evaluation"


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
        "accelerate",
        "launch",
        "--config_file",
        str(cfg.hf.accelerate_config),
        "--num_processes",
        str(cfg.hf.num_processes),
        "-m",
        "diagevo.cli.app",
        *cmd[1:],
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


def _phase_summary(cfg: Config, plan: PhasePlan, kwargs: dict[str, Any]) -> dict[str, Any]:
    max_steps, batch = cfg.role(plan.role).max_steps, cfg.role(plan.role).batch_size
    out = {
        "prompts_per_step": plan.prompts_per_step,
        "completions_per_step": plan.completions_per_step,
        "group": plan.group,
        "steps": plan.steps,
        "scheduler": (
            f"{kwargs['lr_scheduler_type']}, learning rate {kwargs['learning_rate']:g}, warmup {kwargs['warmup_steps']}"
            + (f", over {schedule_horizon(cfg, plan)} steps of the run" if cfg.role(plan.role).lr_span == "run" else "")
            + (", one optimizer kept across the rounds" if cfg.role(plan.role).keep_optimizer else "")
        ),
        "attention": attention(cfg),
        "per_device_completions": plan.per_device,
        "accumulation_steps": plan.accumulation,
        "engines_per_process": engines_per_process(cfg),
    }
    if plan.role == "solver":
        out["steps"] = f"min({max_steps}, ceil(retained / {batch}))"
        out["max_steps"] = max_steps
    else:
        out["prompts"] = plan.prompts
    return out


def plan(cfg: Config, *, config_path: str | None, run: str | None, checkpoints: Path, db: str) -> dict[str, Any]:
    """What ``train`` would do, without loading a model."""
    n_chal, n_cur = cfg.challenger_questions, cfg.train.curriculum_questions
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
            "solver_group_size": cfg.solver.group_size,
            "challenger_group_size": cfg.challenger.group_size,
        },
        "diagnostician": cfg.diagnosis.llm_url or ("heuristic (offline)" if cfg.train.backend == "hf" else "sim"),
    }
    if cfg.train.backend == "hf":
        chal = phase_plan(cfg, "challenger", n_chal)
        # the solver's steps depend on how many questions the filter retains: shown for a full phase
        full = cfg.solver.max_steps * cfg.solver.batch_size
        solver = phase_plan(cfg, "solver", full)
        kwargs = {
            "challenger": grpo_kwargs(cfg, chal, checkpoints / "trl-challenger", cfg.train.seed),
            "solver": grpo_kwargs(cfg, solver, checkpoints / "trl-solver", cfg.train.seed),
        }
        out["models"] = {"challenger": cfg.challenger.model, "solver": cfg.solver.model}
        out["engine"] = engine
        out["attention"] = attention(cfg)
        out["phases"] = {
            "challenger": _phase_summary(cfg, chal, kwargs["challenger"]),
            "solver": _phase_summary(cfg, solver, kwargs["solver"]),
        }
        out["grpo"] = kwargs
        if cfg.hf.use_vllm and cfg.hf.vllm_mode == "colocate":
            decisions = engine_decisions(cfg)
            out["vllm"] = {
                "platform": platform_of(cfg.hf.device),
                "engine": vllm_kwargs(cfg, cfg.solver.model, decisions),
                "environment": environment(decisions),
                "decisions": explain(decisions),
                "weight_sync": (
                    "in place, through vLLM's reload_weights (collective_rpc), for the loop and TRL's rollouts alike"
                ),
            }
    return out
