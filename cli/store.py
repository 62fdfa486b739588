"""The CLI's way into a database: the store a command opens, the rows its readers passed over,
named once the command is done, and ``--db`` for the commands it prints.

Its own module, beside :mod:`diagevo.cli.common`: a command that opens a store imports the log,
the library's opening and the admission of rows with it; ``--help`` loads none of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from diagevo.api import open_store as open_library_store
from diagevo.cli.common import acting_on, err_console
from diagevo.cli.safe import text
from diagevo.errors import DiagevoError
from diagevo.log import Recorder, sqlite_path
from diagevo.text.urls import parse_db_url, resolve_db_url, without_password
from diagevo.views.admission import admission


@contextmanager
def open_store(
    db: str | None,
    *,
    create: bool = False,
    keep_if_refused: bool = True,
    readonly: bool = False,
    name_passed: bool = True,
) -> Iterator[Recorder]:
    """The event store at ``db``, opened by the library's one :func:`diagevo.api.open_store`, for
    a command. Read commands leave ``create`` off, so a missing SQLite file is ``no database at
    PATH`` instead of a new empty one; writers (train, ingest, diagnose) set it.
    Commands that only read set ``readonly``: SQLite is opened read-only (a read-only mount works).
    With ``keep_if_refused=False``, a SQLite file this call created is removed again when the
    command refuses its input (a DiagevoError): a refusal leaves nothing behind. Once the command
    is done, each row its readers passed over is named on stderr, a line each (``name_passed``
    off: the command names them itself, as ``memory verify`` does). No stored row stops a reader
    but one the log cannot go on past, told by the log's one typed error
    (:class:`~diagevo.log.errors.UnreadableRowError`, a refusal of one line like any other); any
    other exception is the bug it is, never blamed on the log."""
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
    else:
        if name_passed:
            name_passed_over(store)
    finally:
        store.close()


def name_passed_over(store: Recorder) -> None:
    """Each row of the runs the command read that the rules refuse (their admission,
    :func:`~diagevo.views.admission.admission`), a line on stderr (run, seq, why); and each row
    of no run it met listing the runs (a run id that is no text: :attr:`~diagevo.log.EventReader.runless`)."""
    for run in list(store.read_runs):
        for line in admission(store, run).lines():
            say_passed(line)
    for seq, why in store.runless.items():
        say_passed(f"seq {seq}: passed over: {why} (a row of no run)")


def say_passed(line: str) -> None:
    """A row passed over (:func:`~diagevo.results.runs.passed_line`), a line on stderr."""
    err_console.print(text(line), soft_wrap=True)


def db_args(explicit: str | None, db_url: str) -> tuple[list[str], str | None]:
    """``--db`` for the commands printed after a run, and a note when the URL's password is left
    out. Without an explicit URL, the next command finds the same database ($DIAGEVO_DB or the
    default) on its own."""
    if explicit is None:
        return [], None
    if parse_db_url(db_url).password is None:  # the store has parsed this URL already
        return ["--db", db_url], None
    return [
        "--db",
        without_password(db_url),
    ], "the password is not printed: libpq reads it from PGPASSWORD or ~/.pgpass"
