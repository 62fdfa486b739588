"""Shared CLI plumbing: options, opening the store, one-line errors, JSON output."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO
from urllib.parse import urlsplit, urlunsplit

import typer

from diagevo.cli.safe import json_text, make_console, text
from diagevo.errors import DiagevoError
from diagevo.text.untrusted import shell_join
from diagevo.text.urls import resolve_db_url, without_password

if TYPE_CHECKING:
    from diagevo.log import Recorder

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


@contextmanager
def open_store(
    db: str | None,
    *,
    create: bool = False,
    keep_if_refused: bool = True,
    readonly: bool = False,
    name_passed: bool = True,
) -> Iterator[Any]:
    """The event store at ``db``, opened by the library's one :func:`diagevo.api.open_store`, for
    a command. Read commands leave ``create`` off, so a missing SQLite file is ``no database at
    PATH`` instead of a new empty one; writers (train, ingest, diagnose) set it.
    Commands that only read set ``readonly``: SQLite is opened read-only (a read-only mount works).
    With ``keep_if_refused=False``, a SQLite file this call created is removed again when the
    command refuses its input (a DiagevoError): a refusal leaves nothing behind. Once the command
    is done, each row its readers passed over is named on stderr, a line each (``name_passed``
    off: the command names them itself, as ``memory verify`` does)."""
    from diagevo.api import open_store as open_library_store
    from diagevo.log import sqlite_path

    url = resolve_db_url(db)
    acting_on(url)
    path = sqlite_path(url)
    fresh = create and not keep_if_refused and path is not None and not path.exists()
    store = open_library_store(url, create=create, readonly=readonly)
    try:
        yield store
    except DiagevoError:
        store.close()
        if fresh and path is not None:
            for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                leftover.unlink(missing_ok=True)
        raise
    except (TypeError, KeyError, AttributeError, IndexError, ValueError) as exc:
        raise _bad_row(store, exc) from exc
    else:
        if name_passed:
            name_passed_over(store)
    finally:
        store.close()


def name_passed_over(store: Recorder) -> None:
    """Each row of the runs the command read that the rules refuse (their admission,
    :func:`~diagevo.views.admission.admission`), a line on stderr (run, seq, why)."""
    from diagevo.views.admission import admission

    for run in list(store.read_runs):
        for line in admission(store, run).lines():
            say_passed(line)


def say_passed(line: str) -> None:
    """A row passed over (:func:`~diagevo.results.runs.passed_line`), a line on stderr."""
    err_console.print(text(line), soft_wrap=True)


def _bad_row(store: Recorder, exc: Exception) -> Exception:
    """What a command that failed on what it read says: the event its readers cannot read (a
    row written raw, past the checks), in one line, when the log holds one; else the error as
    it was (a bug, reported as one)."""
    from diagevo.views.verify import first_out_of_shape

    try:
        found = first_out_of_shape(store, list(store.read_runs) or None)
    except Exception:  # noqa: BLE001 - the search must not hide the error it explains
        return exc
    if found is None:
        return exc
    return CLIError(f"{found} (memory verify names every such event)")


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


def db_args(explicit: str | None, db_url: str) -> tuple[list[str], str | None]:
    """``--db`` for the commands printed after a run, and a note when the URL's password is left
    out. Without an explicit URL, the next command finds the same database ($DIAGEVO_DB or the
    default) on its own."""
    if explicit is None:
        return [], None
    from sqlalchemy.engine import make_url

    if make_url(db_url).password is None:  # the store has parsed this URL already
        return ["--db", db_url], None
    return [
        "--db",
        without_password(db_url),
    ], "the password is not printed: libpq reads it from PGPASSWORD or ~/.pgpass"
