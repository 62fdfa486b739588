"""A module imported on first use: ``sa_exc = LazyModule("sqlalchemy.exc")`` costs nothing until
``sa_exc.DBAPIError`` is looked up, which an ``except`` clause does only when an exception
reaches it. Read commands open a SQLite log without SQLAlchemy (a fifth of their wall time)."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import Any


class LazyModule:
    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = import_module(self._name)
        return getattr(self._module, attr)


sa_exc: Any = LazyModule("sqlalchemy.exc")
