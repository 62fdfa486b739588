"""The errors a user can fix, declared in one place.

Everything diagevo raises on purpose for bad input, a conflicting writer, a missing thing or a
foreign database is a :class:`DiagevoError`; the CLI prints such an error as one line and exits
non-zero. Any other exception is a bug in diagevo and is shown as one.

``BadInput`` and ``NotFound`` also derive from ``ValueError`` / ``LookupError`` so that callers
written against the standard library's conventions keep working.
"""

from __future__ import annotations


class DiagevoError(Exception):
    """An error the user can fix (input, environment, a concurrent writer): one line."""


class BadInput(DiagevoError, ValueError):
    """Input that diagevo refuses: a malformed file or line, an invalid value, a log that breaks
    an invariant, a model reply that does not parse."""


class Conflict(DiagevoError):
    """The state moved on under the caller: another writer appended, or a step came out of
    order (recording into a committed round, promoting twice)."""


class NotFound(DiagevoError, LookupError):
    """A run, round, cause, file, model directory or database that does not exist."""


class NotADiagevoDatabase(DiagevoError):
    """A database that holds something other than a diagevo log (or an older revision)."""


class Unavailable(DiagevoError):
    """Something diagevo needs is not reachable or not installed: an endpoint that refuses
    connections, an optional dependency (vLLM, flash-attn) missing on this machine."""


__all__ = ["BadInput", "Conflict", "DiagevoError", "NotADiagevoDatabase", "NotFound", "Unavailable"]
