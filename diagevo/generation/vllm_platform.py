"""What a vLLM engine is built with on each platform, decided here and nowhere else.

The same config runs on a CUDA node and on a CPU (vLLM's CPU build), and vLLM's defaults suit
neither in a training process: sleep mode exists only on some platforms and is refused
elsewhere; ``torch.compile`` takes minutes on a CPU and is not reused;
``gpu_memory_utilization`` is a share of *host* memory on a CPU; and the V1 engine would run in
a spawned process. :func:`decide` returns every choice with the reason for it (``train
--dry-run`` prints them). The plan reads the config's declared device, so a GPU plan is computed
on any machine; a built engine uses the platform vLLM reports, and
:data:`SLEEP_MODE_PLATFORMS` mirrors vLLM's own answer (a test of the vLLM tier holds them equal).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

# vLLM 0.31-0.32: ``Platform.is_sleep_mode_available()`` is true for these platforms only
SLEEP_MODE_PLATFORMS = frozenset({"cuda", "rocm", "xpu"})
GIB = 1 << 30


@dataclass(frozen=True)
class Decision:
    value: Any
    why: str


def platform_of(device: str) -> str:
    """The vLLM platform of a torch device string: ``cuda:1`` -> ``cuda``, ``cpu`` -> ``cpu``."""
    return device.split(":", 1)[0].strip().lower() or "cpu"


def decide(
    platform: str,
    *,
    bf16: bool = False,
    gpu_memory_utilization: float = 0.3,
    cpu_kv_cache_gib: float = 1.0,
    sleep_mode_available: bool | None = None,
) -> dict[str, Decision]:
    """The engine's platform-dependent arguments (``environment`` included) with their reasons;
    ``sleep_mode_available``: vLLM's own answer when an engine is built (None: the table's)."""
    cpu = platform == "cpu"
    sleep = platform in SLEEP_MODE_PLATFORMS if sleep_mode_available is None else sleep_mode_available
    out: dict[str, Decision] = {}
    if sleep:
        why = f"vLLM supports sleep mode on {platform}: the engine frees its weights and KV cache while an "
        why += "optimizer steps"
        out["enable_sleep_mode"] = Decision(True, why)
    else:
        why = f"vLLM has no sleep mode on {platform} (it refuses the engine); weights and KV cache stay allocated"
        out["enable_sleep_mode"] = Decision(False, why)
    if cpu:
        out["enforce_eager"] = Decision(
            True,
            "torch.compile of the CPU build takes minutes per engine and its cache is not reused; eager builds in "
            "under a minute",
        )
        out["kv_cache_memory_bytes"] = Decision(
            int(cpu_kv_cache_gib * GIB),
            "on a CPU gpu_memory_utilization is a share of host memory reserved; an explicit KV cache of "
            f"{cpu_kv_cache_gib:g} GiB (hf.vllm_cpu_kv_cache_gib) instead",
        )
    else:
        out["enforce_eager"] = Decision(
            False, f"CUDA graphs and torch.compile pay for themselves over a run's generation steps on {platform}"
        )
        out["gpu_memory_utilization"] = Decision(
            gpu_memory_utilization,
            "the share of GPU memory the engine takes (weights, activations, KV cache); the rest stays for the "
            "policies, references and optimizer state",
        )
    if bf16:
        out["dtype"] = Decision(
            "bfloat16", "hf.bf16: the policies compute in bfloat16, and so does the engine that samples them"
        )
    else:
        out["dtype"] = Decision(
            "float32",
            "the policies' float32 weights as pushed (vLLM's 'auto' would downcast a float32 checkpoint to bfloat16)",
        )
    out["environment"] = (
        Decision(
            {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
            "the engine runs in this process: a spawned engine process fails to start without a __main__ guard "
            "and cannot take weights in memory",
        )
        if cpu
        else Decision({}, "vLLM's defaults (external_launcher keeps the engine in the training process)")
    )
    return out


def engine_options(decisions: dict[str, Decision]) -> dict[str, Any]:
    """The ``vllm.LLM`` keyword arguments among ``decisions``."""
    return {k: d.value for k, d in decisions.items() if k != "environment"}


def environment(decisions: dict[str, Decision]) -> dict[str, str]:
    return dict(decisions["environment"].value if "environment" in decisions else {})


def apply_environment(decisions: dict[str, Decision]) -> None:
    """Set the variables vLLM reads (an explicit setting in the environment wins)."""
    for key, value in environment(decisions).items():
        os.environ.setdefault(key, value)


def explain(decisions: dict[str, Decision]) -> dict[str, dict[str, Any]]:
    """``{name: {"value": ..., "why": ...}}`` for ``train --dry-run --json``."""
    return {k: {"value": d.value, "why": d.why} for k, d in decisions.items()}


def serve_flags(decisions: dict[str, Decision]) -> list[str]:
    """The same choices as ``vllm serve`` flags, sleep mode aside (a server's engine never sleeps
    for an optimizer)."""
    flags: list[str] = []
    for key, value in engine_options(decisions).items():
        if key == "enable_sleep_mode":
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags += [flag] if value else []
        else:
            flags += [flag, str(value)]
    return flags


def current_platform() -> tuple[str, bool]:
    """The platform vLLM runs on here and whether vLLM offers sleep mode on it (imports vLLM)."""
    from vllm.platforms import current_platform as p

    name = "rocm" if p.is_rocm() else str(p.device_type or "cpu")
    return name, bool(p.is_sleep_mode_available())
