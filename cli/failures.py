"""FAILURES.jsonl of ``diagevo diagnose``: one validated failure per line (imported only by that
command, so that pydantic is not paid by every command). The line model is
:class:`diagevo.text.formats.FailureLine`."""

from __future__ import annotations

from pathlib import Path

from diagevo.cli.common import CLIError
from diagevo.text.formats import FailureLine, read_lines
from diagevo.text.parsing import file_lines, quoted

__all__ = ["FailureLine", "read_failures"]


def read_failures(path: Path, known_cause_ids: set[str]) -> list[FailureLine]:
    """Parse and validate every line; the first problem raises ``BadInput('line N: ...')``."""
    out: list[FailureLine] = []
    seen: dict[str, int] = {}
    for n, _, item in read_lines(file_lines(path), FailureLine):
        if item.failure_id in seen:
            raise CLIError(
                f"line {n}: failure_id {quoted(item.failure_id)} already appears on line {seen[item.failure_id]}"
            )
        seen[item.failure_id] = n
        unknown = [c for c in item.known_causes if c not in known_cause_ids]
        if unknown:
            raise CLIError(f"line {n}: known_causes names {quoted(unknown[0])}, which is not a cause of this run")
        if len(set(item.known_causes)) != len(item.known_causes):
            raise CLIError(f"line {n}: known_causes repeats a cause")
        out.append(item)
    if not out:
        raise CLIError(f"{path} holds no failures")
    return out
