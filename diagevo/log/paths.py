"""Files that belong to one database live in one folder beside it: a SQLite log ``dir/x.db``
keeps ``dir/x.diagevo/`` (the vector index, run checkpoints, writer leases), so moving or
deleting the two together is safe and two databases never share files. A server database has no
directory: its folder goes to the current directory under a name keyed by the URL.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from diagevo.files.written import FOLDER_PARTS, database_part
from diagevo.log import StoreError, sqlite_path
from diagevo.log.backends import normalise_url
from diagevo.text.calls import validated
from diagevo.text.urls import without_password

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


# the suffix callers name a part by (the sibling it was before) -> the part of the folder
_PARTS = {suffix: part for part, suffix in FOLDER_PARTS.items()}


@validated
def beside_database(db_url: str, suffix: str, *, move: bool = True) -> Path:
    """The part ``suffix`` names (``.lance``, ``.runs``, ``.leases``) of the database's folder:
    ``sqlite:///dir/x.db`` -> ``dir/x.diagevo/<part>``, any other database ->
    ``./diagevo-<name>-<key>.diagevo/<part>``, ``key`` a hash of the URL without its password."""
    return database_part(_base(db_url), _PARTS[suffix], move=move)


def _base(db_url: str) -> Path:
    try:
        u = normalise_url(db_url)
    except (StoreError, ValueError):  # not a URL the store would accept either; still give a stable place
        return Path(f"diagevo-{_key(db_url)}")
    try:
        path = sqlite_path(db_url)  # the backend says whether the database is a file
    except StoreError:
        path = None
    if path is not None:
        return path
    name = re.sub(r"[^A-Za-z0-9_-]", "_", u.database or u.get_backend_name())[:40]
    return Path(f"diagevo-{name}-{_key(without_password(db_url))}")


@validated
def run_dir(root: Path | str, run: str) -> Path:
    """``root/<run>`` for a run id that is a safe file name, else ``root/run-<hash>`` (run ids
    are free text: ``../x`` must not leave ``root``)."""
    return Path(root) / run_name(run)


def run_name(run: str) -> str:
    """The run id as one part of a path: itself when it is a safe file name, else ``run-<hash>``."""
    return run if _SAFE.fullmatch(run) and ".." not in run else f"run-{_key(run)}"


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]
