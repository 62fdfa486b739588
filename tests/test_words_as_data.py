"""Issue 84: the library says what is wrong in fields; only the CLI spells commands. No string of
the library (but its docstrings) spells a shell command a user is to type: a fix is fields of
:class:`~diagevo.errors.Fix` (a system package, a service to start, a folder to remove, an extra,
a call of the library) that ``cli/fixes.py`` spells for the installation at hand."""

from __future__ import annotations

import ast
import re
from pathlib import Path

LIBRARY = Path(__file__).resolve().parent.parent / "diagevo"
SHELL = re.compile(r"\b(sudo|apt-get|apt install|rm -rf|pip install|brew install)\b")


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, its docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_no_library_string_spells_a_shell_command() -> None:
    found = [
        f"{path.relative_to(LIBRARY.parent)}:{line}: {text[:80]!r}"
        for path in sorted(LIBRARY.rglob("*.py"))
        for line, text in _strings(path)
        if SHELL.search(text)
    ]
    assert found == [], "\n".join(found)


def test_the_check_finds_one(tmp_path: Path) -> None:
    """The check can fail: a module that spells one is found, its docstring's words are not."""
    assert SHELL.search("start PostgreSQL (e.g. sudo service postgresql start)")
    path = tmp_path / "probe.py"
    path.write_text('def f():\n    """sudo in a docstring is words"""\n    return "rm -rf x"\n', encoding="utf-8")
    assert [t for _, t in _strings(path) if SHELL.search(t)] == ["rm -rf x"]
