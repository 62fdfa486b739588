"""Files that belong to one database: its vector index and its model checkpoints live beside it.

A SQLite log ``dir/x.db`` keeps ``dir/x.lance`` (the LanceDB index) and ``dir/x.runs/<run>/``
(checkpoints), so moving or deleting the three together is safe and two databases never share
files, even when they hold runs with the same id. A server database (PostgreSQL) has no
directory: its files go to the current directory under a name keyed by the URL.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from sqlalchemy.engine import make_url

from diagevo.log import StoreError, sqlite_path
from diagevo.urls import without_password

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def beside_database(db_url: str, suffix: str) -> Path:
    """``sqlite:///dir/x.db`` -> ``dir/x<suffix>``; any other database ->
    ``./diagevo-<name>-<key><suffix>``, ``key`` a hash of the URL without its password."""
    try:
        u = make_url(db_url)
    except Exception:  # not a URL the store would accept either; still give a stable place
        return Path(f"diagevo-{_key(db_url)}{suffix}")
    try:
        path = sqlite_path(db_url)  # the backend says whether the database is a file
    except StoreError:
        path = None
    if path is not None:
        return path.with_suffix(suffix)
    name = re.sub(r"[^A-Za-z0-9_-]", "_", u.database or u.get_backend_name())[:40]
    return Path(f"diagevo-{name}-{_key(without_password(db_url))}{suffix}")


def run_dir(root: Path, run: str) -> Path:
    """``root/<run>`` for a run id that is a safe file name, else ``root/run-<hash>`` (run ids
    are free text: ``../x`` must not leave ``root``)."""
    return root / run_name(run)


def run_name(run: str) -> str:
    """The run id as one part of a path: itself when it is a safe file name, else ``run-<hash>``."""
    return run if _SAFE.fullmatch(run) and ".." not in run else f"run-{_key(run)}"


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]
