"""The ``diagevo`` command: a thin typer app over the library."""

from __future__ import annotations

import os
import sys

import typer

from cli.common import CLIError, Interrupted, err_console

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANCE_LOG", "error")  # lance logs table creation as a warning
os.environ.setdefault("LANCEDB_LOG", "error")  # ... and so does lancedb (its own variable)

app = typer.Typer(
    name="diagevo",
    help="DiagEvo: diagnosis-guided self-play around an event-sourced error-cause memory.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _register() -> None:
    from cli import diagnose, eval, fork, report, train
    from cli.db import db_app
    from cli.memory import memory_app
    from cli.rounds import round_app
    from cli.models import models_app

    app.add_typer(memory_app, name="memory")
    app.add_typer(round_app, name="round")
    app.add_typer(db_app, name="db", help="Database schema: upgrade, current revision.")
    app.add_typer(models_app, name="models", help="Local models for the hf backend (a tiny pair built here).")
    train.register(app)
    diagnose.register(app, memory_app)
    fork.register(memory_app)
    eval.register(app)
    report.register(app)


_register()


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors caused by input or environment: shown as one line, never a traceback."""
    from diagevo.events.schemas import InvalidEvent
    from diagevo.events.store import StoreError
    from diagevo.generation import GenerationError
    from diagevo.memory.deciders import DecisionError
    from diagevo.memory.fold import InvariantError

    return (CLIError, StoreError, InvariantError, DecisionError, InvalidEvent, GenerationError, ValueError, OSError)


def _usage_error(exc: BaseException) -> str | None:
    """One line for a command-line usage error (bad option value, missing argument, ...), which
    click would print as a multi-line panel; None for any other exception."""
    if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
        return None
    message = " ".join(str(exc.format_message()).split())
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return message + hint


def main() -> None:
    try:
        code = app(standalone_mode=False, prog_name="diagevo")
    except Interrupted as exc:
        err_console.print(str(exc), highlight=False, soft_wrap=True)
        sys.exit(130)
    except (KeyboardInterrupt, typer.Abort):
        err_console.print("interrupted")
        sys.exit(130)
    except _user_errors() as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        err_console.print(f"[red]error:[/] {message}", highlight=False, soft_wrap=True, markup=True)
        sys.exit(1)
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `diagevo memory` alone: the help
            text = exc.ctx.get_help()  # type: ignore[attr-defined]  # rich help prints itself, returns ""
            if text.strip():
                sys.stdout.write(text + "\n")
            sys.exit(0)
        usage = _usage_error(exc)
        if usage is None:
            raise
        err_console.print(f"[red]error:[/] {usage}", highlight=False, soft_wrap=True, markup=True)
        sys.exit(int(getattr(exc, "exit_code", 2)))
    if code == 130:  # typer turns Ctrl-C in a command into exit code 130
        err_console.print("interrupted")
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
