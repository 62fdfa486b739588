"""The ``diagevo`` command: a thin typer app over the library."""

from __future__ import annotations

import errno
import functools
import gc
import os
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from diagevo.cli.common import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Interrupted,
    acting_on,
    err_console,
    json_alone_on_stdout,
)
from diagevo.cli.safe import error_line, text
from diagevo.errors import DiagevoError
from diagevo.redaction import redact_argv, redact_text

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANCE_LOG", "error")  # lance logs table creation as a warning
os.environ.setdefault("LANCEDB_LOG", "error")  # ... and so does lancedb (its own variable)
# pydantic's first validator reads every installed distribution's entry points looking for
# plugins (typer turns them off around its own option validators, not around ours: the config
# models that verify, ingest and train build); the command runs none
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _show_version(value: bool) -> None:
    if value:
        from diagevo.api import version

        sys.stdout.write(f"diagevo {version()}\n")
        raise typer.Exit()


app = typer.Typer(
    name="diagevo",
    help="DiagEvo: diagnosis-guided self-play around an event-sourced error-cause memory.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", help="Print diagevo's version and exit.", is_eager=True, callback=_show_version)
    ] = False,
) -> None:
    """DiagEvo: diagnosis-guided self-play around an event-sourced error-cause memory."""


def _register() -> None:
    from diagevo.cli import config, diagnose, docs, doctor, fork, report, train, whatif
    from diagevo.cli import eval as evaluation
    from diagevo.cli.db import db_app
    from diagevo.cli.export import export_app
    from diagevo.cli.memory import memory_app
    from diagevo.cli.models import gpu_check, models_app
    from diagevo.cli.rounds import round_app
    from diagevo.cli.runs import runs_app
    from diagevo.cli.stats import register as register_stats

    app.add_typer(memory_app, name="memory")
    app.add_typer(round_app, name="round")
    app.add_typer(runs_app, name="runs")
    app.add_typer(db_app, name="db", help="Database schema: upgrade, current revision.")
    app.add_typer(export_app, name="export")
    app.add_typer(
        models_app, name="models", help="Local models for the hf backend (a tiny pair built here, SmolLM2 from PyPI)."
    )
    app.command("gpu-check")(gpu_check)
    train.register(app)
    config.register(app)
    register_stats(memory_app)
    diagnose.register(app, memory_app)
    fork.register(memory_app)
    whatif.register(memory_app)
    evaluation.register(app)
    report.register(app)
    doctor.register(app)
    docs.register(app)


_register()


# OSErrors that say something about the machine, not about diagevo: one line, like a DiagevoError
_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EACCES, errno.EPERM, errno.EROFS, errno.EDQUOT, errno.EMFILE})


def _environmental(exc: OSError) -> bool:
    """An OSError about the machine (disk full, permissions) or about a path the user named."""
    named = exc.filename is not None and exc.errno in (
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.ENAMETOOLONG,
    )
    return exc.errno in _ENVIRONMENT_ERRNOS or named


def _one_line(exc: BaseException) -> str:
    """The first line of the message, at most a few hundred characters (a huge bad value is not
    echoed), without credentials."""
    from diagevo.cli.fixes import message
    from diagevo.parsing import one_line

    said = redact_text(message(exc)).strip()
    return one_line(said.splitlines()[0], 390) if said else type(exc).__name__  # with "error: ", at most 400


def _error_lines(exc: DiagevoError) -> list[Any]:
    """An error as the user reads it: one line; a preflight refusal of several needs, one line
    under its first for each (what, why, and the fix spelled for this installation)."""
    from diagevo.parsing import one_line
    from diagevo.train.preflight import NotReady

    if not isinstance(exc, NotReady):
        return [error_line(_one_line(exc))]
    from diagevo.cli.fixes import need_line

    lines = [one_line(redact_text(need_line(c)), 379) for c in exc.needs]
    if len(lines) == 1:
        return [error_line(f"not ready: {lines[0]}")]
    head = error_line(f"not ready: {len(lines)} needs are missing (each with its fix)")
    return [head, *(text(f"  {line}") for line in lines)]


def _internal_error(exc: BaseException) -> str:
    """A bug in diagevo: one line that names the exception and a file holding its traceback
    (the command line and the traceback without credentials)."""
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="diagevo-traceback-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(f"diagevo {_version()}\nargv: {redact_argv(sys.argv)!r}\n\n")
        fh.write(redact_text("".join(traceback.format_exception(exc))))
    return f"internal error: {type(exc).__name__}: {_one_line(exc)} (traceback written to {path})"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("diagevo")
    except PackageNotFoundError:
        return "unknown"


def _usage_error(exc: BaseException) -> str | None:
    """One line for a command-line usage error (bad option value, missing argument, ...), which
    click would print as a multi-line panel; None for any other exception."""
    if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
        return None
    moved = _misplaced_option(exc, sys.argv[1:])
    if moved is not None:
        return moved
    message = redact_text(" ".join(str(exc.format_message()).split()))
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return message + hint


def _misplaced_option(exc: BaseException, args: list[str]) -> str | None:
    """``diagevo --db URL runs``: an option of the command, given before it (where a group,
    which takes none of them, refuses it), as one line with the command line that has it after
    the command; None for any other usage error."""
    from diagevo.cli.common import program
    from diagevo.untrusted import shell_join

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
        while rest and hasattr(command, "commands") and rest[0] in command.commands:  # the command after it
            words.append(rest[0])
            command = command.commands[rest.pop(0)]
        option = next((p for p in getattr(command, "params", ()) if name in getattr(p, "opts", ())), None)
        if words and option is not None and (inline or takes_value != getattr(option, "is_flag", False)):
            line = shell_join([program(), *args[:at], *words, *given, *rest])
            return redact_text(f"{name} is an option of the command, given after it: {line}")
    return None


INT64 = (-(2**63), 2**63 - 1)


def _bounded(process: Any, param: Any) -> Any:
    """A parameter's processing that refuses an integer beyond 64 bits (what a database column holds)."""

    def check(ctx: Any, value: Any) -> Any:
        value = process(ctx, value)
        for n in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(n, int) and not isinstance(n, bool) and not INT64[0] <= n <= INT64[1]:
                raise typer.BadParameter(
                    f"{str(n)[:40]} is out of range (at most {INT64[1]:,} in size)", ctx=ctx, param=param
                )
        return value

    return check


def _bound_integers(command: Any) -> Any:
    """Every option and argument of ``command`` and its subcommands refuses an integer beyond 64
    bits: ``--round 99999999999999999999`` is a usage error naming the option, not an overflow
    deep in a database driver."""
    for param in getattr(command, "params", ()):
        param.process_value = _bounded(param.process_value, param)
    for sub in getattr(command, "commands", {}).values():
        _bound_integers(sub)
    return command


def _leave_now(code: int) -> None:
    """After Ctrl-C: the exit handlers (they stop the math-verify worker), then out without
    Python's teardown, which can spend seconds freeing torch and the rest after the message is shown.
    The store is closed already (the commands hold it in ``with``). Inside pytest, an ordinary exit."""
    if "pytest" in sys.modules:
        sys.exit(code)
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reflow(help_text: str | None) -> str | None:
    """A docstring as help: each paragraph one line (the terminal wraps it; a docstring's own
    line breaks would stay in the command list), ````code```` as ```code```."""
    if not help_text:
        return help_text
    paragraphs = [" ".join(p.split()) for p in help_text.replace("``", "`").split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def _metavar(param: Any) -> str | None:
    """What help shows of a flag's or a repeatable option's value (click's ``metavar``, which typer
    shows when it is set): nothing for a flag, ``TEXT (repeatable)`` for an option given many
    times (the repeatable options that take another type name it where they are declared);
    None leaves typer's own display."""
    if getattr(param, "is_flag", False):
        return ""
    if getattr(param, "multiple", False):
        return "TEXT (repeatable)"
    return None


def _reflow_helps(command: Any) -> Any:
    """:func:`_reflow` on the help of ``command``, its options and arguments, and its subcommands;
    each parameter's value named by :func:`_metavar` unless it names its own; ``--json`` keeps
    stdout for the JSON alone (:func:`json_alone_on_stdout`)."""
    command.help = _reflow(command.help)
    help_option = command.get_help_option(command.context_class(command))  # made once, on first use
    for param in [*getattr(command, "params", ()), *([help_option] if help_option else [])]:
        if getattr(param, "help", None):
            param.help = _reflow(param.help)
        if param.metavar is None:
            param.metavar = _metavar(param)
        if "--json" in param.opts and command.callback is not None:
            command.callback = _json_alone(command.callback, param.name)
    for sub in getattr(command, "commands", {}).values():
        _reflow_helps(sub)
    return command


def _json_alone(run: Any, flag: str) -> Any:
    """``run`` (a command's callback) inside :func:`json_alone_on_stdout` when its ``--json``
    (the parameter ``flag``) is given."""

    @functools.wraps(run)
    def with_json_alone(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get(flag):
            return run(*args, **kwargs)
        with json_alone_on_stdout():
            return run(*args, **kwargs)

    return with_json_alone


def build() -> Any:
    """The click command tree of the app: every integer bounded, every help reflowed and ending
    with its example and page (:mod:`cli.examples`)."""
    from diagevo.cli import examples

    return examples.apply(_reflow_helps(_bound_integers(typer.main.get_command(app))))


def _check_utf8(args: list[str], env: Mapping[str, str]) -> None:
    """Command-line arguments and diagevo's environment variables that are not UTF-8 are named
    in diagevo's words (which argument or variable, which byte at which offset), before a
    command sees them."""
    from diagevo.errors import BadInput
    from diagevo.parsing import utf8_problem

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


def main() -> None:
    # what the imports built lives as long as the process: out of the collector's passes, which
    # a read of tens of thousands of events would otherwise repeat over it (Python's gc.freeze)
    gc.freeze()
    acting_on(None)
    try:
        _check_utf8(sys.argv[1:], os.environ)
        code = build()(standalone_mode=False, prog_name="diagevo")
    except Interrupted as exc:
        err_console.print(text(redact_text(str(exc))), soft_wrap=True)
        _leave_now(EXIT_INTERRUPTED)
    except (KeyboardInterrupt, typer.Abort):
        err_console.print("interrupted")
        _leave_now(EXIT_INTERRUPTED)
    except DiagevoError as exc:
        for line in _error_lines(exc):
            err_console.print(line, soft_wrap=True)
        sys.exit(int(getattr(exc, "exit_code", EXIT_ERROR)))  # a preflight refusal: 2
    except OSError as exc:
        if not _environmental(exc):
            err_console.print(text(_internal_error(exc)), soft_wrap=True)
            sys.exit(EXIT_INTERNAL)
        from diagevo.untrusted import shorten

        where = f"{shorten(str(exc.filename), 120)}: " if exc.filename else ""
        err_console.print(error_line(redact_text(where + (exc.strerror or _one_line(exc)).lower())), soft_wrap=True)
        sys.exit(EXIT_ERROR)
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `diagevo memory` alone: the help
            shown = exc.ctx.get_help()  # type: ignore[attr-defined]  # rich help prints itself, returns ""
            if shown.strip():
                sys.stdout.write(shown + "\n")
            sys.exit(0)
        usage = _usage_error(exc)
        if usage is None:  # not the user's doing: a bug, shown as one
            if os.environ.get("DIAGEVO_TRACEBACK"):
                raise
            err_console.print(text(_internal_error(exc)), soft_wrap=True)
            sys.exit(EXIT_INTERNAL)
        err_console.print(error_line(usage), soft_wrap=True)
        sys.exit(int(getattr(exc, "exit_code", EXIT_USAGE)))
    if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C in a command into exit code 130
        err_console.print("interrupted")
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
