"""The wheel of this checkout as a user gets it, for the tests that install it away from the checkout
and for ``make dist`` (tests/dist.py), which builds the release's files from the same copy."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what every wheel holds, however built (from the checkout, or from the sdist by ``make dist``): the
# CLI and the migrations inside the one package, the data files and templates the code reads
REQUIRED = (
    "diagevo/cli/app.py",
    "diagevo/migrations/env.py",
    "diagevo/migrations/script.py.mako",
    "diagevo/train/sim/families.toml",
    "diagevo/train/sim/words.toml",
    "diagevo/report/templates/run.html",
    "diagevo/report/templates/sections/causes.html",
    "diagevo/docs/packaged/configs/sim.toml",
    "diagevo/docs/packaged/docs/reference/cli.md",  # the pages, rendered by the build (docs/render.py)
)


def source_copy(out: Path) -> Path:
    """The checkout's files under ``out/source``, without its venvs, builds, caches and databases:
    setuptools writes build/ and *.egg-info/ beside the sources (and reads an old SOURCES.txt)."""
    source = out / "source"
    skip = shutil.ignore_patterns(
        ".venv*", ".git", "build", "dist", "site", "*.egg-info", "__pycache__", ".*_cache", "*.db*"
    )
    shutil.copytree(ROOT, source, symlinks=True, ignore=skip)
    # the copy has no repository to count the version from: it carries the checkout's, as an sdist does
    (source / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: diagevo\nVersion: {checkout_version()}\n")
    return source


def checkout_version() -> str:
    """The version a build of the checkout gets (``setup.py``'s ``version()``), asked in a process of
    its own: importing setuptools here would change what this process renders."""
    done = subprocess.run(
        [sys.executable, "-c", "import setup; print(setup.version())"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def build_wheel(out: Path) -> Path:
    """Built by pip from a copy of the checkout (as ``pip install .`` builds it)."""
    source = source_copy(out)
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source), "-w", str(out)]
    subprocess.run(pip, check=True, capture_output=True)
    (built,) = out.glob("diagevo-*.whl")
    return built
