"""Database URLs: the default (apart from ``config`` so that the store and the CLI's read
commands do not import pydantic's configuration models); a URL's password is redacted by
:mod:`diagevo.redaction`."""

from __future__ import annotations

import os

from diagevo.redaction import REDACTED as REDACTED
from diagevo.redaction import redact_url as redact_url

DEFAULT_DB_URL = "sqlite:///diagevo.db"


def resolve_db_url(url: str | None) -> str:
    return url or os.environ.get("DIAGEVO_DB") or DEFAULT_DB_URL


def without_password(url: str) -> str:
    """The URL with its password left out (not masked): a URL to show, to suggest in a command or
    to key files by."""
    from sqlalchemy.engine import URL, make_url

    try:
        u = make_url(url)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: shown redacted instead
        return redact_url(url)
    bare = URL.create(u.drivername, u.username, None, u.host, u.port, u.database, u.query)
    return bare.render_as_string(hide_password=False)
