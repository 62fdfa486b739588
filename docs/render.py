"""The pages as they are built: each include in place, each generated section rendered from the code.

A page holds a marker line ``<!-- generated: NAME -->``; :func:`fill` replaces it with what the
generator of that name in :data:`GENERATORS` builds, from the code being built: the references
(CLI, Python API, configuration, event types, errors), the diagnostician's requests, and the
contributing page's layers (the import-linter contract of ``pyproject.toml``), views and
commands. Two builds run them, so nothing generated is committed:

- the wheel's (``setup.py``, ``python -P -m docs.render OUT``): every page of ``docs/`` rendered
  as the site shows it, its includes (``--8<-- "FILE"``: the changelog, the verl configs and
  script) in place, into the package, where ``diagevo docs`` reads it. The package itself holds
  only that reader (``diagevo/docs/pages.py``): it never runs a generator, nor reads
  ``pyproject.toml`` or ``CHANGELOG.md``, which it does not carry.
- the site's (``docs/hooks.py``): the same sections, but the Python API as mkdocstrings blocks.

Something added without documentation fails here (:class:`Undocumented`): a config field
without a description, an event type whose data model has no docstring, an error class or an
export without one, a marker no generator builds.
"""

from __future__ import annotations

import argparse
import ast
import html
import json
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from importlib import import_module
from pathlib import Path
from typing import Any

import diagevo
import diagevo.cli
from diagevo import _EXPORTS
from diagevo.catalog import CATALOG
from diagevo.cli import examples
from diagevo.cli.app import build
from diagevo.cli.common import EXIT_CODES
from diagevo.config.base import Setting, settings
from diagevo.config.sections import DiagnosisConfig, MethodConfig
from diagevo.diagnosis.probe import TITLES, stage_requests
from diagevo.diagnosis.tools import llm_diagnostician
from diagevo.docs.pages import MARKER, included
from diagevo.train.config import Config
from docs.render_api import Undocumented, python_api

ROOT = Path(__file__).resolve().parent.parent
"""The repository (or the sdist's copy of it): ``docs/`` and the files its pages read."""
DOCS = ROOT / "docs"


PACKAGE = Path(diagevo.__file__).resolve().parent
"""The ``diagevo`` package's folder, as imported (a checkout's, or the build's when a wheel is
built): the sources the error classes and the views are read from."""
CLI = Path(diagevo.cli.__file__).resolve().parent
"""The CLI's folder (``cli/`` of a checkout, ``diagevo/cli/`` of a build)."""


def cell(text: Any) -> str:
    """A table cell: newlines folded, pipes escaped, and outside code spans what HTML would read
    as markup (``<``, ``>``, ``&``); a code span shows its text as it is."""
    parts = re.split(r"(`[^`]+`)", " ".join(str(text).split()))
    shown = "".join(p if i % 2 else html.escape(p, quote=False) for i, p in enumerate(parts))  # odd: a span
    return shown.replace("|", "\\|")


def _code(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False) if value is not None else "unset"
    return f"`{shown}`".replace("|", "\\|")


FIELDS = ["| field | default | what it does |", "|---|---|---|"]


def _settings() -> tuple[type, list[Setting]]:
    """The composed config's class and its fields (``diagevo config``'s rows), each described."""
    rows = settings(Config())
    undocumented = [r.key for r in rows if not r.help.strip()]
    if undocumented:
        raise Undocumented(f"config fields without a description: {', '.join(undocumented)}")
    return Config, rows


def _field(shown: str, row: Setting) -> str:
    return f"| `{shown}` | {_code(row.default)} | {cell(row.help)} |"


def configuration() -> str:
    """Every field of the composed config by section, its default and description, and the module
    that declares the section (the method's, which the log checks, or a component's)."""
    config, rows = _settings()
    out: list[str] = []
    section = None
    for r in rows:
        where, _, name = r.key.rpartition(".")
        if where != section:
            section = where
            out += ["", f"### `[{where}]`" if where else "### top level", "", _declared(config, where), "", *FIELDS]
        out.append(_field(name, r))
    return "\n".join(out)


def _declared(config: type, section: str) -> str:
    """Which module declares the fields of ``section`` (dotted; "" for the top level), and
    whether the log checks them or carries them for a component."""
    model: Any = config
    for part in filter(None, section.split(".")):
        model = model.model_fields[part].annotation
    checked = section.split(".")[0] in MethodConfig.model_fields
    return f"Declared in `{model.__module__.replace('.', '/')}.py`" + (" (the log checks them)." if checked else ".")


def _annotation(info: Any) -> str:
    text = getattr(info.annotation, "__name__", None) or str(info.annotation)
    return re.sub(r"\b(typing|collections\.abc|diagevo\.\w+)\.", "", text).replace("NoneType", "None")


def events() -> str:
    """Every type of :data:`diagevo.catalog.CATALOG` with its data model's fields."""
    out: list[str] = []
    for name, model in CATALOG.items():
        doc = (model.__doc__ or "").strip()
        if not doc or doc.startswith(model.__name__ + "("):
            raise Undocumented(f"event type {name}: its class {model.__name__} has no docstring (diagevo/catalog/)")
        facts = [
            f"class `diagevo.catalog.{model.__name__}`",
            f"kind: `{model.kind.value}`",
            "applied by the fold" if model.folded else "not folded",
        ]
        if model.class_version > 1:
            facts.append(f"class version {model.class_version} (older stored shapes are upcast when read)")
        if model.texts:
            facts.append("long texts kept beside the chained data: " + ", ".join(f"`{t}`" for t in model.texts))
        if model.keys:
            facts.append("indexed ids: " + ", ".join(f"`{k}`" for k in model.keys))
        if model.counted:
            facts.append(f"counted in `memory stats` as `{model.counted}`")
        out += ["", f"### `{name}`", "", " ".join(doc.split()), "", "; ".join(facts) + ".", ""]
        fields = model.model_fields
        if fields:
            out += ["| field | type | default |", "|---|---|---|"]
            for fname, info in fields.items():
                default = "required" if info.is_required() else _code(info.get_default(call_default_factory=True))
                out.append(f"| `{fname}` | `{cell(_annotation(info))}` | {default} |")
        else:
            out.append("No data fields (`{}`).")
    return "\n".join(out)


def _error_classes(folders: dict[str, Path]) -> list[tuple[str, str, list[str], str]]:
    """(class, module, bases, docstring) of every DiagevoError subclass in the sources of
    ``folders`` (package name -> its folder), found in the sources (so a new module's error
    class cannot be missed)."""
    found: dict[str, tuple[str, str, list[str], str]] = {}
    classes: list[tuple[str, str, list[str], str]] = []
    for package, folder in folders.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if package == "diagevo" and parts[0] in ("cli", "migrations"):  # their own entries, if any
                continue
            module = ".".join((package, *parts)).removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                    classes.append((node.name, module, bases, ast.get_docstring(node) or ""))
    family = {"DiagevoError"}
    changed = True
    while changed:
        changed = False
        for name, module, bases, doc in classes:
            if name not in found and (name == "DiagevoError" or family & set(bases)):
                found[name] = (name, module, bases, doc)
                family.add(name)
                changed = True
    return list(found.values())


ROLE = re.compile(r":\w+:`~?([\w.]+)`")
"""A Sphinx role of a docstring (``:class:`~diagevo.errors.Conflict```), shown as its name."""
MEANINGS = ("RetryLater", "BadServer", "BadInput", "Unavailable")
"""The branches of the error tree by what to do, in the order the errors page shows them."""


def error_classes(folders: dict[str, Path]) -> str:
    """Every error class a user can fix, found in the sources of ``folders``, as a tree under
    ``DiagevoError`` (a class with two parents in the family under each; its own subtree under
    the first), each line its module, whether ``import diagevo`` exports it, and its
    docstring's first paragraph."""
    classes = _error_classes(folders)
    undocumented = [f"{m}.{n}" for n, m, _, doc in classes if not doc.strip()]
    if undocumented:
        raise Undocumented(f"error classes without a docstring: {', '.join(undocumented)}")
    family = {name for name, *_ in classes}
    parents = {name: [b for b in bases if b in family] for name, _, bases, _ in classes}
    children: dict[str, list[str]] = {}
    for name, _module, _bases, _doc in classes:
        for parent in parents[name]:
            children.setdefault(parent, []).append(name)
    facts = {name: (module, doc) for name, module, _, doc in classes}

    def order(name: str) -> tuple[int, str, str]:
        return (MEANINGS.index(name) if name in MEANINGS else len(MEANINGS), facts[name][0], name)

    def lines(name: str, depth: int, parent: str | None) -> list[str]:
        module, doc = facts[name]
        shown = f"`diagevo.{name}`" if name in _EXPORTS else f"`{name}`"
        also = [p for p in parents.get(name, []) if p != parent]
        said = ROLE.sub(lambda m: f"`{m.group(1).rpartition('.')[2]}`", " ".join(doc.split("\n\n")[0].split()))
        row = f"{'    ' * depth}- {shown} ({'also a ' + ', '.join(f'`{a}`' for a in also) + '; ' if also else ''}"
        row += f"`{module}`): {cell(said)}"
        own = parent is None or parents[name][0] == parent  # its subtree under its first parent only
        below = sorted(children.get(name, []), key=order) if own else []
        return [row] + [line for child in below for line in lines(child, depth + 1, name)]

    return "\n".join(["## The error classes", "", *lines("DiagevoError", 0, None)])


PYTHON_NAME = re.compile(r"(?<![\w/.-])diagevo(?:\.[A-Za-z_]\w*)+")
NOT_PYTHON = {
    "diagevo.db": "the default SQLite file",
    "diagevo.diagevo": "the default database's folder",
    "diagevo.cache": "a logger",
}
"""Names of the form ``diagevo.X`` that the pages write and that are not Python's."""


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module of diagevo, or an attribute of one (a class's member
    included), as a reader would import or reach it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            try:
                found = getattr(found, attr)
            except AttributeError:
                return False
        return True
    return False


def unknown_names(markdown: str) -> list[str]:
    """The ``diagevo.X`` names a page writes that name nothing (a module, a public name, an
    attribute of one): what a reader would type and Python refuse."""
    found = set(PYTHON_NAME.findall(markdown)) - set(NOT_PYTHON)
    return sorted(name for name in found if not _resolves(name))


def _requests() -> tuple[Any, tuple[Any, ...], dict[str, str]]:
    """The LLM diagnostician at the default ``[diagnosis]`` section, serving ``http://SERVER/v1``,
    the request of each stage as ``diagevo doctor`` probes it (built by the code that builds every
    request of a round), and each stage's title."""
    diagnostician = llm_diagnostician(DiagnosisConfig(), llm_url="http://SERVER/v1")
    return diagnostician, stage_requests(diagnostician), TITLES


def diagnostician_request() -> str:
    """The JSON body of one request (Prompt 1's); the prompt texts and the schema are elided here."""
    diagnostician, requests, _ = _requests()
    body = diagnostician.request_body(requests[0].messages, requests[0].schema)
    body["messages"] = [
        {"role": m["role"], "content": f"<Prompt 1's {m['role']} message: {len(m['content']):,} characters>"}
        for m in body["messages"]
    ]
    if "response_format" not in body:
        raise Undocumented(
            "diagnostician requests no longer ask for structured outputs: the page how-to/diagnostician says so"
        )
    body["response_format"]["json_schema"]["schema"] = "<the stage's JSON Schema, below>"
    return "```json\n" + json.dumps(body, indent=2, ensure_ascii=False) + "\n```"


def diagnostician_stages() -> str:
    """Each stage's JSON Schema, as the requests of ``diagevo doctor``'s probes carry it."""
    _, requests, titles = _requests()
    out: list[str] = []
    for request in requests:
        out += [
            "",
            f"### {titles[request.stage][0].upper()}{titles[request.stage][1:]}",
            "",
            f"The `response_format.json_schema` of the `{request.stage}` stage's requests (the stage as `llm.called`"
            " events name it):",
            "",
            "```json",
            json.dumps(request.schema, indent=2, ensure_ascii=False),
            "```",
        ]
    return "\n".join(out)


def diagnostician_settings() -> str:
    """The ``[diagnosis]`` fields that shape the requests a server receives."""
    wanted = ("llm_url", "model", "api_key", "concurrency", "request_timeout_s", "failure_timeout_s", "max_retries")
    rows = {r.key: r for r in _settings()[1]}
    return "\n".join(
        [*FIELDS, *(_field(f"diagnosis.{n}", rows[f"diagnosis.{n}"]) for n in (*wanted, "min_words", "max_words"))]
    )


def _layer_contract() -> list[str]:
    """The layers of the import-linter contract in ``pyproject.toml``, top first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next((c["layers"] for c in contracts if c.get("type") == "layers"), None)
    if not layers:
        raise Undocumented("pyproject.toml has no layers contract: the contributing page draws it")
    return [str(layer) for layer in layers]


def layers() -> str:
    """The layers as one picture: each box imports only the boxes below it. Modules joined by
    ``|`` may not import each other; by ``:``, they may."""
    rows: list[str] = []
    for layer in _layer_contract():
        sep = " | " if "|" in layer else " : "
        names = [n.strip().removeprefix("diagevo.") for n in re.split(r"[|:]", layer)]
        line = ""
        for name in names:
            if line and len(line) + len(sep) + len(name) > 92:
                rows.append(line + sep.rstrip())
                line = "  "
            line += (sep if line.strip() else "") + name
        rows.append(line)
        rows.append("      │ imports only what is below")
    return "```text\n" + "\n".join(rows[:-1]) + "\n```"


def _first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def module_table(folder: Path, shown: str) -> str:
    """The modules of ``folder`` (named ``shown/NAME.py`` as in the repository) with the first
    paragraph of their docstring."""
    out = ["| module | what it holds |", "|---|---|"]
    for path in sorted(folder.glob("*.py")):
        if path.name != "__init__.py":
            out.append(f"| `{shown}/{path.name}` | {cell(_first_line(path))} |")
    return "\n".join(out)


def config_sections() -> str:
    """Each ``[section]`` of the composed config and the module that declares its fields."""
    config, rows = _settings()
    sections = sorted({r.key.rpartition(".")[0] for r in rows if "." in r.key}, key=lambda x: (x.count("."), x))
    out = ["| section | declared in |", "|---|---|"]
    for section in sections:
        out.append(f"| `[{section}]` | {_declared(config, section).removeprefix('Declared in ').rstrip('.')} |")
    return "\n".join(out)


def errors() -> str:
    """The exit codes (:data:`cli.common.EXIT_CODES`), then every error class a user can fix,
    found in the sources of the library and the CLI."""
    out = ["| exit code | when |", "|---|---|"]
    out += [f"| {code} | {cell(when)} |" for code, when in EXIT_CODES.items()]
    return "\n".join([*out, "", error_classes({"diagevo": PACKAGE, "diagevo.cli": CLI})])


def cli(tree: Any) -> str:
    """Each command and group of ``tree`` (the app's click tree), ``diagevo`` itself first, then
    in the order of their paths: the help ``--help`` shows, its usage and options, and its
    example and page (:mod:`cli.examples`)."""
    out: list[str] = []
    for path, command in examples.command_paths(tree).items():
        if not getattr(command, "hidden", False):
            out += _command(path, command)
    return "\n".join(out)


def _command(path: str, command: Any) -> list[str]:
    name = f"diagevo {path}".strip()
    ctx = command.context_class(command, info_name=name)
    out = [f"## {name}", ""]
    if command.help:
        out += [command.help, ""]
    out += ["```text", f"Usage: {name} {' '.join(command.collect_usage_pieces(ctx))}", "```", ""]
    rows = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        shown, said = param.get_help_record(ctx) or ("", getattr(param, "help", None) or "")
        if param.param_type_name == "argument":  # as the usage line names it (FILE, [PAGE])
            shown = " ".join(param.get_usage_pieces(ctx))
        rows.append(f"| `{shown}` | {cell(said)} |")
    if rows:
        out += ["| argument or option | what it does |", "|---|---|", *rows, ""]
    if path in examples.EXAMPLES:
        example, page = examples.EXAMPLES[path]
        out += [f"Example: `{example}`  ", f"More: [`diagevo docs {page}`](../{page}.md)", ""]
    return out


GENERATORS: dict[str, Callable[[], str]] = {
    "configuration": configuration,
    "events": events,
    "python-api": python_api,
    "layers": layers,
    "views": lambda: module_table(PACKAGE / "views", "diagevo/views"),
    "config-sections": config_sections,
    "diagnostician-request": diagnostician_request,
    "diagnostician-stages": diagnostician_stages,
    "diagnostician-settings": diagnostician_settings,
    "cli": lambda: cli(build()),
    "errors": errors,
    "commands": lambda: module_table(CLI, "cli"),
}
"""Every generated section by marker name (the site's build puts its own ``python-api``)."""


def fill(markdown: str, generators: Mapping[str, Callable[[], str]], where: str) -> str:
    """``markdown`` with each generated section built by its generator; a section no generator
    builds is a bug in the pages (``where`` names the page)."""

    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in generators:
            raise Undocumented(f"{where}: unknown generated section {name!r}")
        return generators[name]()

    return MARKER.sub(generate, markdown)


def sources() -> list[Path]:
    """The pages of ``docs/``, as ``setup.py`` ships them (rendered)."""
    return sorted(p for p in DOCS.rglob("*.md") if "__pycache__" not in p.parts)


def render(name: str) -> str:
    """The page ``name`` (``reference/cli``: its path below ``docs/`` without ``.md``) as the site
    shows it: the files it includes in place, then its generated sections filled."""
    path = DOCS / f"{name}.md"
    return fill(included(path.read_text(encoding="utf-8"), ROOT, name), GENERATORS, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Every page of docs/ rendered, laid out as docs/ is, into OUT.")
    parser.add_argument("out", type=Path, help="the folder the rendered pages go into")
    args = parser.parse_args(argv)
    for path in sources():
        relative = path.relative_to(DOCS)
        try:
            rendered = render(relative.with_suffix("").as_posix())
        except (Undocumented, LookupError, ValueError) as exc:  # the pages' own errors, named
            print(f"docs/render.py: {exc}", file=sys.stderr)
            return 1
        (args.out / relative).parent.mkdir(parents=True, exist_ok=True)
        (args.out / relative).write_text(rendered, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
