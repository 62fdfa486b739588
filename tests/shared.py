"""Where ``../shared`` lies: beside the checkout (CI clones main with ``../shared`` beside it), or,
for a git worktree added elsewhere, beside the checkout it was added from. ``DIAGEVO_SHARED``
names another place. The folder holds the benchmark files (MATH-500, GSM8K test, AIME) and the
notes; nothing in the project names one machine's layout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _added_from(root: Path) -> Path | None:
    """The checkout a worktree at ``root`` was added from (its ``.git`` file names
    ``CHECKOUT/.git/worktrees/NAME``); None for a checkout of its own."""
    marker = root / ".git"
    if not marker.is_file():
        return None
    gitdir = marker.read_text(encoding="utf-8").partition("gitdir:")[2].strip()
    parts = Path(gitdir).parts
    return Path(*parts[: parts.index(".git")]) if ".git" in parts else None


def shared_dir() -> Path:
    """The shared folder (it may be absent: the tests that need its files skip or say so)."""
    if os.environ.get("DIAGEVO_SHARED"):
        return Path(os.environ["DIAGEVO_SHARED"])
    for checkout in (ROOT, _added_from(ROOT)):
        if checkout is not None and (checkout.parent / "shared").is_dir():
            return checkout.parent / "shared"
    return ROOT.parent / "shared"


BENCHMARKS = shared_dir() / "data" / "benchmarks"
"""The benchmark files (``../shared/data/benchmarks``)."""

needs_benchmarks = pytest.mark.skipif(
    not BENCHMARKS.is_dir(), reason="the shared benchmark files are not here (../shared/data/benchmarks)"
)
"""A test that reads the benchmark files runs where ``../shared`` is (CI has it beside the clone)."""
