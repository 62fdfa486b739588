"""The Python API reference: the names ``diagevo/__init__.py`` exports, the types they return or
take, then the public modules (``diagevo.verl``); and :class:`Undocumented`, what every
generated section raises when the code leaves something out.

One list of what the reference shows (:func:`parts`: each name's module, heading and the
members a caller uses), in two forms: mkdocstrings blocks for the site (``docs/hooks.py``), and
Markdown built from the signatures and docstrings themselves for the pages a wheel carries
(``docs/render.py``: no mkdocstrings where the docs are read in a terminal). The docstrings'
Sphinx roles (``:class:`~diagevo.errors.NotFound```) are shown as code (the site links them:
``docs/griffe_roles.py``, which reads the lists below). A build-time tool, beside the pages: the
package carries what it renders, never this module.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import operator
import re
import textwrap
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from importlib import import_module
from typing import Any

from diagevo import _EXPORTS


class Undocumented(Exception):
    """Something the code declares has no documentation (a config field without a description,
    an export without a docstring): a bug, which fails the site's build and the wheel's."""


# the types the public names return or take, documented in the reference beside them (reached as
# attributes and annotations, imported from their modules when a caller names them)
DOCUMENTED_TYPES: dict[str, str] = {
    "CausePromoted": "diagevo.catalog",
    "MemoryView": "diagevo.results.memory",
    "CurrentMemory": "diagevo.results.memory",
    "CauseRow": "diagevo.results.memory",
    "NodeRow": "diagevo.results.memory",
    "RunStats": "diagevo.results.stats",
    "CauseStory": "diagevo.views.stories",
    "Lifecycle": "diagevo.results.stats",
    "RunDiff": "diagevo.results.runs",
    "Fork": "diagevo.results.runs",
}

# the members of an exported class that a caller uses (the others serve diagevo's own modules):
# the reference shows these alone
PUBLIC_MEMBERS: dict[str, tuple[str, ...]] = {
    "Recorder": ("url", "runs", "has_run", "close"),
    "VectorIndex": ("path", "sync"),
    "Round": (
        "open",
        "reopened",
        "next_step",
        "current",
        "t",
        "run",
        "config",
        "requests",
        "record",
        "questions",
        "promote",
        "record_failures",
        "record_metrics",
        "note",
        "commit",
    ),
}

# the public modules beside the names above, for what another program loads by the module's name
# (verl loads its reward functions from ``pkg://diagevo.verl``): each documented in the reference
# with the names of its ``__all__``
PUBLIC_MODULES: tuple[str, ...] = ("diagevo.verl",)

RESULTS = (
    "## Results and records\n\nWhat the functions above return or take: attributes for Python, "
    "`to_dict()` for the JSON the matching command prints when asked for JSON.\n"
)
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj):`(~?)([^`]+?)`")
WIDEST = 88
"""Characters of a signature on one line; a longer one has a parameter a line."""


@dataclass(frozen=True)
class ReferenceEntry:
    """A name the reference shows: where it is defined, its heading, and for a class the members
    a caller uses (None: every public member it defines)."""

    module: str
    name: str
    heading: str
    members: tuple[str, ...] | None

    def value(self) -> Any:
        return getattr(import_module(self.module), self.name)


def parts() -> list[tuple[list[str], list[ReferenceEntry]]]:
    """The reference in order, each part the lines above its names and an entry per name: the
    exported names, the types documented beside them (the results), then each public module's
    ``__all__`` under its docstring. Each name, and each module, must have a docstring."""

    def entry(module: str, name: str, heading: str) -> ReferenceEntry:
        found = ReferenceEntry(module, name, heading, PUBLIC_MEMBERS.get(name))
        if not (found.value().__doc__ or "").strip():
            raise Undocumented(f"{heading} ({module}) has no docstring: the Python API page would be empty there")
        return found

    out = [
        ([], [entry(m, n, f"diagevo.{n}") for n, m in _EXPORTS.items()]),
        ([RESULTS], [entry(m, n, f"{m}.{n}") for n, m in DOCUMENTED_TYPES.items()]),
    ]
    for module in PUBLIC_MODULES:
        mod = import_module(module)
        if not (mod.__doc__ or "").strip() or not getattr(mod, "__all__", None):
            raise Undocumented(f"{module} has no docstring or no __all__: the Python API page would be empty there")
        out.append(
            ([f"## {module}", "", docstring(mod.__doc__), ""], [entry(module, n, f"{module}.{n}") for n in mod.__all__])
        )
    return out


def _section(render: Callable[[ReferenceEntry], list[str]]) -> str:
    """The section's :func:`parts`, whatever renders each name."""
    out: list[str] = []
    for above, names in parts():
        out += above
        for entry in names:
            out += render(entry)
    return "\n".join(out)


def mkdocstrings_blocks() -> str:
    """The section as the site builds it: one mkdocstrings block per name."""
    return _section(_block)


def _block(entry: ReferenceEntry) -> list[str]:
    block = [f"::: {entry.module}.{entry.name}", "    options:", f'      heading: "{entry.heading}"']
    if entry.members is not None:  # the members a caller uses, not those diagevo's own modules call
        block.append(f"      members: {json.dumps(list(entry.members))}")
    return [*block, ""]


def python_api() -> str:
    """The section as Markdown from the code: each name's signature and docstring, and for a
    class those of its members."""
    return _section(_described)


def _described(entry: ReferenceEntry) -> list[str]:
    obj = entry.value()
    out = [f"### {entry.heading}", "", *_code(_signature(obj, entry.name, is_class=inspect.isclass(obj))), ""]
    out += [docstring(obj.__doc__), ""]
    if inspect.isclass(obj):
        attributes = attribute_docs(obj)
        for name in entry.members if entry.members is not None else _own_members(obj, attributes):
            out += _member(obj, name, attributes)
    return out


def _own_members(cls: type, attributes: dict[str, tuple[str | None, str]]) -> list[str]:
    """The documented attributes of ``cls``, then the public methods and properties it defines."""
    kinds = (property, classmethod, staticmethod, cached_property)
    methods = [n for n, v in vars(cls).items() if inspect.isfunction(v) or isinstance(v, kinds)]
    return [n for n in (*attributes, *methods) if not n.startswith("_")]


def attribute_docs(cls: type) -> dict[str, tuple[str | None, str]]:
    """name -> (annotation as written, docstring) of the attributes ``cls``'s source documents
    with a string after their assignment, in its body or as ``self.NAME`` in ``__init__`` (as
    griffe reads them for the site)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):  # no source to read: no attribute docstrings
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    init = next((n.body for n in body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), [])
    found: dict[str, tuple[str | None, str]] = {}
    for statements in (body, init):
        for node, following in zip(statements, statements[1:]):
            target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                name = target.attr
            elif isinstance(target, ast.Name) and statements is body:
                name = target.id
            else:
                continue
            said = following.value if isinstance(following, ast.Expr) else None
            if isinstance(said, ast.Constant) and isinstance(said.value, str):
                written = ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else None
                found[name] = (written, said.value)
    return found


def _member(cls: type, name: str, attributes: dict[str, tuple[str | None, str]]) -> list[str]:
    raw = inspect.getattr_static(cls, name, None)
    shown = f"{cls.__name__}.{name}"
    if isinstance(raw, (property, cached_property)):
        getter: Any = raw.fget if isinstance(raw, property) else raw.func
        returned = inspect.signature(getter).return_annotation
        head = shown if returned is inspect.Signature.empty else f"{shown}: {_annotation(returned)}"
        doc = getter.__doc__
    elif raw is None or not (inspect.isfunction(raw) or isinstance(raw, (classmethod, staticmethod))):
        written, doc = attributes.get(name, (None, None))
        annotation = _class_annotations(cls).get(name, written)
        head = shown if annotation is None else f"{shown}: {_annotation(annotation)}"
    else:  # a method without its self (a class or static method comes bound, or without one)
        head = _signature(getattr(cls, name), shown, is_class=False, method=inspect.isfunction(raw))
        doc = getattr(cls, name).__doc__
    return [f"#### {shown}", "", *_code(head), "", *([docstring(doc), ""] if doc else [])]


def _class_annotations(cls: type) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        found.update(base.__dict__.get("__annotations__", {}))
    return found


def _code(line: str) -> list[str]:
    return ["```python", line, "```"]


def _annotation(annotation: Any) -> str:
    """An annotation as written (a string under ``from __future__ import annotations``), without
    module prefixes, and without the checks a pydantic field type carries (``Annotated``'s
    metadata: a field's ``Id`` reads as ``str``)."""
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    if not isinstance(annotation, str) and "Annotated[" in text:
        text = inspect.formatannotation(_bare(annotation))
    return re.sub(r"\b(?:typing|collections\.abc|diagevo(?:\.\w+)*)\.(?=\w)", "", text)


def _bare(annotation: Any) -> Any:
    """``annotation`` with every ``Annotated[T, ...]`` in it read as ``T``."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _bare(typing.get_args(annotation)[0])
    args = typing.get_args(annotation)
    if not args:
        return annotation
    bare = tuple(a if a is Ellipsis else _bare(a) for a in args)
    if isinstance(annotation, types.UnionType):
        return functools.reduce(operator.or_, bare)
    if isinstance(annotation, types.GenericAlias):
        return types.GenericAlias(typing.get_origin(annotation), bare)
    return annotation


def _signature(obj: Any, shown: str, *, is_class: bool, method: bool = False) -> str:
    """``shown(parameters) -> returned``, a parameter a line when it would be wider than
    :data:`WIDEST`; a ``method``'s first parameter (``self``) left out."""
    rebuild = getattr(obj, "model_rebuild", None)
    if is_class and callable(rebuild):  # a pydantic model's signature is its fields' once it is built,
        rebuild()  # which its first validation does: rendered alike whatever ran before in the process
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):  # a builtin or an object without one
        return f"class {shown}" if is_class else shown
    listed = list(sig.parameters.values())[1 if method else 0 :]
    params: list[str] = []
    keyword_marked = False
    for i, p in enumerate(listed):
        if p.kind is p.KEYWORD_ONLY and not keyword_marked:
            params.append("*")
        keyword_marked = keyword_marked or p.kind in (p.KEYWORD_ONLY, p.VAR_POSITIONAL)
        stars = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        name = stars + p.name
        if p.annotation is not p.empty:
            name += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            shown_default = getattr(p.default, "__qualname__", None) or repr(p.default)  # a function by its name
            name += f" = {shown_default}" if p.annotation is not p.empty else f"={shown_default}"
        params.append(name)
        following = listed[i + 1 :]
        if p.kind is p.POSITIONAL_ONLY and not any(q.kind is p.POSITIONAL_ONLY for q in following):
            params.append("/")
    returned = "" if is_class or sig.return_annotation is sig.empty else f" -> {_annotation(sig.return_annotation)}"
    prefix = "class " if is_class else ""
    line = f"{prefix}{shown}({', '.join(params)}){returned}"
    if len(line) <= WIDEST:
        return line
    return f"{prefix}{shown}(\n" + "".join(f"    {p},\n" for p in params) + f"){returned}"


def docstring(doc: str | None) -> str:
    """A docstring as Markdown: its indentation removed, ````code```` as ```code```, a Sphinx
    role as the code it names (``~`` keeps the last part), ``::`` before a literal block as ``:``."""
    text = inspect.cleandoc(doc or "")

    def role(match: re.Match[str]) -> str:
        target = match.group(2).strip()
        label = re.sub(r"\s*<[^>]*>$", "", target)  # :class:`text <target>`
        return f"`{label.rsplit('.', 1)[-1] if match.group(1) == '~' else label}`"

    text = ROLE.sub(role, text).replace("``", "`")
    return re.sub(r"(?<=\S)::$", ":", text, flags=re.M)
