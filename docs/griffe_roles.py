"""A griffe extension for the API reference: the Sphinx roles of the docstrings the reference
shows (of the public names, and of the public modules and their ``__all__``:
``:class:`~diagevo.errors.NotFound```, ``:meth:`Round.record```) become autorefs links to the
objects it renders. A role whose target the reference does not render fails the build:
every name the reference mentions is one it shows. What the reference shows is
``docs/render_api.py``'s lists (``docs.render_api``: ``docs/hooks.py`` puts the repository on the path)."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj):`(~?)([^`<>]+?)`")


class SphinxRoles(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != "diagevo":
            return
        import importlib

        from diagevo import _EXPORTS
        from docs.render_api import DOCUMENTED_TYPES, PUBLIC_MEMBERS, PUBLIC_MODULES

        shown: dict[str, str] = {}  # a path (as written, or its alias target) -> the rendered identifier
        objects: list[tuple[str, griffe.Object | griffe.Alias]] = []
        rendered = {**_EXPORTS, **DOCUMENTED_TYPES}.items()
        for module in PUBLIC_MODULES:  # the module's docstring, then each name of its __all__
            objects.append((module, loader.modules_collection[module]))
            shown.setdefault(module, module)
            rendered = [*rendered, *((name, module) for name in importlib.import_module(module).__all__)]
        for name, module in rendered:
            ident = f"{module}.{name}"
            obj = loader.modules_collection[ident]
            objects.append((ident, obj))
            for path in _paths(obj, ident):
                shown.setdefault(path, ident)
            if obj.is_class:
                for member_name, member in obj.all_members.items():
                    if member_name.startswith("_") or member_name not in PUBLIC_MEMBERS.get(name, (member_name,)):
                        continue  # not shown: its docstring is not rendered
                    member_ident = f"{ident}.{member_name}"
                    objects.append((member_ident, member))
                    for path in _paths(member, member_ident):
                        shown.setdefault(path, member_ident)
        for name, module in _EXPORTS.items():
            shown.setdefault(f"diagevo.{name}", f"{module}.{name}")
        problems: list[str] = []
        for ident, obj in objects:
            target = obj.final_target if isinstance(obj, griffe.Alias) else obj
            doc = target.docstring
            if doc is None or ":" not in doc.value:
                continue

            def link(m: re.Match[str], ident: str = ident, target: Any = target) -> str:
                short, text = m.group(1) == "~", m.group(2).strip()
                found = _resolve(text, target, loader, shown)
                if found is None:
                    problems.append(f"{ident}: {m.group(0)} names nothing the API reference shows")
                    return m.group(0)
                label = text.rsplit(".", 1)[-1] if short else text
                return f"[`{label}`][{found}]"

            doc.value = ROLE.sub(link, doc.value)
        if problems:
            raise griffe.GriffeError("; ".join(problems))


def _paths(obj: Any, ident: str) -> set[str]:
    out = {ident, obj.path}
    try:
        out.add(obj.final_target.path if isinstance(obj, griffe.Alias) else obj.path)
    except Exception:  # an alias griffe cannot follow: the identifier alone
        pass
    return out


def _resolve(text: str, obj: Any, loader: griffe.GriffeLoader, shown: dict[str, str]) -> str | None:
    """The rendered identifier ``text`` names, read from ``obj``'s scope (itself when a class or a
    module, then its parents)."""
    head, _, rest = text.removeprefix("diagevo.").partition(".")
    public = shown.get(f"diagevo.{head}") if text.startswith("diagevo.") else None
    if public is not None:  # diagevo.Name.member: the member of an exported name
        return shown.get(f"{public}.{rest}") if rest else public
    scopes = [obj.path + "."] if obj.is_class or obj.is_module else []
    scopes.append("")
    parent = obj.parent
    while parent is not None:
        scopes.append(parent.path + ".")
        parent = parent.parent
    for scope in scopes:
        path = scope + text
        if path in shown:
            return shown[path]
        try:
            found = loader.modules_collection[path]
        except (KeyError, griffe.AliasResolutionError):
            continue
        for candidate in _paths(found, path):
            if candidate in shown:
                return shown[candidate]
    return None
