"""``make gpu-contracts`` fails, naming the file and the name, when a call of the GPU path no longer
matches the pinned packages: shown on a small wheel written here with vLLM's layout and the
signatures of vLLM 0.31 that diagevo calls (the real 320 MB wheel is what ``make gpu-contracts``
reads), then the same wheel with one keyword renamed."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import gpu_contracts as gc

LLM = '''
class LLM:
    def __init__(self, model: str, *, tensor_parallel_size: int = 1, dtype: str = "auto", seed: int = 0,
                 gpu_memory_utilization: float = 0.92, enforce_eager: bool = False, **kwargs) -> None:
        pass

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        pass

    def reset_prefix_cache(self, reset_running_requests: bool = False) -> bool:
        pass

    def sleep(self, level: int = 1, mode="abort"):
        pass

    def wake_up(self, tags: list[str] | None = None):
        """Values must be in `("weights", "kv_cache", "scheduling")`."""
'''
ARGS = """
from dataclasses import dataclass

@dataclass
class EngineArgs:
    model: str = "m"
    enable_sleep_mode: bool = False
    max_model_len: int | None = None
    distributed_executor_backend: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    logprobs_mode: str = "raw_logprobs"
    model_impl: str = "auto"
    kv_cache_memory_bytes: int | None = None
"""
SAMPLING = """
class SamplingParams(PydanticMsgspecMixin, msgspec.Struct, omit_defaults=True):
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int | None = 16
"""
WORKER = """
class Worker:
    def sleep(self, level: int = 1) -> None:
        if level == 2:
            pass

    def reload_weights(self, *args, **kwargs) -> None:
        pass
"""
RUNNER = """
class GPUModelRunner:
    def reload_weights(self, weights_iterator=None, weights_path=None, is_checkpoint_format: bool = True) -> None:
        pass
"""
PLATFORM = """
class Platform:
    device_type: str

    def is_rocm(self) -> bool:
        pass

    def is_sleep_mode_available(self) -> bool:
        pass
"""


def fake_wheel(path: Path, **replace: tuple[str, str]) -> Path:
    files = {
        gc.LLM_FILE: LLM,
        gc.ARGS_FILE: ARGS,
        gc.SAMPLING_FILE: SAMPLING,
        gc.WORKER_FILE: WORKER,
        gc.RUNNER_FILE: RUNNER,
        gc.PLATFORM_FILE: PLATFORM,
    }
    for key, (old, new) in replace.items():
        name = getattr(gc, key)
        assert old in files[name]
        files[name] = files[name].replace(old, new)
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_the_faithful_wheel_passes(tmp_path: Path) -> None:
    result = gc.check_vllm(gc.Wheel(fake_wheel(tmp_path / "vllm-0.31.0-x.whl")))
    assert result.failures == []


@pytest.mark.parametrize(
    ("where", "old", "new", "said"),
    [
        ("ARGS_FILE", "enable_sleep_mode: bool", "sleep_mode: bool", "LLM(...) takes no keyword 'enable_sleep_mode'"),
        ("LLM_FILE", "gpu_memory_utilization: float", "gpu_memory_fraction: float", "'gpu_memory_utilization'"),
        ("SAMPLING_FILE", "max_tokens: int", "max_new_tokens: int", "SamplingParams has no field 'max_tokens'"),
        ("LLM_FILE", "def sleep(self, level: int = 1", "def sleep(self, depth: int = 1", "LLM.sleep takes no keyword"),
        ("WORKER_FILE", "if level == 2:", "if level >= 1:", "Worker.sleep no longer handles level 2"),
        ("RUNNER_FILE", "is_checkpoint_format: bool", "checkpoint_format: bool", "'is_checkpoint_format'"),
        ("LLM_FILE", "def collective_rpc(self, method", "def collective_rpc(self, fn", "'method'"),
        ("PLATFORM_FILE", "def is_sleep_mode_available", "def sleep_mode_ok", "Platform has no is_sleep_mode"),
    ],
)
def test_a_renamed_keyword_fails_naming_file_and_name(
    tmp_path: Path, where: str, old: str, new: str, said: str
) -> None:
    wheel = fake_wheel(tmp_path / "vllm-0.31.0-x.whl", **{where: (old, new)})
    failures = gc.check_vllm(gc.Wheel(wheel)).failures
    assert len(failures) == 1, failures
    assert failures[0].startswith(getattr(gc, where) + ":") or "EngineArgs" in failures[0], failures
    assert said in failures[0], failures


def test_the_cli_exits_1_on_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = fake_wheel(tmp_path / "vllm-0.31.0-x.whl", SAMPLING_FILE=("seed: int", "random_seed: int"))
    pytest.importorskip("trl")
    code = gc.main([str(wheel)])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL vllm" in out and "vllm/sampling_params.py: SamplingParams has no field 'seed'" in out
    assert "ok   trl 1.16.0 GRPOConfig" in out


def test_deepspeed_refuses_a_bad_accelerate_config(tmp_path: Path) -> None:
    pytest.importorskip("deepspeed", reason="make gpu-contracts installs DeepSpeed (CPU, without its ops)")
    good = gc.ROOT / "configs" / "accelerate" / "zero3-8gpu.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("offload_optimizer_device: none", "offload_optimizer_device: disk"))
    assert gc.check_deepspeed([good]).failures == []
    (line,) = gc.check_deepspeed([bad]).failures
    assert "bad.yaml" in line and "offload" in line


def test_deepspeed_installed_leaves_json_stdout_alone(tmp_path: Path) -> None:
    """DeepSpeed's logger writes a warning on stdout when a trainer first imports it; a ``--json``
    command's stdout is still one JSON document (the warning on stderr)."""
    pytest.importorskip("deepspeed", reason="make gpu-contracts installs DeepSpeed (CPU, without its ops)")
    diagevo = Path(sys.executable).parent / "diagevo"
    args = [str(diagevo), "models", "tiny", "--steps", "1", "--out", str(tmp_path / "tiny"), "--json"]
    done = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["solver"] == str(tmp_path / "tiny" / "solver")
    assert "[WARNING]" in done.stderr  # DeepSpeed's line, where it belongs


def test_deepspeed_zero3_leaves_the_policies_diagevo_samples_whole(tmp_path: Path) -> None:
    """Found on an H100 under ``accelerate launch`` with ``configs/accelerate/zero3-1gpu.yaml``:
    the solver, first loaded inside the challenger's phase (its reward samples it), was built in
    DeepSpeed's ``zero.Init`` while the phase's ZeRO-3 config lived, and ``generate`` failed on
    its empty shards ("'weight' must be 2-D"). A policy the backend loads is whole, and the
    phase's config is live again after the load."""
    pytest.importorskip("deepspeed", reason="make gpu-contracts installs DeepSpeed (CPU, without its ops)")
    import random

    from transformers.integrations import HfDeepSpeedConfig, is_deepspeed_zero3_enabled

    from diagevo.train.config import load_config
    from diagevo.train.hf.backend import HFBackend

    diagevo = Path(sys.executable).parent / "diagevo"
    done = subprocess.run(
        [str(diagevo), "models", "tiny", "--steps", "1", "--out", str(tmp_path / "tiny")], cwd=tmp_path
    )
    assert done.returncode == 0
    solver = json.dumps(str(tmp_path / "tiny" / "solver"))
    cfg = load_config(gc.ROOT / "configs" / "tiny-hf.toml", [f"solver.model={solver}", f"challenger.model={solver}"])
    phase = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    assert is_deepspeed_zero3_enabled()  # as inside a GRPO phase under ZeRO-3
    backend = HFBackend(cfg)
    weights = list(backend.model("solver").parameters())
    assert all(not hasattr(w, "ds_id") and w.numel() > 0 for w in weights)
    (answers,) = backend.sample(["What is 2 + 3?"], 2, random.Random(0))
    assert len(answers) == 2
    assert is_deepspeed_zero3_enabled() and phase.is_zero3()
