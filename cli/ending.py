"""How a command that does not end well is told, in one line: a refusal of diagevo's
(:class:`~diagevo.errors.DiagevoError`, a preflight's needs one line each), a usage error click
would print as a panel (an option misplaced, a value refused, a missing option with what the
command needs), an error of the machine (disk full, a path named), a bug with the file its
traceback went to, and Ctrl-C."""

from __future__ import annotations

import atexit
import errno
import os
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import typer

import diagevo
from diagevo.cli.common import program
from diagevo.cli.fixes import message_line, need_line
from diagevo.cli.safe import error_line, text
from diagevo.errors import BadInput, DiagevoError, NotReady
from diagevo.text.parsing import one_line, utf8_problem
from diagevo.text.redaction import redact_argv, redact_text
from diagevo.text.untrusted import shell_join
from diagevo.text.words import close_to, you_mean

# OSErrors that say something about the machine, not about diagevo: one line, like a DiagevoError
_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EACCES, errno.EPERM, errno.EROFS, errno.EDQUOT, errno.EMFILE})


def environmental(exc: OSError) -> bool:
    """An OSError about the machine (disk full, permissions) or about a path the user named."""
    named = exc.filename is not None and exc.errno in (
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.ENAMETOOLONG,
    )
    return exc.errno in _ENVIRONMENT_ERRNOS or named


def one_line_of(exc: BaseException) -> str:
    """The first line of the message, at most a few hundred characters (a huge bad value is not
    echoed), without credentials."""
    return message_line(exc, 390)  # with "error: ", at most 400


def error_lines(exc: DiagevoError) -> list[Any]:
    """An error as the user reads it: one line; a preflight refusal of several needs, one line
    under its first for each (what, why, and the fix spelled for this installation)."""
    if not isinstance(exc, NotReady):
        return [error_line(one_line_of(exc))]
    lines = [one_line(redact_text(need_line(c)), 379) for c in exc.needs]
    if len(lines) == 1:
        return [error_line(f"not ready: {lines[0]}")]
    head = error_line(f"not ready: {len(lines)} needs are missing (each with its fix)")
    return [head, *(text(f"  {line}") for line in lines)]


def internal_error(exc: BaseException) -> str:
    """A bug in diagevo: one line that names the exception and a file holding its traceback
    (the command line and the traceback without credentials)."""
    fd, path = tempfile.mkstemp(prefix="diagevo-traceback-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(f"diagevo {diagevo.__version__}\nargv: {redact_argv(sys.argv)!r}\n\n")
        fh.write(redact_text("".join(traceback.format_exception(exc))))
    return f"internal error: {type(exc).__name__}: {one_line_of(exc)} (traceback written to {path})"


def usage_error(exc: BaseException) -> str | None:
    """One line for a command-line usage error (bad option value, missing argument, ...), which
    click would print as a multi-line panel; None for any other exception."""
    if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
        return None
    moved = _misplaced_option(exc, sys.argv[1:])
    if moved is not None:
        return moved
    message = redact_text(" ".join(str(exc.format_message()).split()))
    ctx = getattr(exc, "ctx", None)
    unknown = type(exc).__name__ == "NoSuchOption"
    if unknown:  # the option alone and the nearest real one (click lists every near one)
        near = close_to(str(getattr(exc, "option_name", "")), getattr(exc, "possibilities", None) or (), n=1)
        message = redact_text(f"{getattr(exc, 'message', message)}{you_mean(near)}")
    # a value refused is answered by its rule; a missing or unknown option by what the command needs (not given)
    needs = _needs(ctx, sys.argv[1:] if unknown else ()) if ctx is not None and not _bad_value(exc) else ""
    if needs:
        message = message.rstrip(".")
    hint = f"{needs} (see '{ctx.command_path} --help')" if ctx is not None else ""
    return message + hint


def _bad_value(exc: BaseException) -> bool:
    """Whether click refused a value given (``--steps 0``), not a missing or unknown option (its
    ``MissingParameter`` is a ``BadParameter`` of no value; typer carries a click of its own)."""
    return isinstance(exc, typer.BadParameter) and type(exc).__name__ != "MissingParameter"


def _needs(ctx: Any, given: Sequence[str] = ()) -> str:
    """``; it needs --run A --run B``: the command's required options as its help shows them
    (their metavar), so that an unknown or missing option is answered with the form that works,
    not only the options that are spelled alike (click's guess for ``memory diff --to`` is ``--json``);
    those ``given`` on the command line left out (an unknown option is not answered with them)."""
    needed = [
        f"{p.opts[0]} {p.metavar or p.name.upper()}"
        for p in getattr(ctx.command, "params", ())
        if getattr(p, "required", False) and getattr(p, "opts", None) and p.opts[0].startswith("--")
        if not any(a == p.opts[0] or a.startswith(p.opts[0] + "=") for a in given)
    ]
    return f"; {ctx.command_path} needs {' '.join(needed)}" if needed else ""


def _misplaced_option(exc: BaseException, args: list[str]) -> str | None:
    """``diagevo --db URL runs``: an option of the command, given before it (where a group,
    which takes none of them, refuses it), as one line with the command line that has it after
    the command; None for any other usage error."""
    name, ctx = getattr(exc, "option_name", None), getattr(exc, "ctx", None)
    if not name or ctx is None or not hasattr(ctx.command, "commands"):
        return None
    at = next((i for i, a in enumerate(args) if a == name or a.startswith(name + "=")), None)
    if at is None:
        return None
    inline = "=" in args[at]
    for takes_value in (False,) if inline else (True, False):
        given = args[at : at + 2] if takes_value else args[at : at + 1]
        rest = args[at + len(given) :]
        command, words = ctx.command, []
        while rest and hasattr(command, "commands") and rest[0] in command.list_commands(ctx):  # the command after it
            words.append(rest[0])
            command = command.get_command(ctx, rest.pop(0))
        option = next((p for p in getattr(command, "params", ()) if name in getattr(p, "opts", ())), None)
        if words and option is not None and (inline or takes_value != getattr(option, "is_flag", False)):
            line = shell_join([program(), *args[:at], *words, *given, *rest])
            return redact_text(f"{name} is an option of the command, given after it: {line}")
    return None


def leave_now(code: int) -> None:
    """After Ctrl-C: the exit handlers (they stop the math-verify worker), then out without
    Python's teardown, which can spend seconds freeing torch and the rest after the message is shown.
    The store is closed already (the commands hold it in ``with``). Inside pytest, an ordinary exit."""
    if "pytest" in sys.modules:
        sys.exit(code)
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def check_utf8(args: list[str], env: Mapping[str, str]) -> None:
    """Command-line arguments and diagevo's environment variables that are not UTF-8 are named
    in diagevo's words (which argument or variable, which byte at which offset), before a
    command sees them."""
    for i, arg in enumerate(args, 1):
        problem = utf8_problem(arg)
        if problem is not None:
            before = args[i - 2] if i > 1 else ""
            named = f"option {before}" if before.startswith("--") and "=" not in before else f"argument {i}"
            option, eq, value = arg.partition("=")
            if arg.startswith("--") and eq and utf8_problem(option) is None:
                named, problem = f"option {option}", utf8_problem(value)
            raise BadInput(f"{named} of the command line: {problem}")
    for name in sorted(env):
        if name.startswith("DIAGEVO_"):
            problem = utf8_problem(env[name])
            if problem is not None:
                raise BadInput(f"environment variable {name}: {problem}")
