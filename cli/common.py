"""Shared CLI plumbing: options, opening the store, one-line errors, JSON output."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Annotated, Any, TextIO
from urllib.parse import urlsplit, urlunsplit

import typer

from diagevo.cli.safe import json_text, make_console
from diagevo.errors import DiagevoError
from diagevo.text.untrusted import shell_join
from diagevo.text.urls import resolve_db_url, without_password

console = make_console()
err_console = make_console(stderr=True)

DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="Database URL (default: $DIAGEVO_DB, else sqlite:///diagevo.db)."),
]
RunOpt = Annotated[str | None, typer.Option("--run", help="Run id (default: the latest run).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
WideOpt = Annotated[
    bool, typer.Option("--wide", help="Every column, however wide the terminal (default: those that fit).")
]


def round_from_0(value: int | None) -> int | None:
    """The callback of a ``--round`` that names any round of a run: rounds are numbered from 0
    (``run.started``, M_0)."""
    if value is not None and value < 0:
        raise typer.BadParameter(f"{value}: rounds start at 0")
    return value


EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 1, 2, 70, 130
EXIT_CODES: dict[int, str] = {
    0: "done (and, for memory verify, nothing found)",
    EXIT_ERROR: (
        "an error you can fix (any DiagevoError below, a full disk, a path you may not write): one line on stderr"
    ),
    EXIT_USAGE: (
        "a bad command line (unknown option, bad option value, missing argument): one line, and where its --help is;"
        " or a preflight refusal (train, eval, diagnose): what the config needs is not here (a package, a model"
        " directory, GPUs, the diagnostician, disk), one line naming the fix, nothing created"
    ),
    EXIT_INTERNAL: "a bug in diagevo: one line naming a file that holds the traceback (without credentials)",
    EXIT_INTERRUPTED: "Ctrl-C: where it stopped, and the command that continues (train --resume)",
}
"""The exit codes of ``diagevo`` (the documentation's errors page is generated from this table)."""


class CLIError(DiagevoError):
    """A user-facing error: printed as one line, exit code 1."""


class Interrupted(CLIError):
    """Ctrl-C, with a one-line account of where and how to go on: exit code 130."""


_JSON_OUT: list[TextIO] = []  # the stdout each running --json command was given, innermost last


@contextmanager
def json_alone_on_stdout() -> Iterator[None]:
    """A ``--json`` command's run: stdout carries the JSON alone. Whatever else writes to stdout
    meanwhile (a library's warning: DeepSpeed's logger, when it is installed, on its first
    import) goes to stderr, and :func:`emit_json` writes to the stdout the command was given."""
    _JSON_OUT.append(sys.stdout)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _JSON_OUT.pop()


def json_stdout() -> TextIO:
    return _JSON_OUT[-1] if _JSON_OUT else sys.stdout


def emit_json(obj: Any) -> None:
    """One JSON document a line on stdout, its texts escaped as :func:`cli.safe.json_text` says."""
    json_stdout().write(json_text(obj) + "\n")


def program() -> str:
    """How to run diagevo again from the user's shell: ``diagevo`` when that is what PATH finds,
    else the entry point that is running (``.venv/bin/diagevo`` after ``make train``)."""
    exe = Path(sys.argv[0])
    if exe.name != "diagevo" or not exe.is_file():
        return "diagevo"  # run as `python -m diagevo.cli.app` or from a test
    found = shutil.which("diagevo")
    if found is not None and Path(found).resolve() == exe.resolve():
        return "diagevo"
    here = Path.cwd().resolve()
    target = exe.resolve() if exe.is_absolute() else (here / exe)
    return os.path.relpath(target, here) if target.is_relative_to(here) else str(target)


def spell(*args: str, db: str | None = None) -> str:
    """``diagevo ARGS`` runnable as printed: the executable the user invoked (when ``diagevo`` on
    PATH is not it), and ``--db`` only where the command would not find the database ``db`` on
    its own ($DIAGEVO_DB, else the default), never with a password."""
    where: list[str] = []
    if db:
        bare = without_password(db)
        try:
            default = without_password(resolve_db_url(None))
        except Exception:  # noqa: BLE001 - a $DIAGEVO_DB that is no URL: keep every --db
            default = None
        if bare != default:
            where = ["--db", bare]
    return shell_join([program(), *args, *where])


@contextmanager
def resumable() -> Iterator[None]:
    """Ctrl-C in a command that the same command line resumes (``eval``: its outputs are saved
    per batch under --out and skipped when there, ``resumed`` in its results; ``diagnose``: the
    failures decided are skipped): one line with that command line."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted: continue with `{shell_join([program(), *without_passwords(sys.argv[1:])])}`"
        ) from None


def without_passwords(args: list[str]) -> list[str]:
    """The command's words with the password of a --db or --url URL left out (never printed)."""
    out: list[str] = []
    for i, word in enumerate(args):
        flag = args[i - 1] if i else ""
        if flag == "--db":
            word = without_password(word)
        elif flag == "--url":
            parts = urlsplit(word)
            if parts.password is not None:
                host = parts.hostname or ""
                netloc = f"{parts.username}@{host}" + (f":{parts.port}" if parts.port else "")
                word = urlunsplit(parts._replace(netloc=netloc))
        out.append(word)
    return out


_acting_on: list[str | None] = [None]


def acting_on(url: str | None) -> None:
    """The database this command acts on (None: none yet), which the commands its errors name act on."""
    _acting_on[0] = url


def database() -> str | None:
    return _acting_on[0]
