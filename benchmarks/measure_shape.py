"""Counts of the code's shape, for a checkout (a script, not a test).

    python benchmarks/measure_shape.py [CHECKOUT]   # default: this checkout

- event-type literals: string constants equal to an event type's name, outside the statements
  that declare the event classes (``diagevo/catalog/``), in the package and its CLI;
- public names: ``diagevo.__all__``;
- ``dict[str, Any]`` in public signatures: parameters and results of the public functions, and of
  the public methods and fields of the public classes, that are ``dict[str, Any]`` (or a mapping
  of ``str`` to ``Any``);
- modules over 600 lines that hold code (a module that is mostly one literal is data);
- functions over 80 lines;
- ``ruff check --select A``: names that shadow builtins;
- top-level names in the wheel ``pip wheel`` builds;
- the library's lines (``diagevo``, ``cli`` and ``migrations``, every ``.py`` line);
- event payloads read by key outside the storage layer (``diagevo/log/``) and the interchange:
  ``x.data["field"]``, ``x.data.get("field")`` and the same on a name ``data``;
- open event classes: those that carry fields they do not declare;
- function-local imports (an ``import`` inside a function) in the library;
- ``hint=`` sites and ``{command}`` placeholders: the library spelling CLI commands.

Run it in a checkout's own virtual environment (``.venv/bin/python``), so that its ``diagevo`` is
the one imported.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


def sources(root: Path) -> list[Path]:
    found = {p.resolve(): p for d in ("diagevo", "cli") for p in (root / d).rglob("*.py")}
    return sorted(found.values())


def event_names(root: Path) -> set[str]:
    sys.path.insert(0, str(root))
    import diagevo.catalog as catalog

    names = getattr(catalog, "CATALOG", None)
    if names is None:
        names = {cls.name for cls in catalog.EVENT_TYPES.values()}  # type: ignore[attr-defined]
    return set(names)


def literal_uses(root: Path, names: set[str]) -> tuple[int, int]:
    count, files = 0, 0
    for path in sources(root):
        if "catalog" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        here = sum(1 for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names)
        count += here
        files += here > 0
    return count, files


def library(root: Path) -> list[Path]:
    return sorted(p for d in ("diagevo", "cli", "migrations") for p in (root / d).rglob("*.py"))


def _is_payload(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "data") or (
        isinstance(node, ast.Name) and node.id == "data"
    )


def _str(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def payload_reads(root: Path) -> int:
    count = 0
    for path in library(root):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("diagevo/log/", "migrations/")) or rel == "diagevo/interchange.py":
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Subscript) and _is_payload(n.value) and _str(n.slice):
                count += 1
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get":
                count += _is_payload(n.func.value) and bool(n.args) and _str(n.args[0])
    return count


def local_imports(root: Path) -> int:
    count = 0
    for path in library(root):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                count += sum(isinstance(s, ast.Import | ast.ImportFrom) for s in ast.walk(n))
    return count


def open_events(root: Path) -> int:
    sys.path.insert(0, str(root))
    import diagevo.catalog as catalog

    return sum(cls.model_config.get("extra") != "forbid" for cls in catalog.CATALOG.values())


def spelled_commands(root: Path) -> tuple[int, int]:
    text = "".join(p.read_text(encoding="utf-8") for p in library(root) if p.parts[-2] != "versions")
    return text.count("hint="), text.count("{command}")


def long_functions(root: Path, limit: int = 80) -> list[str]:
    out = []
    for path in sources(root):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (n.end_lineno or n.lineno) - n.lineno + 1
                if size > limit:
                    out.append(f"{path.relative_to(root)}:{n.name} {size}")
    return out


def is_data(tree: ast.Module, lines: int) -> bool:
    """Mostly literals: the module's largest literal assignments hold over half its lines."""
    literal = 0
    for n in tree.body:
        if isinstance(n, ast.Assign | ast.AnnAssign) and isinstance(n.value, ast.Dict | ast.List | ast.Tuple):
            literal += (n.end_lineno or n.lineno) - n.lineno + 1
    return literal > lines / 2


def long_modules(root: Path, limit: int = 600) -> list[str]:
    out = []
    for path in sources(root):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > limit and not is_data(ast.parse(text), lines):
            out.append(f"{path.relative_to(root)} {lines}")
    return out


def _untyped(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    text = text.replace("typing.", "").replace(" ", "")
    return any(f"{m}[str,Any]" in text for m in ("dict", "Dict", "Mapping", "MutableMapping"))


def public_dicts(root: Path) -> list[str]:
    sys.path.insert(0, str(root))
    import diagevo

    out = []
    for name in diagevo.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(diagevo, name)
        targets = []
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(member, classmethod | staticmethod):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if callable(member):
                    targets.append((f"{name}.{attr}", member))
            for field, annotation in getattr(obj, "__annotations__", {}).items():
                if not field.startswith("_") and _untyped(annotation):
                    out.append(f"{name}.{field}")
        elif callable(obj):
            targets.append((name, obj))
        for label, fn in targets:
            try:
                annotations = inspect.get_annotations(fn)
            except TypeError:
                continue
            out += [f"{label}({p})" for p, a in annotations.items() if _untyped(a)]
    return out


def ruff_a(root: Path) -> int:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--select",
            "A",
            "--output-format",
            "json",
            "--no-cache",
            "diagevo",
            "cli",
        ],
        cwd=root,
        capture_output=True,
        text=True,
    )
    return len(json.loads(done.stdout or "[]"))


def wheel_tops(root: Path) -> list[str]:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(root), "-w", out],
            check=True,
            capture_output=True,
        )
        (whl,) = Path(out).glob("*.whl")
        names = zipfile.ZipFile(whl).namelist()
    return sorted({n.split("/")[0] for n in names if ".dist-info" not in n.split("/")[0]})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "checkout",
        nargs="?",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        metavar="CHECKOUT",
        help="the checkout to count (default: this one)",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="list the long modules, functions and dicts")
    args = ap.parse_args(argv)
    root = args.checkout.resolve()
    names = event_names(root)
    literals, files = literal_uses(root, names)
    rows = [
        ("event-type literals outside the catalog", f"{literals} in {files} files"),
        ("public names (diagevo.__all__)", str(len([n for n in __import__("diagevo").__all__ if n[:2] != "__"]))),
        ("dict[str, Any] in public signatures", str(len(public_dicts(root)))),
        ("modules over 600 lines (not data)", str(len(long_modules(root)))),
        ("functions over 80 lines", str(len(long_functions(root)))),
        ("ruff check --select A", str(ruff_a(root))),
        ("top-level names in the wheel", ", ".join(wheel_tops(root))),
        (
            "library lines (diagevo, cli, migrations)",
            str(sum(p.read_text(encoding="utf-8").count("\n") for p in library(root))),
        ),
        ("event payloads read by key", str(payload_reads(root))),
        ("open event classes", f"{open_events(root)} of {len(names)}"),
        ("function-local imports", str(local_imports(root))),
        ("hint= sites, {command} placeholders", "{}, {}".format(*spelled_commands(root))),
    ]
    for label, value in rows:
        print(f"{label:<44}{value}")
    if args.verbose:
        print("\n".join(["", *long_modules(root), "", *long_functions(root), "", *public_dicts(root)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
