"""Read commands open SQLite read-only (``mode=ro``; ``immutable=1`` where the directory is not
writable), so a log on a read-only mount or in a folder one may not write to can be read, and a
read never changes the file. As root, permission bits are enforced by running the command with
the capabilities that bypass them dropped (``setpriv``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from diagevo.log import StoreError, open_log
from diagevo.views.caches import refresh as refresh_snapshots
from tests.logs import Log

ROOT = Path(__file__).resolve().parent.parent
_DROP = ["-dac_override,-dac_read_search,-fowner"]


def _as_plain_user() -> list[str]:
    """A command prefix under which file permission bits apply (empty unless we are root)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permission bits cannot be enforced")
    return ["setpriv", "--bounding-set", *_DROP, "--inh-caps", *_DROP]


def _log_file(directory: Path) -> tuple[str, Path]:
    path = directory / "runs.db"
    url = f"sqlite:///{path}"
    with open_log(url) as store:
        log = Log("a").node("N1").cause("C1", "N1").question("q1", 0.5, active="C1").commit(retained=1)
        store.append(log.events())
        refresh_snapshots(store, "a")
    assert not (directory / "runs.db-wal").exists()  # a clean close leaves the file alone
    return url, path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [*_as_plain_user(), sys.executable, "-m", "diagevo.cli.app", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


READS = [
    ["memory", "stats"],
    ["memory", "replay", "--round", "1"],
    ["memory", "show"],
    ["memory", "why", "C1"],
    ["memory", "events"],
    ["memory", "export"],
    ["memory", "verify"],
    ["db", "current"],
]


@pytest.mark.slow
@pytest.mark.parametrize("dir_writable", [False, True], ids=["read-only dir", "read-only file"])
def test_read_commands_work_on_a_read_only_file(tmp_path: Path, dir_writable: bool) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    url, path = _log_file(folder)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    path.chmod(0o444)
    if not dir_writable:
        folder.chmod(0o555)
    try:
        denied = subprocess.run([*_as_plain_user(), "sh", "-c", f"echo x >> {path}"], capture_output=True)
        assert denied.returncode != 0  # the permission bits really apply to the commands below
        for args in READS:
            done = _cli(*args, "--db", url)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr
        # a writer is refused with one line, and nothing changed
        done = _cli("memory", "ingest", "-", "--db", url)
        assert done.returncode != 0 and "Traceback" not in done.stderr
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    leftovers = sorted(p.name for p in folder.iterdir())
    assert leftovers == ["runs.db"] or dir_writable, leftovers


def test_a_read_only_store_refuses_writes_even_for_root(tmp_path: Path) -> None:
    url, path = _log_file(tmp_path)
    before = path.read_bytes()
    with open_log(url, readonly=True) as store:
        assert store.runs() == ["a"]
        with pytest.raises(StoreError, match="readonly"):
            store.append(Log("b").events())
    assert path.read_bytes() == before


def test_a_read_only_open_never_creates_a_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no database at"):
        open_log(f"sqlite:///{tmp_path / 'none.db'}", readonly=True)
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_open_of_a_live_wal_database_sees_the_latest_commit(tmp_path: Path) -> None:
    """While a writer holds the file open (its -wal and -shm exist), a reader is not immutable:
    it reads through the WAL and sees every committed event."""
    url, _ = _log_file(tmp_path)
    with open_log(url) as writer:
        writer.append(Log("b").events())
        with open_log(url, readonly=True) as reader:
            assert reader.runs() == ["a", "b"]


def test_a_plain_read_opens_the_file_directly_and_reads_the_same(tmp_path: Path) -> None:
    """A read of ``sqlite:///FILE`` at the head revision opens the file with sqlite3 alone (no
    SQLAlchemy: a fifth of a read command's time); it reads exactly what the full path reads."""
    from diagevo.log.sqlite import _Direct
    from diagevo.views.stats import round_stats as stored_round_stats
    from diagevo.views.verify import verify_run

    url, _ = _log_file(tmp_path)
    with open_log(url) as full, open_log(url, readonly=True) as direct:
        assert isinstance(direct._engine, _Direct) and not isinstance(full._engine, _Direct)
        for store in (full, direct):
            assert store.runs() == ["a"] and store.latest_run() == "a"
        assert list(direct.read("a", texts=True)) == list(full.read("a", texts=True))
        assert list(direct.read("a", keys={"cause_id": ["C1"]})) == list(full.read("a", keys={"cause_id": ["C1"]}))
        assert list(direct.rows("a", data=False)) == list(full.rows("a", data=False))
        for view in ("memory", "stats"):
            assert direct.view_states(view, "a") == full.view_states(view, "a") != []
        assert stored_round_stats(direct, "a") == stored_round_stats(full, "a")
        assert verify_run(direct, "a") == verify_run(full, "a") == []
    code = (
        "import sys; from diagevo.log import open_log; from diagevo.views import queries; "
        f"s = open_log({url!r}, readonly=True); queries.stats(s); queries.why(s, 'C1'); "
        "print([m for m in sys.modules if m.startswith(('sqlalchemy', 'alembic'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("query", ["?synchronous=normal", ""])
def test_other_reads_take_the_full_path(tmp_path: Path, query: str, next_migration: str) -> None:
    """A URL with a query, or a file at an older revision, is opened through SQLAlchemy, which
    words every refusal (here: a file at an older revision is refused as before)."""
    from diagevo.log import SchemaOutdated
    from diagevo.log.sqlite import _Direct

    url, _ = _log_file(tmp_path)
    if query:
        with open_log(url + query, readonly=True) as store:
            assert not isinstance(store._engine, _Direct) and store.runs() == ["a"]
        return
    with sqlite3.connect(tmp_path / "runs.db") as conn:  # the file as the release before left it
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    with pytest.raises(SchemaOutdated, match="upgrade"):
        open_log(url, readonly=True)
