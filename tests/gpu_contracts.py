"""``make gpu-contracts``: every call the GPU path makes, checked against the exact GPU pins, on a CPU.

The GPU path is tested with ``vllm==0.31.*`` (requirements/constraints.txt; the ``gpu`` extra asks for
0.31 or newer; CI runs vLLM's CPU build 0.32): its wheel is fetched with
``pip download --no-deps`` (cached in ``~/.cache/diagevo/wheels``) and read as source text with
``ast``, never imported (no CUDA). What diagevo passes is taken from diagevo's own code, not
copied here: ``LLM(...)``'s keywords (``ENGINE_OPTIONS`` and ``vllm_kwargs``), ``SamplingParams``'s
fields (``sampling_params``), ``sleep``'s ``level`` (1 and 2), ``wake_up``'s tags,
``collective_rpc``'s ``method``/``kwargs``, the worker's ``reload_weights`` and its keywords,
``reset_prefix_cache``, and the platform queries. TRL's ``GRPOConfig`` (installed, the ``gpu``
extra's pin) must know every field ``grpo_kwargs`` sets with vLLM on; each DeepSpeed section of
``configs/accelerate/*.yaml``, turned into a DeepSpeed config by accelerate as ``accelerate
launch`` does, is validated by DeepSpeed's own config model (DeepSpeed installs on a CPU without
its ops: ``make gpu-contracts`` installs it). Each failure is one line naming the wheel's file and
the name; exit code 1 when any.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path.home() / ".cache" / "diagevo" / "wheels"

LLM_FILE = "vllm/entrypoints/llm.py"
ARGS_FILE = "vllm/engine/arg_utils.py"
SAMPLING_FILE = "vllm/sampling_params.py"
WORKER_FILE = "vllm/v1/worker/gpu_worker.py"
RUNNER_FILE = "vllm/v1/worker/gpu_model_runner.py"
PLATFORM_FILE = "vllm/platforms/interface.py"


@dataclass(frozen=True)
class Result:
    """One contract: what it checks and the failures (one line each)."""

    name: str
    failures: list[str]


def pin(name: str) -> str:
    """The version of ``name`` the GPU path is tested with, from requirements/constraints.txt
    (``vllm==0.31.*``; the ``gpu`` extra itself asks only for a lower bound)."""
    for line in (ROOT / "requirements" / "constraints.txt").read_text(encoding="utf-8").splitlines():
        req = line.split("#")[0].strip()
        if req.partition("==")[0].strip().lower() == name:
            return req
    raise SystemExit(f"requirements/constraints.txt: no {name}==")


def fetch_wheel(requirement: str, cache: Path = CACHE) -> Path:
    """The wheel of ``requirement`` (``vllm==0.31.*``) in ``cache``, downloaded once with
    ``pip download --no-deps``."""
    name, _, version = requirement.partition("==")
    pattern = f"{name}-{version}-*.whl"
    found = sorted(cache.glob(pattern))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", requirement]
            + ["-d", str(cache)],
            check=True,
        )
        found = sorted(cache.glob(pattern))
    if not found:
        raise SystemExit(f"no wheel matching {pattern} in {cache} after pip download")
    return found[-1]


class Wheel:
    """A wheel's Python sources, parsed on demand (nothing imported)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path)
        self._trees: dict[str, ast.Module] = {}

    def source(self, name: str) -> str:
        return self.zip.read(name).decode("utf-8")

    def tree(self, name: str) -> ast.Module:
        if name not in self._trees:
            self._trees[name] = ast.parse(self.source(name), filename=name)
        return self._trees[name]

    def cls(self, file: str, name: str) -> ast.ClassDef | None:
        return next((n for n in ast.walk(self.tree(file)) if isinstance(n, ast.ClassDef) and n.name == name), None)

    def method(self, file: str, cls: str, name: str) -> ast.FunctionDef | None:
        c = self.cls(file, cls)
        if c is None:
            return None
        return next((n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def params(fn: ast.FunctionDef) -> tuple[set[str], bool]:
    """A function's keyword names, and whether it takes ``**kwargs``."""
    a = fn.args
    names = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]} - {"self"}
    return names, a.kwarg is not None


def fields(c: ast.ClassDef) -> set[str]:
    """The annotated fields of a dataclass or ``msgspec.Struct`` body."""
    return {n.target.id for n in c.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def our_calls() -> dict[str, set[str]]:
    """What diagevo's GPU path passes, read from diagevo itself."""
    from diagevo.generation import Sampling
    from diagevo.generation.vllm_engine import ENGINE_OPTIONS, sampling_params
    from diagevo.train.config import load_config
    from diagevo.train.hf.args import engine_decisions, vllm_kwargs

    out: dict[str, set[str]] = {"llm": {"model", *ENGINE_OPTIONS}, "sampling": set()}
    for device in ("cuda", "cpu"):
        cfg = load_config(ROOT / "configs" / "qwen3-4b-base.toml", [f'hf.device="{device}"', "hf.use_vllm=true"])
        out["llm"] |= set(vllm_kwargs(cfg, "m", engine_decisions(cfg, "cuda" if device == "cuda" else "cpu", True)))
    out["sampling"] = set(sampling_params(Sampling(n=2, temperature=1.0, top_p=0.99, max_new_tokens=8, seed=1)))
    return out


def check_vllm(wheel: Wheel, calls: dict[str, set[str]] | None = None) -> Result:
    """The vLLM calls of diagevo/generation/vllm_engine.py and vllm_platform.py against the wheel."""
    calls = calls or our_calls()
    bad: list[str] = []
    init = wheel.method(LLM_FILE, "LLM", "__init__")
    if init is None:
        return Result("vllm", [f"{LLM_FILE}: no class LLM with __init__"])
    names, rest = params(init)
    accepted = set(names)
    if rest:  # LLM(**kwargs) goes on to EngineArgs
        engine_args = wheel.cls(ARGS_FILE, "EngineArgs")
        accepted |= fields(engine_args) if engine_args is not None else set()
    for kw in sorted(calls["llm"] - accepted):
        bad.append(f"{LLM_FILE}: LLM(...) takes no keyword {kw!r} (nor does EngineArgs in {ARGS_FILE})")
    sp = wheel.cls(SAMPLING_FILE, "SamplingParams")
    known = fields(sp) if sp is not None else set()
    for kw in sorted(calls["sampling"] - known):
        bad.append(f"{SAMPLING_FILE}: SamplingParams has no field {kw!r}")
    wanted = {
        ("sleep", "level"),
        ("wake_up", "tags"),
        ("collective_rpc", "method"),
        ("collective_rpc", "kwargs"),
    }
    for meth, kw in sorted(wanted):
        fn = wheel.method(LLM_FILE, "LLM", meth)
        if fn is None:
            bad.append(f"{LLM_FILE}: LLM has no method {meth}")
        elif kw not in params(fn)[0]:
            bad.append(f"{LLM_FILE}: LLM.{meth} takes no keyword {kw!r}")
    if wheel.method(LLM_FILE, "LLM", "reset_prefix_cache") is None:
        bad.append(f"{LLM_FILE}: LLM has no method reset_prefix_cache")
    wake = wheel.method(LLM_FILE, "LLM", "wake_up")
    if wake is not None:
        text = ast.get_docstring(wake) or ""
        for tag in ("weights", "kv_cache"):
            if f'"{tag}"' not in text:
                bad.append(f"{LLM_FILE}: LLM.wake_up does not list the tag {tag!r}")
    sleep = wheel.method(WORKER_FILE, "Worker", "sleep")
    if sleep is None or "level" not in params(sleep)[0]:
        bad.append(f"{WORKER_FILE}: Worker.sleep(level) is gone")
    elif "level == 2" not in ast.unparse(sleep):  # level 2: the weights discarded (what a push needs)
        bad.append(f"{WORKER_FILE}: Worker.sleep no longer handles level 2")
    if wheel.method(WORKER_FILE, "Worker", "reload_weights") is None:
        bad.append(f"{WORKER_FILE}: Worker has no reload_weights (collective_rpc('reload_weights') names it)")
    runner = wheel.method(RUNNER_FILE, "GPUModelRunner", "reload_weights")
    if runner is None:
        bad.append(f"{RUNNER_FILE}: GPUModelRunner has no reload_weights")
    else:
        for kw in ("weights_iterator", "is_checkpoint_format"):
            if kw not in params(runner)[0]:
                bad.append(f"{RUNNER_FILE}: reload_weights takes no keyword {kw!r}")
    platform = wheel.cls(PLATFORM_FILE, "Platform")
    have = {n.name for n in platform.body if isinstance(n, ast.FunctionDef)} | fields(platform) if platform else set()
    for name in ("is_rocm", "is_sleep_mode_available", "device_type"):
        if name not in have:
            bad.append(f"{PLATFORM_FILE}: Platform has no {name}")
    return Result(f"vllm ({wheel.path.name})", bad)


def check_trl() -> Result:
    """Every GRPOConfig field grpo_kwargs sets (colocate and server, CUDA and CPU) is TRL's."""
    import dataclasses

    import trl
    from trl import GRPOConfig

    from diagevo.train.config import load_config
    from diagevo.train.hf.args import grpo_kwargs, phase_plan

    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    bad = []
    sets = [
        ['hf.device="cuda"', "hf.use_vllm=true"],
        ['hf.device="cuda"', "hf.use_vllm=true", 'hf.vllm_mode="server"', 'hf.vllm_server_url="http://h:8000"'],
        ['hf.device="cpu"', "hf.use_vllm=true"],
    ]
    for extra in sets:
        cfg = load_config(ROOT / "configs" / "qwen3-4b-base.toml", extra)
        for role in ("challenger", "solver"):
            kwargs = grpo_kwargs(cfg, phase_plan(cfg, role, 64), "/tmp/x")
            for key in sorted(set(kwargs) - known):
                bad.append(f"trl {trl.__version__} trl/trainer/grpo_config.py: GRPOConfig has no field {key!r}")
    return Result(f"trl {trl.__version__} GRPOConfig", sorted(set(bad)))


def check_deepspeed(configs: Iterable[Path] | None = None) -> Result:
    """Each accelerate config's DeepSpeed section as accelerate hands it to DeepSpeed, validated
    by DeepSpeed's own ZeRO config model."""
    try:
        import deepspeed
        from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    except ImportError as exc:
        return Result("deepspeed", [f"deepspeed not importable here ({exc}): make gpu-contracts installs it"])
    import yaml
    from accelerate.utils import DeepSpeedPlugin

    bad = []
    paths = sorted(configs or (ROOT / "configs" / "accelerate").glob("*.yaml"))
    for path in paths:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        ds = data.get("deepspeed_config") or {}
        try:
            plugin = DeepSpeedPlugin(
                zero_stage=ds.get("zero_stage"),
                offload_optimizer_device=ds.get("offload_optimizer_device"),
                offload_param_device=ds.get("offload_param_device"),
                zero3_init_flag=ds.get("zero3_init_flag"),
                zero3_save_16bit_model=ds.get("zero3_save_16bit_model"),
            )
            DeepSpeedZeroConfig(**plugin.deepspeed_config["zero_optimization"])
        except Exception as exc:  # noqa: BLE001 - DeepSpeed's or accelerate's refusal, one line
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            bad.append(f"{shown}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    return Result(f"deepspeed {deepspeed.__version__} ({len(paths)} accelerate configs)", bad)


def run(wheel: Path | None = None) -> list[Result]:
    return [check_vllm(Wheel(wheel or fetch_wheel(pin("vllm")))), check_trl(), check_deepspeed()]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    wheel = Path(args[0]) if args else None
    results = run(wheel)
    for r in results:
        print(f"{'ok  ' if not r.failures else 'FAIL'} {r.name}")
        for line in r.failures:
            print(f"     {line}")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
