"""Output files written safely, and labels that become parts of a path.

Every file a command writes for the user goes through :func:`replaced`: a new temporary file
with an unpredictable name beside the target, created with ``O_EXCL | O_NOFOLLOW`` (nothing
planted there, a symlink least of all, is opened), then moved over the target with
``os.replace`` (a reader sees the old file or the new one, never half of one). A target that is
a symbolic link, or anything but a regular file (``/dev/null``, a FIFO), is refused before
anything is written: a planted link would send the write elsewhere, and replacing a link the
user meant would lose it (standard output is the CLI's ``-o -``).
"""

from __future__ import annotations

import csv
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from diagevo.errors import Argument, BadInput, require_use
from diagevo.files.confined import not_a_link, owned_dir
from diagevo.text.parsing import name_too_long, quoted
from diagevo.text.untrusted import UNSAFE

_ATTEMPTS = 100


def _create(path: Path) -> tuple[int, Path]:
    """A new file beside ``path`` under a name nobody can predict, opened for writing."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_ATTEMPTS):
        tmp = path.with_name(f".{path.name[:200]}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp  # the mode a new file gets, less the umask
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _plain_target(path: Path) -> None:
    """Refuse an output path that is a symbolic link or exists as anything but a regular file."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        too_long = name_too_long(path, exc, "write")
        if too_long is None:
            raise
        raise too_long from None
    if stat.S_ISLNK(mode):
        raise BadInput(
            f"{path} is a symbolic link: an output is written neither through a link nor over one; "
            "name the file itself ('-' writes to standard output)"
        )
    if not stat.S_ISREG(mode):
        raise BadInput(f"{path} is not a regular file: an output replaces a file, nothing else")


@contextmanager
def replaced(path: Path, *, binary: bool = False) -> Iterator[IO[Any]]:
    """A file object whose content replaces ``path`` atomically when the block ends without an
    exception (text in UTF-8, or bytes with ``binary``)."""
    path = Path(path)
    _plain_target(path)
    fd, tmp = _create(path)
    try:
        fh: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_replacing(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through :func:`replaced`."""
    with replaced(path, binary=isinstance(data, bytes)) as fh:
        fh.write(data)


TABLE_SUFFIXES = (".csv", ".parquet")


def _table_suffix(path: Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise BadInput(f"{path}: cannot write a {suffix or 'suffix-less'} file; write a .csv or .parquet file")
    return suffix


def write_table(frame: Any, path: Path) -> None:
    """Write a polars frame to ``path`` as its suffix says (.csv or .parquet), atomically."""
    suffix = _table_suffix(path)
    with replaced(path, binary=True) as fh:
        if suffix == ".csv":
            frame.write_csv(fh)
        else:
            frame.write_parquet(fh)


def write_rows(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Write the rows' ``columns`` to ``path`` as its suffix says, atomically: .csv with the csv
    module, .parquet through polars (the ``data`` extra)."""
    if _table_suffix(path) == ".parquet":
        require_use(
            "a table written as .parquet (memory show, stats)",
            f"{path}: writing Parquet",
            hint="write a .csv file",
        )
        import polars as pl

        rows = list(rows)
        write_table(pl.DataFrame({c: [r.get(c) for r in rows] for c in columns}, strict=False), path)
        return
    with replaced(path) as fh:
        out = csv.DictWriter(fh, columns, extrasaction="ignore")
        out.writeheader()
        out.writerows(rows)


def plain_name(name: str, what: str) -> str:
    """``name`` when it can be one part of a path and nothing more (no separator, ``..``, control or
    bidi character, leading ``.`` or ``-``; 1-200 characters); else a :class:`BadInput` naming ``what``."""
    if (
        not 0 < len(name) <= 200
        or "/" in name
        or "\\" in name
        or ".." in name
        or name[0] in ".-"
        or UNSAFE.search(name)
    ):
        raise BadInput(
            f"{what} {quoted(name, 60)} is not a plain name (one part of a path: no '/', '\\', '..', control "
            "characters, "
            "leading '.' or '-', at most 200 characters)"
        )
    return name


def export_dir(out: Path) -> Path:
    """``out`` as the directory an export writes into, checked: named (``''`` and ``.`` are the
    current directory by accident), not a filesystem's root, no symbolic link, a directory or
    nothing yet."""
    if not str(out).strip() or out == Path(""):
        raise BadInput("the output directory needs a name (-o DIR; '' or . is not one)")
    if out.resolve() == Path(out.resolve().anchor):
        raise BadInput(f"{out} is the root of the file system: name a directory for the export (-o DIR)")
    if out.is_symlink():
        raise BadInput(f"{out} is a symbolic link: name the directory itself")
    if out.exists() and not out.is_dir():
        raise BadInput(f"{out} exists and is not a directory")
    return out


def refuse_filled(out: Path) -> None:
    """A build goes only where nothing is: ``out`` absent or an empty directory (never over a
    model, nor into a directory of other files)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadInput(
            f"{out} exists and is not empty: remove it, or name another directory with",
            Argument("out", "DIR"),
            about=out,
        )


@contextmanager
def building(out: Path) -> Iterator[Path]:
    """A temporary directory beside ``out`` to build into, removed when the block ends. A build
    that completes is renamed to ``out`` where ``out`` is absent or an empty directory (all or
    nothing: a half-built model or export never looks built), else each of its files is moved
    over its namesake in ``out`` (each whole; nothing else in ``out`` is touched). An error
    leaves ``out`` as it was."""
    out.parent.mkdir(parents=True, exist_ok=True)
    part = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        yield part
        if out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        if not out.exists():
            os.replace(part, out)
            return
        for path in sorted(part.iterdir()):
            os.replace(path, out / path.name)
    finally:
        if part.exists():
            shutil.rmtree(part, ignore_errors=True)


# --- what belongs to one database: one folder beside it ---------------------------------------------

DATABASE_FOLDER = ".diagevo"  # x.db -> x.diagevo/
# a part of the folder -> the sibling that held it before (x.lance, x.runs, x.leases)
FOLDER_PARTS = {"index.lance": ".lance", "runs": ".runs", "leases": ".leases", "tb": ".tb", "mlruns": ".mlruns"}


def database_part(base: Path, part: str, *, move: bool = True) -> Path:
    """``base.diagevo/<part>`` (``base``: the database file, or the name a server database's files go
    under), with the sibling an earlier layout used (``base.lance``, ``.runs``, ``.leases``) moved
    into it first, in one rename. A symbolic link, a file or a FIFO as the folder, the part or the
    old sibling is refused: diagevo writes lock files, checkpoints and its index there. Both the
    sibling and the part present: refused, naming both (nothing is merged or deleted).
    ``move=False`` (a dry run) only names the place."""
    folder = base.with_suffix(DATABASE_FOLDER)
    new = folder / part
    old = base.with_suffix(FOLDER_PARTS[part])
    if folder.parent.is_dir():  # else nothing is there (the database's own open says why)
        owned_dir(folder.parent, folder.name, part, create=False)  # no link, no file or FIFO in their place
    not_a_link(old)
    if old.is_dir() and move:
        if new.exists():
            raise BadInput(
                f"both {old} (an earlier layout) and {new} exist: move what {old} holds into {new}, then remove {old}"
            )
        folder.mkdir(exist_ok=True)
        os.rename(old, new)
    return new
