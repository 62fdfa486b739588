"""Which backend a database URL names, and its engine: the one place that maps a URL's scheme to
a backend module (:mod:`diagevo.events.sqlite`, :mod:`diagevo.events.postgres`,
:mod:`diagevo.events.inmemory`). Everything dialect-specific lives in those modules."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from diagevo.events.recorder import MissingDatabase, StoreError, one_line
from diagevo.lazy import sa_exc
from diagevo.urls import redact_url

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection, Engine

    from diagevo.events.recorder import Recorder

# backend name (SQLAlchemy's, or "memory") -> module holding its recorder and dialect functions
_MODULES = {"sqlite": "diagevo.events.sqlite", "postgresql": "diagevo.events.postgres", "memory": "diagevo.events.inmemory"}


def normalise_url(url: str) -> URL:
    from sqlalchemy.engine import make_url

    try:
        u = make_url(url)
    except sa_exc.ArgumentError:
        hint = f" (a SQLite file is sqlite:///{url})" if "://" not in url else ""
        raise StoreError(f"invalid database URL {redact_url(url)!r}{hint}") from None
    if u.drivername == "postgresql":
        u = u.set(drivername="postgresql+psycopg")  # psycopg 3 is the driver we ship
    return u


def module_for(name: str) -> ModuleType:
    """The backend module of a backend (or SQLAlchemy dialect) name."""
    try:
        return import_module(_MODULES[name])
    except KeyError:
        raise StoreError(
            f"unsupported database {name!r}: use sqlite:///FILE, postgresql+psycopg://... or memory://NAME"
        ) from None


def backend_of(url: str) -> ModuleType:
    return module_for(normalise_url(url).get_backend_name())


def dialect_of(conn: Connection) -> ModuleType:
    return module_for(conn.dialect.name)


def recorder_class(url: str) -> type[Recorder]:
    # a plain scheme picks its module without parsing the URL (and importing SQLAlchemy)
    scheme = url.split("://", 1)[0].split("+", 1)[0] if "://" in url else ""
    module = module_for(scheme) if scheme in _MODULES else backend_of(url)
    return module.RECORDER  # type: ignore[no-any-return]


def open_recorder(url: str, **options: Any) -> Recorder:
    """The recorder ``url`` names, opened: what ``EventStore(url, ...)`` does, in a form that
    type checkers see as a concrete backend rather than the abstract interface."""
    return recorder_class(url)(url, **options)


def make_engine(url: str, wal: Callable[[], bool] = lambda: False, *, readonly: bool = False) -> Engine:
    """An engine for a SQL ``url`` (see the backend module's ``make_engine``)."""
    u = normalise_url(url)
    module = module_for(u.get_backend_name())
    if not hasattr(module, "make_engine"):
        raise StoreError(f"{redact_url(url)} is not a SQL database")
    try:
        return module.make_engine(u, wal, readonly)  # type: ignore[no-any-return]
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as exc:
        raise StoreError(f"cannot use database URL {redact_url(url)!r}: {one_line(exc)}") from None


def missing_database(url: str) -> MissingDatabase | None:
    """``no database at PATH`` when ``url`` names a file that does not exist."""
    check: Any = getattr(backend_of(url), "missing_database", None)
    return check(normalise_url(url)) if check is not None else None


@contextmanager
def connect(engine: Engine, url: str) -> Iterator[Connection]:
    try:
        conn = engine.connect()
    except sa_exc.DBAPIError as exc:
        raise StoreError(f"cannot open database {redact_url(url)}: {one_line(exc)}") from None
    with conn:
        yield conn
