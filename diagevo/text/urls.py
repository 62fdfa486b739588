"""Database URLs (the default, apart from ``config`` so that read commands do not import its
models), and the one check of an endpoint's URL, wherever one is given."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from diagevo.text.redaction import redact_url as redact_url

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

DEFAULT_DB_URL = "sqlite:///diagevo.db"


def resolve_db_url(url: str | None) -> str:
    return url or os.environ.get("DIAGEVO_DB") or DEFAULT_DB_URL


def parse_db_url(url: str) -> URL:
    """A database URL read by SQLAlchemy's grammar, the one place one is parsed: the opening of a
    store, a URL shown without its password, the ``--db`` a command prints. SQLAlchemy is loaded
    here, when a URL is first parsed, not with the module: a SQLite log is read without it.
    Raises SQLAlchemy's ``ArgumentError`` for a string that is no URL."""
    from sqlalchemy.engine import make_url

    return make_url(url)


def without_password(url: str) -> str:
    """The URL with its password left out (not masked): a URL to show, to suggest in a command or
    to key files by."""
    try:
        u = parse_db_url(url)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: shown redacted instead
        return redact_url(url)
    bare = type(u).create(u.drivername, u.username, None, u.host, u.port, u.database, u.query)
    return bare.render_as_string(hide_password=False)


LONGEST_URL = 2048
"""The longest endpoint URL taken (what browsers and servers take; a longer one is a paste gone wrong)."""


def endpoint_problem(url: str) -> str | None:
    """Why ``url`` cannot be an OpenAI-compatible endpoint's base URL, or None. Credentials in it
    are refused: a URL is stored with the run and shown in its report (the key goes in
    ``$DIAGEVO_LLM_API_KEY`` or ``diagnosis.api_key``, never stored). The reason never repeats the
    URL (it may hold a secret)."""
    if len(url) > LONGEST_URL:
        return f"a URL of {len(url):,} characters, longer than the {LONGEST_URL:,} taken"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "a URL holds no space or control character"
    try:
        parts = urlsplit(url)
        port = parts.port  # out of range or not a number: ValueError
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        return "not an http:// or https:// URL (such as http://localhost:8000/v1)"
    if parts.username is not None or parts.password is not None:
        return (
            "credentials in the URL are not taken (the URL is stored with the run): give the key in "
            "$DIAGEVO_LLM_API_KEY or diagnosis.api_key, which are never stored"
        )
    if not parts.hostname or port == 0:
        return "a URL without a host (such as http://localhost:8000/v1)"
    return None
