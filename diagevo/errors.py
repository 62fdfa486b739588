"""The errors a user can fix, declared in one place, as a tree a caller catches by meaning.

Everything diagevo raises on purpose is a :class:`DiagevoError`; the CLI prints such an error as
one line and exits non-zero. Any other exception is a bug in diagevo and is shown as one. Below
the root, what to do about it:

- :class:`RetryLater`: nothing is wrong with the call; what it needs did not answer or was busy
  (an endpoint unreachable or overloaded, a run another process writes, a log another writer
  moved on): the same call later can succeed;
- :class:`BadServer`: a server answered, but not as diagevo needs (replies that do not parse):
  waiting does not help, the server or its model must change;
- :class:`BadInput`: the call itself must change: a value or type, a file, a config, a name that
  names nothing (:class:`NotFound`), a step out of the documented order;
- :class:`Unavailable`: this machine lacks something (a package, GPUs, a model directory).

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
    the database it acts on, and the Python call that does the same (``call``), for a caller
    of the library. The library never spells a command; the CLI renders a hint runnable as
    printed (the executable the user invoked, ``--db`` only where it is not the default, never
    a password)."""

    args: tuple[str, ...]
    db: str | None = None
    call: str | None = None
    """The Python call that does the same, where there is one (``diagevo.start_run(store, 'r',
    config)``): what an error raised to a Python caller suggests instead of the command."""

    def plain(self) -> str:
        """``diagevo ARGS --db URL`` (without the URL's password)."""
        from diagevo.urls import without_password

        return shlex.join(["diagevo", *self.args, *(["--db", without_password(self.db)] if self.db else [])])

    def python(self) -> str:
        """The fix for a Python caller: the Python call, else the command (:meth:`plain`)."""
        return self.call if self.call is not None else self.plain()


class DiagevoError(Exception):
    """An error the user can fix (input, environment, a concurrent writer): one line, and
    perhaps what fixes it, as data: a diagevo command (``hint``) or an installation or config
    step (``fix``). Where the message holds ``{command}`` the fix goes there, else after it in
    parentheses; the CLI spells it as a command line, a Python caller reads it in words (or as
    the Python call, ``Hint.call``)."""

    def __init__(self, message: str = "", *, hint: Hint | None = None, fix: Fix | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        self.fix = fix

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def render(self, spell: Callable[[Hint], str] = Hint.python, spell_fix: Callable[[Fix], str] | None = None) -> str:
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


class RetryLater(DiagevoError):
    """Nothing is wrong with the call or the replies: what it needs did not answer or was busy
    (an endpoint unreachable or overloaded, a run another process writes, a log another writer
    moved on). The same call later can succeed, and a retry stores nothing twice."""


class Conflict(RetryLater):
    """The log moved on under the caller: another writer appended first, holds the run, or
    changed the memory a decision read. Read again and retry."""


class EndpointUnreachable(RetryLater, ValueError):
    """An OpenAI-compatible endpoint did not answer at all: a refused connection, an unknown
    host, or silence past the probe's deadline (the message is one line)."""


class BadServer(DiagevoError):
    """A server answered, but not as diagevo needs: replies that do not parse or do not fit the
    stage's schema. Waiting does not help: the server, its model or its settings must change."""


class BadInput(DiagevoError, ValueError):
    """The call must change: a value or type diagevo refuses, a malformed file or line, a config
    field out of its range, a log that breaks an invariant, a step out of the documented order."""


class NotFound(BadInput, LookupError):
    """A run, round, cause, file, model directory or database that does not exist."""


class NotADiagevoDatabase(BadInput):
    """A database that holds something other than a diagevo log (or an older revision)."""


class Unavailable(DiagevoError):
    """This machine lacks something diagevo needs: an optional dependency (vLLM, flash-attn,
    the hf extra), GPUs, a model directory, disk."""


class DiagnosesFailed(DiagevoError):
    """More of a round's failures failed to diagnose than the run allows
    (``diagnosis.max_failed_share``), or every one of them did. Raised after the round's other
    decisions are appended; the failed ones stay undiagnosed, and diagnosing the round again asks
    only for them. ``failed`` of ``total`` failures; ``reasons``: (reason, count), the most
    frequent first. Raised as ``DiagnosticianDown`` (a :class:`RetryLater`) when every failed
    diagnosis went unanswered at the endpoint, else as ``DiagnosticianBroken`` (a
    :class:`BadServer`)."""

    def __init__(
        self, message: str, *, failed: int, total: int, reasons: tuple[tuple[str, int], ...], hint: Hint | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.failed, self.total, self.reasons = failed, total, reasons


class DiagnosticianDown(DiagnosesFailed, RetryLater):
    """Every failed diagnosis failed at the endpoint (timeouts, refused connections, HTTP 429 or
    5xx): the diagnostician did not answer. Diagnose the round again once it does."""


class DiagnosticianBroken(DiagnosesFailed, BadServer):
    """Failed diagnoses with replies that do not parse or a final refusal by the server: the
    diagnostician answers, wrongly. Fix the server or its model, then diagnose the round again."""


__all__ = [
    "BadInput",
    "BadServer",
    "Conflict",
    "DiagevoError",
    "DiagnosesFailed",
    "DiagnosticianBroken",
    "DiagnosticianDown",
    "EndpointUnreachable",
    "Hint",
    "NotADiagevoDatabase",
    "NotFound",
    "RetryLater",
    "Unavailable",
]
