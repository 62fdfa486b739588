"""Reading external JSON and JSONL safely: the one place where outside text becomes Python data.

Every JSON document diagevo reads goes through :func:`loads` (a bounded depth and size, never a
``RecursionError``) and every JSONL text through :func:`split_lines` (``\\n`` only: U+2028,
U+2029 and U+0085 are characters of a text, not line ends, so whatever ``export`` wrote,
``ingest`` reads back). Problems raise :class:`~diagevo.errors.BadInput` with one short line.
"""

from __future__ import annotations

import errno
import io
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from diagevo.errors import BadInput
from diagevo.text.untrusted import shorten

MAX_DEPTH = 64
"""Deepest nesting accepted in one JSON document: far above anything diagevo writes, far below
Python's recursion limit and the 254 levels the log's canonical encoder accepts."""

MAX_CHARS = 256 * 2**20
"""Longest JSON document (one JSONL line, one model reply) in characters: long trajectories fit."""

MAX_ID_CHARS = 512
"""Longest id (run, question, failure, cause, node); an event id, which may be built of a run
id and others, may be four times as long."""

SHOWN = 60
"""Characters of an offending value shown in an error line."""

MAX_MESSAGE = 300
"""Longest error line built here."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def quoted(value: Any, limit: int = SHOWN) -> str:
    """``value`` as an error line quotes it: its ``repr``, of its start (with its size) for a long
    one."""
    if isinstance(value, (str, bytes)) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} {'characters' if isinstance(value, str) else 'bytes'})"
    if isinstance(value, (dict, list, tuple)):
        text = type(value).__name__ if not value else repr(value)
        return text if len(text) <= limit else f"{text[:limit]}… (a {type(value).__name__} of {len(value):,})"
    if type(value) is int and value.bit_length() > 14_000:  # past 4,300 digits its repr is Python's ValueError
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…"


def one_line(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` as an error line: on one line, at most ``limit`` characters."""
    return shorten(message, limit, fold=True)


def error_line(exc: BaseException) -> str:
    """The first line of an exception's message (a database driver's own, where SQLAlchemy
    wrapped it): what a one-line error quotes."""
    orig = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    return one_line(lines[0]) if lines else type(orig).__name__


def bad(where: str, reason: str) -> BadInput:
    """``BadInput('WHERE: REASON')``, one short line."""
    return BadInput(one_line(f"{where}: {reason}" if where else reason))


def depth(obj: Any) -> int:
    """Nesting depth of arrays and objects in ``obj`` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def loads(text: str | bytes, where: str = "", *, max_depth: int = MAX_DEPTH, max_chars: int = MAX_CHARS) -> Any:
    """Parse one JSON document with bounded depth and size; :class:`BadInput` naming ``where``.
    Strict JSON: no NaN or Infinity, no raw control characters in strings, no lone surrogates
    (none of these can be stored or written back by the event log)."""
    if len(text) > max_chars:
        raise bad(where, f"{len(text):,} characters, more than the limit of {max_chars:,}")
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc) or "recursion" in str(exc).lower():
            raise bad(where, f"JSON nested deeper than {max_depth} levels") from None
        raise bad(where, f"malformed JSON ({_json_reason(exc)})") from None
    # the walk is needed only where there are enough brackets (in strings or not) to nest so deep
    if isinstance(obj, (dict, list)) and _brackets(text) > max_depth and depth(obj) > max_depth:
        raise bad(where, f"JSON nested deeper than {max_depth} levels")
    return obj


def _brackets(text: str | bytes) -> int:
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def _json_reason(exc: orjson.JSONDecodeError) -> str:
    msg = str(exc.msg) if getattr(exc, "msg", None) else str(exc)
    return f"{msg.split(':')[0]} at column {exc.colno}" if getattr(exc, "colno", None) else msg.split(":")[0]


def loads_object(text: str | bytes, where: str = "", **limits: Any) -> dict[str, Any]:
    """:func:`loads`, and the document must be a JSON object."""
    obj = loads(text, where, **limits)
    if not isinstance(obj, dict):
        raise bad(where, f"expected a JSON object, not {_JSON_TYPES.get(type(obj), 'a value')}")
    return obj


_JSON_TYPES = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
}


# --- text and lines ---------------------------------------------------------------------------


def decode(raw: bytes, what: str) -> str:
    """``raw`` as UTF-8 (a leading BOM dropped); bad bytes are ``WHAT line N: not UTF-8``."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise bad(f"{what} line {line}", not_utf8(raw, exc.start)) from None


def not_utf8(raw: bytes | bytearray, at: int) -> str:
    """What a bytes' decoding as UTF-8 refused: the byte at offset ``at``."""
    return f"not UTF-8 text (byte 0x{raw[at : at + 1].hex()} at offset {at:,})"


def utf8_problem(value: str) -> str | None:
    """What keeps ``value`` from being UTF-8 text, or None. A byte that was not UTF-8 where the
    text came from (an argument, an environment variable: Python keeps it as a lone surrogate) is
    named as that byte."""
    if value.isascii():
        return None
    try:
        value.encode()
        return None
    except UnicodeEncodeError as exc:  # only a surrogate does not encode
        at = exc.start
    offset = len(value[:at].encode())
    ch = ord(value[at])
    if 0xDC80 <= ch <= 0xDCFF:
        return f"not UTF-8 text (byte 0x{ch - 0xDC00:02x} at offset {offset:,})"
    return f"not UTF-8 text (a lone surrogate U+{ch:04X} at byte offset {offset:,})"


def find_not_utf8(value: Any, where: str) -> BadInput | None:
    """The first string in ``value`` (nested in dicts and lists; keys too) that is not UTF-8,
    as :class:`BadInput` naming its place (``where.key.0``), or None."""
    try:
        orjson.dumps(value)  # in C: fails on a surrogate (and on what JSON cannot hold), else none is there
        return None
    except TypeError:  # orjson.JSONEncodeError: look where, in Python
        pass
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, str):
            problem = utf8_problem(v)
            if problem is not None:
                return bad(at, problem)
        elif isinstance(v, dict):
            for k, item in reversed(list(v.items())):
                key = str(k)
                problem = utf8_problem(key)
                if problem is not None:
                    return bad(f"{at}: a key", problem)
                if isinstance(item, (str, dict, list, tuple)):
                    stack.append((item, f"{at}.{key}" if at else key))
        elif isinstance(v, (list, tuple)):
            stack.extend((item, f"{at}.{i}") for i, item in reversed(list(enumerate(v))))
    return None


CHUNK = 1 << 20
"""Bytes read at a time from a file or a pipe."""


@contextmanager
def _binary(path: Path | str, name: str) -> Iterator[BinaryIO]:
    """The file (or stdin for ``-``) opened for reading bytes; a missing or unreadable one, or a
    directory, is :class:`BadInput`."""
    if str(path) == "-":
        stdin: Any = sys.stdin
        yield stdin.buffer if hasattr(stdin, "buffer") else io.BytesIO(stdin.read().encode("utf-8", "surrogateescape"))
        return
    p = Path(path)
    input_file(p)
    try:
        fh = p.open("rb")
    except FileNotFoundError:
        raise bad("", f"no such file: {name}") from None
    except OSError as exc:
        raise name_too_long(p, exc, "read") or bad("", f"cannot read {name}: {exc.strerror or exc}") from None
    with fh:
        yield fh


def input_file(path: Path | str, what: str = "a file") -> None:
    """Refuse, before anything is read or written, an input file that is not there, is a
    directory, or whose name the file system refuses; ``-`` (stdin) passes."""
    if str(path) == "-":
        return
    p = Path(path)
    try:
        if p.is_dir():
            raise bad("", f"{p} is a directory, not {what}")
        if not p.exists():
            raise bad("", f"no such file: {p}")
    except OSError as exc:
        raise name_too_long(p, exc, "read") or bad("", f"cannot read {p}: {exc.strerror or exc}") from None


def name_too_long(path: Path | str, exc: OSError, doing: str) -> BadInput | None:
    """The error for a path refused because a name in it is too long (a typo's 300 characters, a
    pasted text); None for any other ``exc``."""
    if exc.errno != errno.ENAMETOOLONG:
        return None
    parts = Path(path).parts or (str(path),)
    longest = max(len(part.encode("utf-8", "surrogateescape")) for part in parts)
    return bad(
        "",
        f"cannot {doing} {quoted(str(path), 80)}: a name in it of {longest:,} bytes, or the whole path, is longer "
        "than the file system takes (a name at most 255 bytes on most)",
    )


def _chunks(fh: BinaryIO, name: str) -> Iterator[bytes]:
    """The bytes of ``fh``, a chunk at a time (what a pipe has ready, at most :data:`CHUNK`)."""
    read = getattr(fh, "read1", fh.read)
    while True:
        try:
            chunk = read(CHUNK)
        except OSError as exc:
            raise bad("", f"cannot read {name}: {exc.strerror or exc}") from None
        if not chunk:
            return
        yield chunk


def read_text(path: Path | str, what: str | None = None, *, max_bytes: int = MAX_CHARS) -> str:
    """The UTF-8 text of a file, or of stdin for ``-``; reading stops past ``max_bytes``
    (``/dev/zero`` included), a :class:`BadInput`."""
    name = "stdin" if str(path) == "-" else str(path)
    held = bytearray()
    with _binary(path, name) as fh:
        for chunk in _chunks(fh, name):
            held += chunk
            if len(held) > max_bytes:
                raise bad("", f"{name} holds more than {max_bytes:,} bytes: stopped reading")
    return decode(bytes(held), what or name)


def file_lines(path: Path | str, what: str | None = None, *, max_line: int = MAX_CHARS) -> Iterator[str]:
    """Every line of a UTF-8 JSONL file, or of stdin for ``-``, read a chunk at a time and split
    on ``\\n`` only (a ``\\r`` before it dropped; blank lines kept, so the numbering is the
    file's). A line longer than ``max_line`` bytes (a pipe that never sends a line break) or a NUL
    byte is :class:`BadInput` naming the line, and reading stops there."""
    name = "stdin" if str(path) == "-" else str(path)
    label = what or name
    line = bytearray()
    no = 1
    with _binary(path, name) as fh:
        for chunk in _chunks(fh, name):
            nul = chunk.find(b"\x00")
            if nul >= 0:
                at = no + chunk.count(b"\n", 0, nul)
                raise bad(f"{label} line {at}", "a NUL byte, which no JSON text holds: stopped reading")
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                _grow(line, chunk[start:end], max_line, label, no)
                yield _decoded(line, label, no)
                line.clear()
                no, start = no + 1, end + 1
            _grow(line, chunk[start:], max_line, label, no)
    if line:
        yield _decoded(line, label, no)


def _grow(line: bytearray, part: bytes, max_line: int, label: str, no: int) -> None:
    if len(line) + len(part) > max_line:
        raise bad(f"{label} line {no}", f"longer than the limit of {max_line:,} bytes: stopped reading")
    line += part


def _decoded(raw: bytearray, label: str, no: int) -> str:
    try:
        text = raw.decode("utf-8-sig" if no == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise bad(f"{label} line {no}", not_utf8(raw, exc.start)) from None
    return text[:-1] if text.endswith("\r") else text


def split_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a JSONL text, split on ``\\n`` only (a ``\\r`` before it is
    dropped); blank lines are skipped but counted."""
    for no, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if line.strip(" \t\r"):
            yield no, line


# --- numbers ------------------------------------------------------------------------------------

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def decimal_number(text: str, what: str = "value") -> float:
    """``text`` as a finite number in ASCII decimal (``0.71``, ``-3``, ``1e-3``): not ``1_000``,
    other Unicode digits, ``inf`` or ``nan``, which Python's ``float`` would take."""
    value = text.strip()
    if len(value) <= 64 and _DECIMAL.fullmatch(value):
        number = float(value)
        if number not in (float("inf"), float("-inf")):
            return number
    raise bad("", f"{what} {quoted(text, 40)} is not a finite number in ASCII decimal (like 0.71, -3 or 1e-3)")


# --- ids and validation errors ----------------------------------------------------------------


def check_id(value: str, field: str = "id", max_chars: int = MAX_ID_CHARS) -> str:
    """An id is a non-empty string of at most :data:`MAX_ID_CHARS` characters without control
    characters (line breaks, C1 controls, U+2028/U+2029 included)."""
    if not value:
        raise ValueError(f"{field} is empty")
    if len(value) > max_chars:
        raise ValueError(f"{field} is {len(value):,} characters long (at most {max_chars}): {value[:40]!r}…")
    m = _CONTROL.search(value)
    if m:
        raise ValueError(f"{field} contains the control character U+{ord(m.group()):04X}: {quoted(value, 40)}")
    return value


def error_reason(err: Mapping[str, Any]) -> str:
    """One error of a pydantic validation as ``FIELD: message (got VALUE)``, one short line."""
    loc = ".".join(map(_field_name, err["loc"]))
    kind = err["type"]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind == "missing":
        return f"{loc} is missing"
    if kind == "extra_forbidden":
        return one_line(f"{loc} is not a known field")
    got = "" if kind == "value_error" else f" (got {quoted(err.get('input'))})"
    return one_line(f"{loc}: {msg}{got}" if loc else f"{msg}{got}")


def _field_name(part: Any) -> str:
    """A path element of a validation error: as is when short and plain, else shortened."""
    text = str(part)
    return text if len(text) <= 40 and not _CONTROL.search(text) else quoted(part, 40)


def config_power(config: Mapping[str, Any]) -> float:
    """``memory.frequency_power`` of a run's stored config: 1 (Eq. 1's p ∝ f) where it is absent,
    as in every run before the key, or not a number in [0, 1] (a config no writer stored)."""
    memory = config.get("memory")
    power = memory.get("frequency_power", 1.0) if isinstance(memory, Mapping) else 1.0
    ok = isinstance(power, (int, float)) and not isinstance(power, bool) and 0 <= power <= 1
    return float(power) if ok else 1.0


def config_k(config: Mapping[str, Any]) -> float | None:
    """The k of Eq. 1 a run's stored config carries (``config.k``, else ``config.memory.k``), or
    None: the one place k is looked up in a stored config (the fold must not load the config's
    schema)."""
    memory = config.get("memory")
    k = config.get("k", memory.get("k") if isinstance(memory, Mapping) else None)
    if not isinstance(k, (int, float)) or isinstance(k, bool) or k <= 0:
        return None
    return float(k)
