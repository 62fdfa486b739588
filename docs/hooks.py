"""MkDocs hook: the sections of the pages that are generated from the code when the site is built.

A page holds a marker line ``<!-- generated: NAME -->``; this hook replaces it with what the
generator of that name builds. The generators live in the package, beside the code they read
(:mod:`diagevo.docs.generated`, and ``cli/reference.py`` for the CLI's), because ``diagevo docs``
fills the same sections in any installation: each reference is built in one place. The site
differs in one section alone: the Python API as mkdocstrings blocks
(:func:`diagevo.docs.api.mkdocstrings_blocks`), where the terminal gets the signatures and
docstrings as Markdown.

Something added without documentation fails the build here: a config field without a
description, an event type whose data model has no docstring, an error class or an export
without one, a marker no generator builds; and a page that names a ``diagevo.X`` that does not
exist (:func:`diagevo.docs.generated.unknown_names`, which ``tests/test_docs_examples.py`` runs
on every page too).
"""

from __future__ import annotations

from typing import Any

from mkdocs.exceptions import PluginError


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    from diagevo.cli.app import build
    from diagevo.cli.reference import generators
    from diagevo.docs import Undocumented
    from diagevo.docs.api import mkdocstrings_blocks
    from diagevo.docs.generated import unknown_names
    from diagevo.docs.pages import fill

    unknown = unknown_names(markdown)
    if unknown:
        raise PluginError(f"{page.file.src_path} names what diagevo does not have: {', '.join(unknown)}")
    try:
        return fill(markdown, {**generators(build()), "python-api": mkdocstrings_blocks}, page.file.src_path)
    except (Undocumented, LookupError) as exc:
        raise PluginError(str(exc)) from exc
