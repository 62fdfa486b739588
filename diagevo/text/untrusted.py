"""Untrusted text shown to a person: which characters are never passed on raw, and how they are
shown instead.

Texts in a log are written by models and by other people's files. Shown in a terminal, a
figure or a JSON line, these characters become a visible escape: C0 and C1 controls and DEL
(they move the cursor, set the clipboard, make links), bidirectional controls (they reorder
what is shown around them), U+2028, U+2029 and lone surrogates. A newline is kept only where a
text may span lines. A backslash is not doubled, so ``$\\frac{1}{2}$`` stays readable: the
escapes are for a reader, not a parser.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
"""Any character :func:`visible` replaces (a newline included)."""

# in JSON text, the same characters as JSON escapes (JSON already escapes C0 controls)
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")

_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}  # the escapes a reader knows best


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    cp = ord(ch)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


def _escape_but_newline(match: re.Match[str]) -> str:
    return "\n" if match.group() == "\n" else _escape(match)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def visible(text: str, *, newlines: bool = False) -> str:
    """``text`` with every character of the module docstring's list replaced by its escape
    (ESC as ``\\x1b``, RLO as ``\\u202e``); newlines kept when ``newlines``."""
    if not UNSAFE.search(text):
        return text
    return UNSAFE.sub(_escape_but_newline if newlines else _escape, text)


def shorten(text: str, limit: int, *, middle: bool = False, fold: bool = False) -> str:
    """diagevo's one way to shorten a text: with ``fold``, whitespace runs become one space; then,
    past ``limit`` characters, its end is cut (``…``), or with ``middle`` its middle, the cut named."""
    if fold:
        text = " ".join(text.split())
    if len(text) <= limit:
        return text
    if not middle:
        return text[: max(0, limit - 1)] + "…"
    half = max(1, (limit - 40) // 2)
    return f"{text[:half]} …[{len(text) - 2 * half:,} characters left out]… {text[-half:]}"


def json_visible(line: str) -> str:
    """A JSON text whose DEL, C1 controls, bidi controls, line separators and lone surrogates are
    written as ``\\uXXXX`` escapes: the same JSON value, safe to print."""
    if line.isascii() and "\x7f" not in line:  # the usual case, decided without a scan by the regex
        return line
    if not _JSON_UNSAFE.search(line):
        return line
    return _JSON_UNSAFE.sub(_json_escape, line)


def shell_word(arg: str) -> str:
    """``arg`` as one word of a command the user may copy: :func:`shlex.quote`, or, when it holds
    a character :func:`visible` escapes, bash's ``$'...'`` with the same escapes, so the command
    shown is the command that runs."""
    if not UNSAFE.search(arg):
        return shlex.quote(arg)
    return "$'" + visible(arg.replace("\\", "\\\\").replace("'", "\\'")) + "'"


def shell_join(args: Iterable[str]) -> str:
    """A command line of :func:`shell_word` words."""
    return " ".join(shell_word(a) for a in args)
