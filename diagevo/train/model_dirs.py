"""The model directories a run names, checked before anything is created: the preflight's model check.

A directory that ``diagevo models smollm2`` or ``diagevo models tiny`` builds is complete only
with its completion record, written last (``doctor.build_record``, the rule
``diagevo doctor`` reports by): both builds now write into a temporary directory beside the target and rename it when
complete, and a directory an older, interrupted build left (the build's ``heldout.jsonl`` without
the record) is refused. A directory from elsewhere (a transformers checkpoint, no
``heldout.jsonl``) needs only its ``config.json``.
"""

from __future__ import annotations

from pathlib import Path

from diagevo.doctor import ROLES, build_call, build_record
from diagevo.errors import BadInput, NotFound
from diagevo.generation.local import looks_local


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
