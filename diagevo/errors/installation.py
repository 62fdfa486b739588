"""How this diagevo was installed, so that a fix can be spelled for it.

A *checkout* is the repository itself (an editable install, or the sources on ``PYTHONPATH``):
its fixes install into the checkout, and use the Makefile's targets only when this Python is
the checkout's own ``.venv``, where those targets install. Anything else is a *wheel* install:
its fixes name the installed distribution (``pip install 'diagevo[hf]==0.1.0'``). Told from the
distribution's metadata (``direct_url.json``) and what sits beside the package; nothing is run.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    import importlib.metadata

PACKAGE_DIR = Path(__file__).resolve().parent.parent
PACKAGED = PACKAGE_DIR / "docs" / "packaged"
"""Where a built package carries the pages, rendered when built, and the files a user copies (``setup.py``)."""


@dataclass(frozen=True)
class Installation:
    """Where diagevo came from; ``make``: whether the checkout's Makefile installs into ``prefix``."""

    kind: Literal["checkout", "wheel"]
    version: str
    root: Path | None
    prefix: Path
    make: bool


def _checkout_at(root: Path) -> bool:
    return (root / "pyproject.toml").is_file() and (root / "Makefile").is_file() and (root / "diagevo").is_dir()


def _editable_root(dist: importlib.metadata.Distribution | None) -> Path | None:
    """The directory an editable install points at, from pip's ``direct_url.json`` (PEP 610)."""
    try:
        text = dist.read_text("direct_url.json") if dist is not None else None
        record = json.loads(text) if text else {}
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not (record.get("dir_info") or {}).get("editable"):
        return None
    url = urlparse(str(record.get("url", "")))
    return Path(unquote(url.path)) if url.scheme == "file" else None


def _installed() -> importlib.metadata.Distribution | None:
    import importlib.metadata  # here, not at the top: every command's start would pay it (15 ms)

    try:
        return importlib.metadata.distribution("diagevo")
    except importlib.metadata.PackageNotFoundError:  # the sources on PYTHONPATH, never installed
        return None


def detect(
    package_dir: Path = PACKAGE_DIR,
    prefix: Path | None = None,
    dist: importlib.metadata.Distribution | None = None,
) -> Installation:
    """The installation whose package is ``package_dir``, in the environment ``prefix``, with the
    metadata ``dist`` (defaults: this interpreter's and the installed diagevo's)."""
    dist = dist or _installed()
    here = Path(prefix or sys.prefix)
    version = dist.version if dist is not None else "0+unknown"
    # the checkout this package lives in, else the one an editable install names (its sources)
    root = package_dir.parent if _checkout_at(package_dir.parent) else _editable_root(dist)
    if root is None or not _checkout_at(root):
        return Installation("wheel", version, None, here, False)
    make = (root / ".venv").resolve() == here.resolve()
    return Installation("checkout", version, root, here, make)


@cache
def installation() -> Installation:
    """This process's installation (looked up once)."""
    return detect()


def shipped(relative: str) -> Path | None:
    """A file of the repository that diagevo ships (``configs/sim.toml``): the copy a built
    package carries, else the checkout's; None where neither holds it."""
    for top in (PACKAGED, installation().root):
        if top is not None and (top / relative).is_file():
            return top / relative
    return None


def shipped_names(pattern: str) -> list[str]:
    """The names of the shipped files that match ``pattern``, read where :func:`shipped` reads them."""
    for top in (PACKAGED, installation().root):
        found = sorted(p.relative_to(top).as_posix() for p in top.glob(pattern) if p.is_file()) if top else []
        if found:
            return found
    return []
