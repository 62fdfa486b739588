"""Credentials never leave memory: the one place that removes them from what diagevo stores,
prints or writes to a file: a URL's password, the value of a secret-named setting (``api_key``,
``*_key``, ``*token``, ``password``, ``secret``, ``credentials``) in a config, a ``name=value``
or a ``"name": "value"`` pair, a URL's ``?key=``, ``?sig=`` or ``?signature=``, and a bearer
token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

REDACTED = "***"

# scheme://user:PASSWORD@host: the password runs to the authority's last "@"
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:)(?P<secret>[^\s/?#]*)@")
_SECRET_NAME = r"[\w.-]*?(?:api[_-]?key|apikey|_key|token|password|passwd|secret|credentials?)"
_NAMED = re.compile(rf"(?i)(?P<head>\b{_SECRET_NAME}[\"']?\s*[=:]\s*[\"']?)(?P<secret>[^\s\"'&,;)}}\]]+)")
_QUERY_KEY = re.compile(r"(?i)(?P<head>[?&](?:key|sig|signature)=)(?P<secret>[^\s&#]*)")  # ?key=... of a URL
_BEARER = re.compile(r"(?i)(?P<head>\bbearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]+)")
_SECRET_KEY = re.compile(rf"(?i){_SECRET_NAME}")
_SECRET_OPTION = re.compile(r"(?i)--[\w-]*(?:api-key|apikey|token|password|passwd|secret)")


def _mask(m: re.Match[str]) -> str:
    return m.group("head") + (REDACTED if m.group("secret") else "")


def redact_url(url: str) -> str:
    """``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db`` (and the
    secret-named parameters of its query string)."""
    return redact_text(url)


def redact_text(text: str) -> str:
    """``text`` with every credential of the module docstring's list replaced by ``***``."""
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: m.group("head") + REDACTED + "@", text)
        text = _QUERY_KEY.sub(_mask, text)
    text = _NAMED.sub(_mask, text)
    return _BEARER.sub(_mask, text)


def secret_name(name: str) -> bool:
    """Whether a setting called ``name`` holds a credential (``api_key``, ``hf_token``, ...)."""
    return _SECRET_KEY.fullmatch(name) is not None


def redact_config(value: Any) -> Any:
    """A copy of a config (nested dicts and lists) with every secret-named string value
    replaced by ``***`` and every other string passed through :func:`redact_text`."""
    if isinstance(value, Mapping):
        return {
            k: REDACTED if isinstance(v, str) and v and isinstance(k, str) and secret_name(k) else redact_config(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_config(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def given_secrets(stored: Mapping[str, Any], given: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """``(dotted.field, value)`` for each string of ``given`` (a config as the command resolved
    it) whose redaction ``stored`` holds: the credentials a resumed run takes from the command."""
    found: list[tuple[str, str]] = []
    for key, value in stored.items():
        other = given.get(key)
        if isinstance(value, Mapping) and isinstance(other, Mapping):
            found += given_secrets(value, other, f"{prefix}{key}.")
        elif isinstance(value, str) and REDACTED in value and isinstance(other, str) and other != value:
            if redact_config({key: other})[key] == value:
                found.append((f"{prefix}{key}", other))
    return found


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line without its credentials: each word through :func:`redact_text`, and the
    word after a secret-named option (``--api-key KEY``)."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        out.append(REDACTED if hide_next else redact_text(word))
        hide_next = _SECRET_OPTION.fullmatch(word) is not None
    return out
