"""What diagevo writes and deletes inside a folder it owns, and nowhere else.

A database ``x.db`` owns ``x.diagevo/`` (:mod:`diagevo.paths`); ``train.out_dir``, when set, is
a folder the user hands over for checkpoints. Below such a folder diagevo creates run folders,
checkpoints, TensorBoard and MLflow files, the vector index and lease files, and a prune
(``train.keep_checkpoints``) deletes checkpoints. A symbolic link planted anywhere below would
send those writes, and the prune's ``rmtree``, to a place nobody gave diagevo; a plain file, a
FIFO or a device where a folder should be would fail half way, after events were written. So
every path below the folder is walked with ``lstat`` (never following a link): a link, or
something that is not a folder where one should be, is refused in one line
(:class:`OutsideFolder`), before anything is written. A deletion must name a folder directly
inside the folder that holds it, reached without a link.

The folder itself is the user's to choose (a link there is the user's own); diagevo's database
folder refuses a link in its own place (:func:`diagevo.files.database_part`).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from diagevo.errors import BadInput


class OutsideFolder(BadInput):
    """A path below a folder diagevo owns that would lead outside it, or is not what belongs there."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a folder"


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
    """``top/part/...``, each part a folder that is no link (created when missing, ``top`` too,
    with ``create``); :class:`OutsideFolder` names the first part that is a link or not a folder.
    ``top`` is taken as given (the owned folder); the path returned is absolute and names the
    folder as reached through ``top``, without resolving links."""
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
    follow. A missing ``folder`` is fine; ``folder`` itself must be a folder."""
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
    """Delete ``path``, a folder (or file) directly inside ``folder``, reached without a link
    (``folder`` as :func:`owned_dir` returned it). Returns whether something was deleted; a path
    anywhere else, or a link, is refused and nothing is touched."""
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


__all__ = ["OutsideFolder", "no_links_below", "not_a_link", "owned_dir", "remove_owned"]
