"""setuptools' build with one step of diagevo's own: the documentation travels in the package.

Everything else is in ``pyproject.toml``. ``docs/`` stays the one source of the pages: building
the package copies them into ``diagevo/docs/packaged/`` of the build (never of the sources),
where ``diagevo docs`` reads them in a wheel or a non-editable ``pip install .``; an editable
install reads ``docs/`` itself (:mod:`diagevo.docs.pages`). Copied: the pages (``docs/**.md``),
their pictures (``docs/img/``), and the files of the repository the pages read, where they lie
in it (``CHANGELOG.md``, included by the changelog page; ``pyproject.toml``, whose import-linter
contract the contributing page draws; ``configs/``, which the pages name and whose ``sim.toml`` is
``diagevo train``'s default; ``examples/``, the runnable scripts the pages show and include). A
user reaches a shipped file by its name here (``diagevo docs --path examples/verl_round.sh``).
The docs' Python tools (``docs/*.py``) are not copied.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
BESIDE = ("CHANGELOG.md", "pyproject.toml")
CONFIGS = ("*.toml", "*/*.yaml")  # configs/: the pages name them; sim.toml is train's default
EXAMPLES = ("*.py", "*.sh")  # examples/: the runnable scripts (not the package file import-linter reads)


def documentation() -> list[Path]:
    """The files the packaged documentation holds, relative to the repository."""
    docs = HERE / "docs"
    if not (docs / "index.md").is_file():
        raise SystemExit(f"no documentation at {docs}: a diagevo package carries its pages (docs/index.md)")
    found = [*docs.rglob("*.md"), *(p for p in (docs / "img").rglob("*") if p.is_file())]
    found += [p for pattern in CONFIGS for p in (HERE / "configs").glob(pattern)]
    found += [p for pattern in EXAMPLES for p in (HERE / "examples").glob(pattern) if p.name != "__init__.py"]
    return sorted(p.relative_to(HERE) for p in found if "__pycache__" not in p.parts) + [Path(n) for n in BESIDE]


class BuildWithDocumentation(build_py):
    """``build_py``, then the documentation into ``diagevo/docs/packaged/`` of the build."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads docs/ in place
            return
        target = Path(self.build_lib, "diagevo", "docs", "packaged")
        shutil.rmtree(target, ignore_errors=True)  # a page removed since the last build goes too
        for relative in documentation():
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(HERE / relative, target / relative)


if __name__ == "__main__":  # as setuptools runs it; the tests import documentation() alone
    setup(cmdclass={"build_py": BuildWithDocumentation})
