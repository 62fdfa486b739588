"""What a complete model directory is: the one rule ``diagevo doctor`` reports by, ``train``
refuses by and diagevo's builds write by.

A directory that ``diagevo models smollm2`` or ``diagevo models tiny`` builds is complete only
with its completion record, written last: both builds write into a temporary directory beside
the target and rename it when complete, and a directory an older, interrupted build left (the
build's ``heldout.jsonl`` without the record) is incomplete. A directory from elsewhere (a
transformers checkpoint, no ``heldout.jsonl``) needs only its ``config.json``. The names live
here, below both the builds (:mod:`diagevo.train`) and the checks (:mod:`diagevo.doctor`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from diagevo.errors import BadInput, Call, NotFound, Status
from diagevo.generation.local import looks_local

# the files, each written last, that say a model directory's build completed
PROVENANCE = "provenance.json"  # diagevo.train.hf.pretrained.build
TINY_RECORD = "tiny.json"  # diagevo.train.hf.tiny.build_tiny
MINI_RECORD = "mini.json"  # diagevo.train.mini.build.build_mini
HELDOUT_FILE = "heldout.jsonl"  # written by every build
ROLES = ("challenger", "solver")  # the two directories of a pair
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
TOKENIZER = ("tokenizer.json", "tokenizer.model", "vocab.json")


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


def _hub_id(model: str) -> bool:
    """``org/name`` that is no directory here and not where diagevo's own builds write."""
    path = Path(model)
    return not looks_local(model) and path.parts[0] != "models" and path.name not in ROLES


def check_model_dir(model: str) -> None:
    """One line, naming the directory and the command that builds it, when ``model`` is a local
    directory that is missing, not a model, or a build that never completed. The hf backend
    loads local directories only (no hub is reached), so a name like ``org/name`` is a path too."""
    path = Path(model).expanduser()
    if not path.exists() and _hub_id(model):  # nothing is downloaded here
        raise BadInput(
            f"{model}: no network: pass a local model directory (one is built with",
            build_call("models/smollm2"),
            then=")",
            about=model,
        )
    if not path.exists():
        raise NotFound(f"no model directory {model}: build it with", build_call(model), about=model)
    if not path.is_dir():
        raise BadInput(f"{model}: a file, not a model directory")
    record = build_record(path)
    if record is not None and not record.is_file():
        raise BadInput(
            f"{model}: an incomplete model build (no {record.name}, written when the build completes); "
            f"remove {record.parent} and build it again with",
            build_call(model),
            about=model,
        )
    if not (path / "config.json").is_file():
        raise BadInput(
            f"{model}: not a model directory (no config.json); build one with", build_call(model), about=model
        )
