"""The wheel of this checkout as a user gets it, for the tests that install it away from the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build_wheel(out: Path) -> Path:
    """Built from a copy of the checkout: setuptools writes build/ and *.egg-info/ beside the sources."""
    source = out / "source"
    skip = shutil.ignore_patterns(".venv*", ".git", "build", "site", "*.egg-info", "__pycache__", ".*_cache", "*.db*")
    shutil.copytree(ROOT, source, symlinks=True, ignore=skip)
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source), "-w", str(out)]
    subprocess.run(pip, check=True, capture_output=True)
    (built,) = out.glob("diagevo-*.whl")
    return built
