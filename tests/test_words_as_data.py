"""Issue 84: the library says what is wrong in fields; only the CLI spells commands. No string of
the library (but its docstrings) spells a shell command a user is to type, nor a command-line flag
in words (a flag alone is a word of a command line the library runs: vLLM's, accelerate's, pip's):
a fix is fields of :class:`~diagevo.errors.Fix` (a system package, a service to start, a folder to
remove, an extra, a call of the library, an argument) that ``cli/fixes.py`` spells for the
installation at hand."""

from __future__ import annotations

import ast
import re
from pathlib import Path

LIBRARY = Path(__file__).resolve().parent.parent / "diagevo"
SHELL = re.compile(r"\b(sudo|apt-get|apt install|rm -rf|pip install|brew install)\b")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z_-]+")


def _spelled(text: str) -> bool:
    """A shell command, or a flag inside words (a flag alone is an argument of a command line)."""
    return bool(SHELL.search(text)) or (bool(FLAG.search(text)) and " " in text.strip())


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


def test_no_library_string_spells_a_shell_command_or_a_flag() -> None:
    found = [
        f"{path.relative_to(LIBRARY.parent)}:{line}: {text[:80]!r}"
        for path in sorted(LIBRARY.rglob("*.py"))
        for line, text in _strings(path)
        if _spelled(text)
    ]
    assert found == [], "\n".join(found)


def test_the_check_finds_one(tmp_path: Path) -> None:
    """The check can fail: a module that spells one is found, its docstring's words are not."""
    assert _spelled("start PostgreSQL (e.g. sudo service postgresql start)")
    assert _spelled("put it back (or name its folder: --out-dir)") and not _spelled("--port")
    path = tmp_path / "probe.py"
    path.write_text('def f():\n    """sudo in a docstring is words"""\n    return "rm -rf x"\n', encoding="utf-8")
    assert [t for _, t in _strings(path) if _spelled(t)] == ["rm -rf x"]
