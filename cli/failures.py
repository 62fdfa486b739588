"""FAILURES.jsonl of ``diagevo diagnose``: one validated failure per line (imported only by that
command, so that pydantic is not paid by every command)."""

from __future__ import annotations

import json as jsonlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from cli.common import CLIError


class FailureLine(BaseModel):
    """One line of FAILURES.jsonl."""

    model_config = ConfigDict(extra="forbid")

    failure_id: StrictStr = Field(min_length=1)
    question_id: StrictStr = Field(min_length=1)
    question: StrictStr
    pseudo_label: StrictStr
    response: StrictStr
    reference: StrictStr
    known_causes: list[StrictStr] = Field(default_factory=list)


def _reason(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = {"missing": "is missing", "extra_forbidden": "is not a known field"}.get(err["type"], err["msg"])
    return f"{loc} {msg}" if loc else msg


def read_failures(path: Path, known_cause_ids: set[str]) -> list[FailureLine]:
    """Parse and validate every line; the first problem raises ``CLIError('line N: ...')``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {path}: {exc}") from None
    out: list[FailureLine] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = jsonlib.loads(line)
        except jsonlib.JSONDecodeError as exc:
            raise CLIError(f"line {n}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise CLIError(f"line {n}: expected a JSON object")
        try:
            item = FailureLine.model_validate(obj)
        except ValidationError as exc:
            raise CLIError(f"line {n}: {_reason(exc)}") from None
        if item.failure_id in seen:
            raise CLIError(f"line {n}: failure_id {item.failure_id!r} already appears on line {seen[item.failure_id]}")
        seen[item.failure_id] = n
        unknown = [c for c in item.known_causes if c not in known_cause_ids]
        if unknown:
            raise CLIError(f"line {n}: known_causes names {unknown[0]!r}, which is not a cause of this run")
        if len(set(item.known_causes)) != len(item.known_causes):
            raise CLIError(f"line {n}: known_causes repeats a cause")
        out.append(item)
    if not out:
        raise CLIError(f"{path} holds no failures")
    return out
