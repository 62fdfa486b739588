"""The GPU acceptance check (``diagevo gpu-check``, ``make gpu-check``): one small round of the real
loop on CUDA with the models in a local directory, measured and checked.

It runs ``configs/gpu-check.toml`` (both roles from one model directory) into a fresh SQLite log:
vLLM colocated when vLLM is installed (else transformers ``generate``, said so in the report),
FlashAttention 2 when flash-attn is installed (else SDPA). It measures seconds and peak GPU memory
per phase, the tokens the loop's own sampling generated per second, and the completions of each
GRPO step; it fails when a policy's weights did not change, when ``verify`` finds a problem, or
when a process held more than one vLLM engine. Nothing here needs a network.
"""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diagevo.catalog import CheckpointWritten, PhaseCompleted, of_type
from diagevo.errors import BadInput, NotFound, Unavailable, require_use
from diagevo.errors.installation import shipped
from diagevo.log import EventReader, Recorder, open_log
from diagevo.model_dirs import build_call
from diagevo.runtime.installed import installed_version
from diagevo.runtime.progress import ProgressFn, no_progress
from diagevo.train.config import load_config
from diagevo.train.folders import checkpoint_root
from diagevo.train.hf.args import attention
from diagevo.train.hf.backend import HFBackend
from diagevo.train.run import TrainOptions, train
from diagevo.views.admission import admitted_rows
from diagevo.views.checkpoints import checkpoint_log, checkpoint_path
from diagevo.views.verify import verify_run

CONFIG = "configs/gpu-check.toml"  # shipped with the package (diagevo.errors.installation.shipped)


@dataclass
class PhaseFigures:
    seconds: float = 0.0
    peak_gib: float = 0.0
    steps: int = 0
    completions_per_step: int = 0
    prompts_per_step: int = 0


@dataclass
class CheckReport:
    device: str
    versions: dict[str, str]
    engine: str
    attention: str
    phases: dict[str, PhaseFigures] = field(default_factory=dict)
    sampled_tokens: int = 0
    sampling_seconds: float = 0.0
    grpo_tokens: dict[str, float] = field(default_factory=dict)
    weights_changed: dict[str, float] = field(default_factory=dict)  # share of tensors that changed
    verify_problems: list[str] = field(default_factory=list)
    vllm_engines: int = 0
    round_seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def sampled_tokens_per_s(self) -> float:
        return self.sampled_tokens / self.sampling_seconds if self.sampling_seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed, "sampled_tokens_per_s": round(self.sampled_tokens_per_s, 1)}


def _tensors(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise BadInput(f"{path}: no safetensors weights")
    out: dict[str, Any] = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


def changed_share(before: Path, after: Path) -> float:
    """The share of weight tensors that differ between two saved models."""
    import torch

    a, b = _tensors(before), _tensors(after)
    common = [k for k in a if k in b]
    return sum(not torch.equal(a[k].float(), b[k].float()) for k in common) / max(1, len(common))


class _Meter:
    """Per-phase seconds and peak GPU memory from the loop's progress callbacks."""

    def __init__(self, forward: ProgressFn) -> None:
        import torch

        self.torch = torch
        self.forward = forward
        self.phase: str | None = None
        self.started = time.perf_counter()
        self.figures: dict[str, PhaseFigures] = {}

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        self.forward(phase, done, total)
        if phase in ("rounds", "load") or phase == self.phase:
            return
        self.close()
        self.phase, self.started = phase, time.perf_counter()
        self.torch.cuda.reset_peak_memory_stats()

    def close(self) -> None:
        if self.phase is not None:
            f = self.figures.setdefault(self.phase, PhaseFigures())
            f.seconds += time.perf_counter() - self.started
            f.peak_gib = max(f.peak_gib, self.torch.cuda.max_memory_allocated() / 2**30)


def run_check(
    model: Path, out: Path, *, overrides: list[str] | None = None, progress: ProgressFn = no_progress
) -> CheckReport:
    """One round of ``configs/gpu-check.toml`` with both roles from ``model``, into ``out``."""
    require_use("the hf backend (train, eval, gpu-check)", "gpu-check")  # vLLM when installed (else generate)
    import torch

    config = shipped(CONFIG)
    if config is None:
        raise NotFound(f"this diagevo carries no {CONFIG} (a package built without configs/)")
    cfg = load_config(config, _check_overrides(model, out, overrides or []))
    if not torch.cuda.is_available():
        raise Unavailable("no CUDA device: the GPU check runs on a machine with an NVIDIA GPU")
    db = _check_database(model, out)
    report = CheckReport(
        device=torch.cuda.get_device_name(0),
        versions={
            n: installed_version(n) or "not installed"
            for n in ("torch", "transformers", "trl", "accelerate", "vllm", "flash-attn")
        },
        engine="vLLM colocated (one engine per process)"
        if cfg.hf.use_vllm
        else "transformers generate (vLLM not installed)",
        attention=attention(cfg),
    )
    engines = _count_engines() if cfg.hf.use_vllm else None
    backend = HFBackend(cfg)
    sampler = backend._generate

    def counted(role: Any, prompts: Any, sampling: Any) -> list[list[str]]:
        started = time.perf_counter()
        outs = sampler(role, prompts, sampling)
        torch.cuda.synchronize()
        report.sampling_seconds += time.perf_counter() - started
        tok = backend.tokenizer(role)
        report.sampled_tokens += sum(len(tok(x, add_special_tokens=False)["input_ids"]) for o in outs for x in o)
        return outs

    backend._generate = counted  # type: ignore[method-assign]
    meter = _Meter(progress)
    store = open_log(f"sqlite:///{db}", create=True)
    started = time.perf_counter()
    try:
        run, _ = train(cfg, store, TrainOptions(backend=backend, rounds=1, progress=meter))
        meter.close()
        report.round_seconds = time.perf_counter() - started
        report.phases = meter.figures
        _grpo_figures(store, run, report)
        _weights_moved(store, run, model, report, checkpoint_root(cfg, store.url))
        report.verify_problems = verify_run(store, run)
        if report.verify_problems:
            report.failures.append(f"verify: {report.verify_problems[0]}")
    finally:
        store.close()
    if engines is not None:
        report.vllm_engines = engines()
        if report.vllm_engines > 1:
            report.failures.append(f"{report.vllm_engines} vLLM engines were built in one process (at most 1)")
    return report


def _check_database(model: Path, out: Path) -> Path:
    """The check's database in ``out`` (created), refused where it exists or ``model`` is no
    model directory."""
    if not (model / "config.json").is_file():
        raise BadInput(
            f"{model}: not a model directory (no config.json); build one with",
            build_call(str(model)),
            about=model,
        )
    out.mkdir(parents=True, exist_ok=True)
    db = out / "gpu-check.db"
    if db.exists():
        raise BadInput(f"{db} exists: the check writes a new database; give it another directory")
    return db


def _check_overrides(model: Path, out: Path, overrides: list[str]) -> list[str]:
    """Both roles from ``model``, vLLM and FlashAttention 2 where installed, checkpoints in ``out``."""
    has_vllm = importlib.util.find_spec("vllm") is not None
    has_flash = importlib.util.find_spec("flash_attn") is not None
    return [
        f"solver.model={json.dumps(str(model))}",
        f"challenger.model={json.dumps(str(model))}",
        f"hf.use_vllm={'true' if has_vllm else 'false'}",
        f"hf.attn_implementation={json.dumps('flash_attention_2' if has_flash else 'sdpa')}",
        f"train.out_dir={json.dumps(str(out / 'checkpoints'))}",
        *overrides,
    ]


def _grpo_figures(store: Recorder, run: str, report: CheckReport) -> None:
    """Each GRPO phase's steps, batch shape and completion tokens, from its ``phase.completed``."""
    for p in of_type(PhaseCompleted, admitted_rows(store, run, types=(PhaseCompleted,))):
        if p.phase in ("challenger", "solver"):
            f = report.phases.setdefault(p.phase, PhaseFigures())
            f.steps = int(p.steps or 0)
            f.completions_per_step = int(p.completions_per_step or 0)
            f.prompts_per_step = int(p.prompts_per_step or 0)
            report.grpo_tokens[p.phase] = (p.completion_length or 0.0) * f.completions_per_step * f.steps


def _weights_moved(store: EventReader, run: str, model: Path, report: CheckReport, root: Path) -> None:
    """A failure for a role that took no GRPO step or whose checkpoint (under ``root``, where the
    check's config put them) equals ``model``."""
    written = of_type(CheckpointWritten, checkpoint_log(store, run).written)
    ckpts = {c.phase: checkpoint_path(store, run, c.path, root) for c in written}
    for role in ("challenger", "solver"):
        if not report.phases.get(role, PhaseFigures()).steps:
            report.failures.append(
                f"the {role} took no GRPO step (no {'retained question' if role == 'solver' else 'request'}): "
                "raise the lengths or batches"
            )
            continue
        report.weights_changed[role] = changed_share(model, ckpts[role] / role)
        if report.weights_changed[role] == 0.0:
            report.failures.append(f"the {role}'s weights did not change in its GRPO phase")


def _count_engines() -> Any:
    """Counts the ``vllm.LLM`` engines this process builds, whoever builds them."""
    import vllm

    built = [0]
    original = vllm.LLM.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        built[0] += 1
        original(self, *args, **kwargs)

    vllm.LLM.__init__ = init  # type: ignore[method-assign]
    return lambda: built[0]
