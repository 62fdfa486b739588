"""setuptools' build with one step of diagevo's own: the documentation travels in the package, rendered.

Everything else is in ``pyproject.toml``. ``docs/`` stays the one source of the pages. Building
a wheel (or a non-editable ``pip install .``) renders each page into
``diagevo/docs/packaged/docs/`` of the build (never of the sources) with ``docs/render.py``, as
the site shows it: its generated sections (the references: CLI, Python API, configuration, event
types, errors; the contributing page's layers, from this repository's ``pyproject.toml``) built
from the code being packaged, the files it includes (``CHANGELOG.md``, the verl configs and
script) in place. ``diagevo docs`` reads them there, so the package runs no generator and carries
neither ``pyproject.toml`` nor ``CHANGELOG.md``. Copied beside the pages, where they lie in the
repository: their pictures (``docs/img/``), ``configs/`` (which the pages name; its ``sim.toml``
is ``diagevo train``'s default) and ``examples/`` (the runnable scripts), which a user reaches by
name (``diagevo docs --path examples/verl_round.sh``). An editable install reads ``docs/`` in
place. The docs' Python tools (``docs/*.py``) are not copied.

Rendering imports the package, so building a wheel needs its dependencies: this file is also the
build backend (``pyproject.toml``'s ``build-backend``), setuptools' own, with the project's
dependencies added to what a wheel's build requires (an sdist's and an editable install's
require setuptools' alone).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from setuptools import build_meta, setup
from setuptools.build_meta import *  # noqa: F403 (the build backend's hooks: setuptools' own, but the one below)
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
CONFIGS = ("*.toml", "*/*.yaml")  # configs/: the pages name them; sim.toml is train's default
EXAMPLES = ("*.py", "*.sh")  # examples/: the runnable scripts (not the package file import-linter reads)


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    """setuptools' requirements and the package's dependencies: rendering the pages imports it."""
    project = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [*build_meta.get_requires_for_build_wheel(config_settings), *project["dependencies"]]


def version() -> str:
    """Which build this is, from the repository, never typed by hand: an sdist's own (its
    ``PKG-INFO``); in a checkout, the last release ``CHANGELOG.md`` names (``## [X.Y.Z]``) where
    HEAD is the commit that released it, else the next patch's development version counted from
    that commit, ``X.Y.(Z+1).devN+g<hash>`` (``.dirty`` where tracked files differ from HEAD);
    outside a repository, ``X.Y.(Z+1).dev0``."""
    info = HERE / "PKG-INFO"
    if info.is_file():
        found = re.search(r"^Version: (\S+)$", info.read_text(encoding="utf-8"), re.M)
        if found:
            return found.group(1)
    released = re.search(r"^## \[(\d+)\.(\d+)\.(\d+)\]", (HERE / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    if released is None:
        raise SystemExit("CHANGELOG.md names no release (## [X.Y.Z]): the version is counted from one")
    major, minor, patch = released.groups()
    release, following = f"{major}.{minor}.{patch}", f"{major}.{minor}.{int(patch) + 1}"

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, check=False)

    head = git("rev-parse", "--short=9", "HEAD")
    if head.returncode != 0:
        return f"{following}.dev0"
    commit = git("log", "-1", "--format=%H", "-S", f"## [{release}]", "--", "CHANGELOG.md").stdout.strip()
    since = int(git("rev-list", "--count", f"{commit}..HEAD").stdout.strip() or 0) if commit else 0
    dirty = git("diff", "--quiet", "HEAD", "--").returncode != 0
    if commit and since == 0 and not dirty:
        return release
    return f"{following}.dev{since}+g{head.stdout.strip()}" + (".dirty" if dirty else "")


def documentation() -> list[Path]:
    """The files the packaged documentation holds beside the rendered pages, relative to the repository."""
    docs = HERE / "docs"
    if not (docs / "index.md").is_file():
        raise SystemExit(f"no documentation at {docs}: a diagevo package carries its pages (docs/index.md)")
    found = [p for p in (docs / "img").rglob("*") if p.is_file()]
    found += [p for pattern in CONFIGS for p in (HERE / "configs").glob(pattern)]
    found += [p for pattern in EXAMPLES for p in (HERE / "examples").glob(pattern) if p.name != "__init__.py"]
    return sorted(p.relative_to(HERE) for p in found if "__pycache__" not in p.parts)


def render(package: Path, out: Path) -> None:
    """Every page rendered into ``out`` by ``docs/render.py``, from the package as built under
    ``package`` (first on the path: the sources' ``diagevo/`` lacks ``cli/``), writing no bytecode
    there (the build holds what the wheel ships)."""
    path = [str(package), str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-P", "-m", "docs.render", str(out)], cwd=HERE, env=env)
    if done.returncode != 0:
        raise SystemExit(f"the pages could not be rendered into {out} (docs/render.py said why, above)")


class BuildWithDocumentation(build_py):
    """``build_py``, then the documentation into ``diagevo/docs/packaged/`` of the build."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads docs/ in place
            return
        package = Path(self.build_lib).resolve()
        target = package / "diagevo" / "docs" / "packaged"
        shutil.rmtree(target, ignore_errors=True)  # a page removed since the last build goes too
        render(package, target / "docs")  # first: the package's sources read then are its own alone
        for relative in documentation():
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(HERE / relative, target / relative)


if __name__ == "__main__":  # as setuptools runs it; the build frontend imports the hooks, the tests documentation()
    setup(version=version(), cmdclass={"build_py": BuildWithDocumentation})
