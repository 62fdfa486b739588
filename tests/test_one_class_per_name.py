"""One class per name in the library (issue 84): a reader who meets ``Question`` or ``Refusal``
knows which one is meant without reading the import."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def classes_by_name() -> dict[str, list[str]]:
    """Every class the library (``diagevo/``, ``cli/``) defines, by name: the modules defining it."""
    found: dict[str, list[str]] = defaultdict(list)
    for package in ("diagevo", "cli"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    found[node.name].append(str(path.relative_to(ROOT)))
    return found


def test_no_two_classes_share_a_name() -> None:
    twice = {name: where for name, where in classes_by_name().items() if len(where) > 1}
    assert twice == {}


def test_the_check_sees_the_classes() -> None:
    found = classes_by_name()
    assert found["Failure"] == ["diagevo/catalog/failure.py"]
    assert len(found) > 300
