"""What diagevo writes and deletes inside a folder it owns, and nowhere else.

A database ``x.db`` owns ``x.diagevo/``; ``train.out_dir``, when set, is a folder the user hands
over for checkpoints. A symbolic link planted below such a folder would send diagevo's writes,
and a prune's ``rmtree``, to a place nobody gave it; a file or a FIFO where a folder should be
would fail half way, after events were written. So every path below the folder is walked with
``lstat`` (never following a link) and such a path is refused (:class:`OutsideFolder`) before
anything is written. The folder itself is the user's to choose (a link there is the user's own).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

from diagevo.errors import BadInput


class OutsideFolder(BadInput):
    """A path below a folder diagevo owns that would lead outside it, or is not what belongs there."""


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISREG, "a file"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a folder")


def _refusal(path: Path, mode: int, want: str) -> OutsideFolder:
    if stat.S_ISLNK(mode):
        return OutsideFolder(
            f"{path} is a symbolic link: diagevo writes only inside its own folder and follows no link there; "
            "remove the link (move what it points to into its place if you want to keep it)"
        )
    return OutsideFolder(f"{path} is {_kind(mode)}, not {want}: diagevo keeps {want} there; move it away")


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # nothing there (or a file on the way: said elsewhere)
        return None


def owned_dir(top: Path, *parts: str, create: bool = True) -> Path:
    """``top/part/...``, each part a folder that is no link (created when missing, with
    ``create``); the path returned is absolute, as reached through ``top``, links not resolved."""
    path = Path(os.path.abspath(top))
    if path.exists() and not path.is_dir():  # the folder itself may be a link: the user's own
        raise _refusal(path, os.stat(path).st_mode, "a folder")
    if create:
        path.mkdir(parents=True, exist_ok=True)
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\x00" in part:
            raise OutsideFolder(f"{part!r} is not a folder name below {path}")
        path = path / part
        st = _lstat(path)
        if st is None and create:
            try:
                path.mkdir()
            except FileExistsError:  # made meanwhile: look again below
                pass
            st = _lstat(path)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            raise _refusal(path, st.st_mode, "a folder")
    return path


def no_links_below(folder: Path, depth: int = 2) -> None:
    """Refuse a link (or a FIFO, socket or device) in ``folder`` and in its folders down to
    ``depth`` levels: what a library that writes a tree there (LanceDB, TensorBoard, MLflow) would
    follow."""
    st = _lstat(folder)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise _refusal(folder, st.st_mode, "a folder")
    if depth <= 0:
        return
    with os.scandir(folder) as entries:
        for entry in entries:
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                no_links_below(Path(entry.path), depth - 1)
            elif not stat.S_ISREG(mode):
                raise _refusal(Path(entry.path), mode, "a file or a folder")


def not_a_link(path: Path) -> None:
    """Refuse ``path`` when it is a symbolic link."""
    st = _lstat(path)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise _refusal(path, st.st_mode, "a folder")


def remove_owned(folder: Path, path: Path) -> bool:
    """Delete ``path``, directly inside ``folder`` and reached without a link; whether something
    was deleted. Anything else is refused and nothing is touched."""
    folder = Path(os.path.abspath(folder))
    path = Path(os.path.abspath(path))
    if path.parent != folder:
        raise OutsideFolder(f"{path} is not directly inside {folder}: diagevo deletes nothing else")
    st = _lstat(path)
    if st is None:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise _refusal(path, st.st_mode, "a checkpoint folder")
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)  # fd-based: a link inside is removed, never followed
    else:
        path.unlink(missing_ok=True)
    return True


# --- checkpoints a log names ---------------------------------------------------------------------

CHECKPOINT_NAME = re.compile(r"round[0-9]{3,9}-[a-z][a-z0-9_]{0,39}")
"""The names the training loop gives its checkpoints: ``roundNNN-phase`` (``round003-solver``)."""


def checkpoint_name(path: object) -> str | None:
    """The checkpoint name a ``checkpoint.written`` path gives, or None. A path is stored as the
    name itself; a log written before that stored the absolute path, whose last part is taken: the
    run's folder is where a checkpoint lies, wherever the log was written."""
    if not isinstance(path, str) or "\x00" in path or "\\" in path:
        return None
    if CHECKPOINT_NAME.fullmatch(path):
        return path
    if path.startswith("/"):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return name if CHECKPOINT_NAME.fullmatch(name) else None
    return None


def checkpoint_problem(path: object) -> str | None:
    """Why a ``checkpoint.written`` path is refused, or None (see :func:`checkpoint_name`)."""
    if checkpoint_name(path) is not None:
        return None
    shown = path[:80] if isinstance(path, str) else type(path).__name__
    return (
        f"checkpoint path {shown!r} is not a checkpoint name of the run's folder "
        "(roundNNN-phase, as the training loop names them, e.g. round003-solver)"
    )


def checkpoint_dir(folders: list[Path], path: str) -> Path:
    """The checkpoint ``path`` (from a log) names, found by its name only in the first of
    ``folders`` (the run's, then its fork sources') that holds it, never through a link.
    FileNotFoundError naming the folders when none holds it."""
    problem = checkpoint_problem(path)
    if problem is not None:
        raise OutsideFolder(problem)
    name = checkpoint_name(path)
    assert name is not None
    for folder in folders:
        where = folder / name
        st = _lstat(where)
        if st is None:
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise _refusal(where, st.st_mode, "a checkpoint folder")
        no_links_below(where)
        return where
    raise FileNotFoundError(f"checkpoint {name} is in none of {', '.join(str(f) for f in folders)}")
