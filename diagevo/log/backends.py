"""Which backend a database URL names, and its engine: the one place that maps a URL's scheme to
a backend module (:mod:`diagevo.log.sqlite`, :mod:`diagevo.log.postgres`,
:mod:`diagevo.log.inmemory`), and the one factory that opens a log (:func:`open_log`).
Everything dialect-specific lives in those modules."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from diagevo.log.errors import MissingDatabase, StoreError
from diagevo.log.recorder import Recorder
from diagevo.text.parsing import error_line
from diagevo.text.urls import parse_db_url, redact_url

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection, Engine

# backend name (SQLAlchemy's, or "memory") -> module holding its recorder and dialect functions
_MODULES = {"sqlite": "diagevo.log.sqlite", "postgresql": "diagevo.log.postgres", "memory": "diagevo.log.inmemory"}


def sqlalchemy_errors(*names: str) -> tuple[type[Exception], ...]:
    """SQLAlchemy's exception classes ``names``, or none while SQLAlchemy is not loaded: a log
    opened without it (SQLite's read path) cannot raise them, and importing it only to name them
    in an ``except`` would cost every read command its import."""
    module = sys.modules.get("sqlalchemy.exc")
    return tuple(getattr(module, name) for name in names) if module else ()


def normalise_url(url: str) -> URL:
    try:
        u = parse_db_url(url)
    except sqlalchemy_errors("ArgumentError"):
        raise StoreError(f"invalid database URL {redact_url(url)!r}{_sqlite_hint(url)}") from None
    if u.drivername.split("+", 1)[0] == "postgres":  # libpq's other spelling, which SQLAlchemy refuses
        u = u.set(drivername="postgresql" + u.drivername[len("postgres") :])
    if u.drivername == "postgresql":
        u = u.set(drivername="postgresql+psycopg")  # psycopg 3 is the driver we ship
    return u


def _sqlite_hint(url: str) -> str:
    """What a URL without ``://`` likely meant: a plain path, or ``sqlite:`` with too few slashes
    (``sqlite:/x.db``, ``sqlite:x.db``) -> the URL of that file, relative and absolute."""
    if "://" in url:
        return ""
    scheme, sep, rest = url.partition(":")
    if sep and scheme.lower() == "sqlite":
        rest = rest.lstrip("/")
        return f" (a SQLite file is sqlite:///{rest}, or sqlite:////{rest} from the root)" if rest else ""
    if sep and "/" not in scheme and "\\" not in scheme and len(scheme) > 1:
        return ""  # another scheme: no guess
    return f" (a SQLite file is sqlite:///{url})"


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


def open_log(url: str, *, create: bool = True, migrate_empty: bool = True, readonly: bool = False) -> Recorder:
    """The log at ``url`` (``sqlite:///FILE``, ``postgresql+psycopg://...``, ``memory://NAME``),
    opened by its backend's recorder. ``create=False`` creates nothing (a missing SQLite file is
    ``no database at PATH``); ``readonly`` (read commands) opens a SQLite file read-only; only a
    truly empty database is ever migrated (``migrate_empty``)."""
    # a plain scheme picks its module without parsing the URL (and importing SQLAlchemy)
    scheme = url.split("://", 1)[0].split("+", 1)[0] if "://" in url else ""
    module = module_for(scheme) if scheme in _MODULES else backend_of(url)
    return module.RECORDER(url, create=create, migrate_empty=migrate_empty, readonly=readonly)  # type: ignore[no-any-return]


def plain_file(url: str) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL that SQLAlchemy would read no differently (no query,
    no escapes, not in-memory); None for any other URL."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    db = url[len(prefix) :]
    if not db or "?" in db or "%" in db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for other databases and in-memory SQLite)."""
    plain = plain_file(url)
    if plain is not None:
        return plain
    path_of = getattr(backend_of(url), "sqlite_path", None)
    return path_of(normalise_url(url)) if path_of is not None else None


def make_engine(url: str, wal: Callable[[], bool] = lambda: False, *, readonly: bool = False) -> Engine:
    """An engine for a SQL ``url`` (see the backend module's ``make_engine``)."""
    u = normalise_url(url)
    module = module_for(u.get_backend_name())
    check = getattr(module, "check_url", None)
    if check is not None:
        check(u, url)
    if not hasattr(module, "make_engine"):
        raise StoreError(f"{redact_url(url)} is not a SQL database")
    try:
        return module.make_engine(u, wal, readonly)  # type: ignore[no-any-return]
    except sqlalchemy_errors("ArgumentError", "NoSuchModuleError") + (ImportError,) as exc:
        raise StoreError(f"cannot use database URL {redact_url(url)!r}: {error_line(exc)}") from None


def missing_database(url: str) -> MissingDatabase | None:
    """``no database at PATH`` when ``url`` names a file that does not exist."""
    check: Any = getattr(backend_of(url), "missing_database", None)
    return check(normalise_url(url)) if check is not None else None


def cannot_open(url: str, exc: BaseException) -> StoreError:
    return StoreError(f"cannot open database {redact_url(url)}: {error_line(exc)}")


@contextmanager
def connect(engine: Engine, url: str) -> Iterator[Connection]:
    try:
        conn = engine.connect()
    except sqlalchemy_errors("DBAPIError") as exc:
        raise cannot_open(url, exc) from None
    with conn:
        yield conn
