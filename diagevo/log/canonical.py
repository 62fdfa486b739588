"""Canonical JSON: the exact bytes the hash chain covers.

The definition is the standard library's encoder with sorted keys, compact separators,
non-ASCII kept and NaN refused. orjson writes the same bytes faster wherever the two
agree, which is everywhere but three places, each caught here and sent to the standard library:

- floats below 1e-4 in magnitude, which ``repr`` writes with an exponent (``1e-05``) and orjson
  otherwise (``1e-5``, ``0.00001``): found by a search of orjson's output;
- NaN and the infinities, which the standard library refuses and orjson writes as ``null``:
  an output with more nulls than the data has None at its top level is checked for them;
- subclasses of str, int, float, dict and list, dataclasses and datetimes: orjson hands them
  to ``default``, which refuses, and the standard library treats them as it always did.

Beyond that orjson also accepts enums and UUIDs (as their values), which the standard library
refuses. ``tests/test_canonical.py`` holds the two to the same bytes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["canonical_bytes", "canonical_json", "stdlib_canonical"]

_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
_dumps = orjson.dumps
# where orjson may have written a float that repr writes otherwise (also matches inside strings:
# that only costs the slower path)
_SUSPECT = re.compile(rb"\de-|0\.0000")
_UNSURE = frozenset({float, dict, list, tuple})


def _not_json(o: object) -> Any:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _make_stdlib() -> Callable[[Any], str]:
    """The standard library's C encoder without its per-call set-up."""
    encoder = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
    c_make = getattr(json.encoder, "c_make_encoder", None)
    if c_make is None:
        return encoder.encode
    # markers=None skips the cycle check (data is parsed JSON); a cycle ends in RecursionError
    iterencode = c_make(None, _not_json, json.encoder.encode_basestring, None, ":", ",", True, False, False)
    if "".join(iterencode({"b": [1.5, None, "é"], "a": True}, 0)) != encoder.encode({"a": True, "b": [1.5, None, "é"]}):
        return encoder.encode  # a C encoder with another signature: stay on the public API
    join = "".join

    def canonical(obj: Any) -> str:
        return join(iterencode(obj, 0))

    return canonical


stdlib_canonical = _make_stdlib()
"""The definition: raises TypeError, ValueError (NaN) or RecursionError on what is not JSON."""


def _finite(obj: Any) -> bool:
    """No NaN or infinity anywhere in ``obj``."""
    t = type(obj)
    if t is dict:
        values: Any = obj.values()
    elif t is list or t is tuple:
        values = obj
    else:
        return t is not float or math.isfinite(obj)
    if _UNSURE.isdisjoint(set(map(type, values))):  # C loops: no float and nothing nested
        return True
    return all(_finite(v) for v in values if type(v) in _UNSURE)


def _nulls_are_nones(obj: Any, out: bytes) -> bool:
    """Whether each ``null`` in orjson's output stands for a None, not a NaN or an infinity.

    Nulls = top-level Nones + nested Nones + non-finite floats + "null"s inside strings, so when
    the first term alone accounts for them all there is no NaN (C loops only)."""
    nulls = out.count(b"null")
    if nulls == 0 or (type(obj) is dict and nulls == list(obj.values()).count(None)):
        return True
    return _finite(obj)


def canonical_bytes(obj: Any) -> bytes:
    """Canonical JSON of ``obj`` as UTF-8; raises as ``stdlib_canonical`` does."""
    try:
        out = _dumps(obj, default=_not_json, option=_OPTIONS)
    except TypeError:  # see above; also ints beyond 64 bits, lone surrogates, deep nesting
        return stdlib_canonical(obj).encode()
    if not _nulls_are_nones(obj, out):
        return stdlib_canonical(obj).encode()
    if (out.count(b"e-") or out.count(b"0.0000")) and _SUSPECT.search(out) is not None:
        return stdlib_canonical(obj).encode()
    return out


def canonical_json(obj: Any) -> str:
    """Canonical JSON of ``obj`` as text."""
    return canonical_bytes(obj).decode()
