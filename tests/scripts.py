"""The project's scripts (``benchmarks/``, ``docs/``, ``setup.py``) imported from their paths for a
test: they are files to run, not modules of the package, so no import statement reaches them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str, name: str) -> ModuleType:
    """The script at ``ROOT/relative``, imported as module ``name``. It is registered in
    ``sys.modules`` first, where its dataclasses look their module up while being built."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
