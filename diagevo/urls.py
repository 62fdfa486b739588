"""Database URLs: the default, and the redaction of passwords (apart from ``config`` so that
the store and the CLI's read commands do not import pydantic's configuration models)."""

from __future__ import annotations

import os

DEFAULT_DB_URL = "sqlite:///diagevo.db"
REDACTED = "***"


def redact_url(url: str) -> str:
    """``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db``."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    if ":" in creds:
        creds = creds.split(":", 1)[0] + ":" + REDACTED
    return f"{scheme}://{creds}@{host}"


def resolve_db_url(url: str | None) -> str:
    return url or os.environ.get("DIAGEVO_DB") or DEFAULT_DB_URL
