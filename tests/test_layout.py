"""The source layout and the installed one: cli/ and migrations/ are top-level folders of the
checkout that install as ``diagevo.cli`` and ``diagevo.migrations`` (setuptools' package-dir), with
no link in the sources, and nothing imports them under another name."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import diagevo.cli
import diagevo.migrations

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"diagevo.cli": "cli", "diagevo.migrations": "migrations"}


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _folders(top: Path, name: str) -> set[str]:
    """The dotted names of ``top`` and its folders that hold files (caches aside)."""
    found = set()
    for path in top.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and "packaged" not in path.parts:
            found.add(".".join([name, *path.parent.relative_to(top).parts]))
    return found


def test_every_folder_of_the_sources_is_listed_under_its_installed_name() -> None:
    """A folder setuptools is not told of is left out of the wheel, or warned about."""
    tool = _setuptools()
    assert tool["package-dir"] == MAPPED
    found = _folders(ROOT / "diagevo", "diagevo")
    for name, folder in MAPPED.items():
        found |= _folders(ROOT / folder, name)
    assert sorted(found) == sorted(tool["packages"])


def test_the_sources_hold_no_links() -> None:
    for top in ("diagevo", "cli", "migrations", "tests", "docs", "examples", "configs"):
        links = [p for p in (ROOT / top).rglob("*") if p.is_symlink()]
        assert links == [], links


def test_an_editable_install_maps_the_folders() -> None:
    assert Path(diagevo.cli.__file__).resolve().parent == ROOT / "cli"
    assert Path(diagevo.migrations.__file__).resolve().parent == ROOT / "migrations"


def test_nothing_imports_cli_or_migrations_as_a_top_level_package() -> None:
    offenders = []
    for top in ("diagevo", "cli", "migrations", "tests", "docs", "examples", "benchmarks"):
        for path in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in MAPPED.values()]
    assert offenders == []


def test_no_decision_leaves_its_closure_by_mutation() -> None:
    """A decision made under the append lock is returned (``AppendResult.events``), never written
    into a list its caller holds (``decided[:] = ...``): no slice assignment in the library."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("diagevo", "cli", "migrations")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\w\[:\]\s*=[^=]", line)
    ]
    assert found == []
