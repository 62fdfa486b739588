"""The errors a user can fix, declared in one place.

Everything diagevo raises on purpose for bad input, a conflicting writer, a missing thing or a
foreign database is a :class:`DiagevoError`; the CLI prints such an error as one line and exits
non-zero. Any other exception is a bug in diagevo and is shown as one.

``BadInput`` and ``NotFound`` also derive from ``ValueError`` / ``LookupError`` so that callers
written against the standard library's conventions keep working.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diagevo.fixes import Fix


@dataclass(frozen=True)
class Hint:
    """A command that fixes an error or takes the next step: its arguments after ``diagevo``,
    the database it acts on, and the Python call that does the same (``python``), for a caller
    of the library. The library never spells a command; the CLI renders a hint runnable as
    printed (the executable the user invoked, ``--db`` only where it is not the default, never
    a password)."""

    args: tuple[str, ...]
    db: str | None = None
    python: str | None = None

    def plain(self) -> str:
        """The Python call where the hint names one, else ``diagevo ARGS --db URL`` (without the
        URL's password): for library callers."""
        if self.python is not None:
            return self.python
        from diagevo.urls import without_password

        return shlex.join(["diagevo", *self.args, *(["--db", without_password(self.db)] if self.db else [])])


class DiagevoError(Exception):
    """An error the user can fix (input, environment, a concurrent writer): one line, and
    perhaps what fixes it, as data: a diagevo command (``hint``) or an installation or config
    step (``fix``). Where the message holds ``{command}`` the fix goes there, else after it in
    parentheses; the CLI spells it as a command line, a Python caller reads it in words (or as
    the Python call)."""

    def __init__(self, message: str = "", *, hint: Hint | None = None, fix: Fix | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        self.fix = fix

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def render(self, spell: Callable[[Hint], str] = Hint.plain, spell_fix: Callable[[Fix], str] | None = None) -> str:
        """The message with the hint's command spelled by ``spell``, or the fix by ``spell_fix``
        (default: in words)."""
        if self.hint is not None:
            command = f"`{spell(self.hint)}`"
        elif self.fix is not None:
            command = f"`{spell_fix(self.fix)}`" if spell_fix is not None else self.fix.plain()
        else:
            return self.message
        if "{command}" in self.message:
            return self.message.replace("{command}", command)
        return f"{self.message} ({command})"

    def __str__(self) -> str:
        return self.render()


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


__all__ = ["BadInput", "Conflict", "DiagevoError", "Hint", "NotADiagevoDatabase", "NotFound", "Unavailable"]
