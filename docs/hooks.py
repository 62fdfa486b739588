"""MkDocs hook: the sections of the pages that are generated from the code when the site is built.

A page holds a marker line ``<!-- generated: NAME -->``; this hook replaces it with what the
generator of that name builds. The generators are ``docs/render.py``'s, which also render the
pages a wheel carries when it is built (``setup.py``), so that each reference is built in one
place and the package runs none. The site differs in one section alone: the Python API as
mkdocstrings blocks (:func:`docs.render_api.mkdocstrings_blocks`), where the wheel's pages have
the signatures and docstrings as Markdown.

Something added without documentation fails the build here: a config field without a
description, an event type whose data model has no docstring, an error class or an export
without one, a marker no generator builds; and a page that names a ``diagevo.X`` that does not
exist (:func:`docs.render.unknown_names`, which ``tests/test_docs_examples.py`` runs on every
page too).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = str(Path(__file__).resolve().parent.parent)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if ROOT not in sys.path:  # docs.render, imported here and by docs/griffe_roles.py (MkDocs undoes
        sys.path.append(ROOT)  # what a hook's module adds to the path while it loads)
    from docs.render import GENERATORS, Undocumented, fill, unknown_names
    from docs.render_api import mkdocstrings_blocks

    unknown = unknown_names(markdown)
    if unknown:
        raise PluginError(f"{page.file.src_path} names what diagevo does not have: {', '.join(unknown)}")
    try:
        return fill(markdown, {**GENERATORS, "python-api": mkdocstrings_blocks}, page.file.src_path)
    except (Undocumented, LookupError) as exc:
        raise PluginError(str(exc)) from exc
