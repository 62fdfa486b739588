"""Files that belong to one database: its vector index and its model checkpoints live beside it.

A SQLite log ``dir/x.db`` keeps ``dir/x.lance`` (the LanceDB index) and ``dir/x.runs/<run>/``
(checkpoints), so moving or deleting the three together is safe and two databases never share
files, even when they hold runs with the same id. A server database (PostgreSQL) has no
directory: its files go to the current directory under a name keyed by the URL.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path

from sqlalchemy.engine import URL, make_url

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def beside_database(db_url: str, suffix: str) -> Path:
    """``sqlite:///dir/x.db`` -> ``dir/x<suffix>``; any other database ->
    ``./diagevo-<name>-<key><suffix>``, ``key`` a hash of the URL without its password."""
    try:
        u = make_url(db_url)
    except Exception:  # not a URL the store would accept either; still give a stable place
        return Path(f"diagevo-{_key(db_url)}{suffix}")
    from diagevo.events.store import StoreError, sqlite_path

    try:
        path = sqlite_path(db_url)  # the backend says whether the database is a file
    except StoreError:
        path = None
    if path is not None:
        return path.with_suffix(suffix)
    name = re.sub(r"[^A-Za-z0-9_-]", "_", u.database or u.get_backend_name())[:40]
    return Path(f"diagevo-{name}-{_key(without_password(u))}{suffix}")


def without_password(url: str | URL) -> str:
    """The URL with its password left out (not masked): a URL to show or to key files by."""
    u = make_url(url) if isinstance(url, str) else url
    bare = URL.create(u.drivername, u.username, None, u.host, u.port, u.database, u.query)
    return bare.render_as_string(hide_password=False)


def diagevo_command(db_url: str, *args: str) -> str:
    """A ``diagevo`` command for a message, runnable as printed: ``--db`` with the URL without its
    password (the CLI then spells the executable the user invoked and drops a default ``--db``)."""
    return shlex.join(["diagevo", *args, *(["--db", without_password(db_url)] if db_url else [])])


def run_dir(root: Path, run: str) -> Path:
    """``root/<run>`` for a run id that is a safe file name, else ``root/run-<hash>`` (run ids
    are free text: ``../x`` must not leave ``root``)."""
    name = run if _SAFE.fullmatch(run) and ".." not in run else f"run-{_key(run)}"
    return root / name


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]
