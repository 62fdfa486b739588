"""Every command diagevo prints for the user to run is runnable as printed.

The CLI runs through its installed entry point from a directory where ``diagevo`` is not on
PATH, with a database that is not the default; each suggested command (after ``train``, after
``memory fork``, in the round protocol's errors, for an old schema revision) is pasted into a
shell as printed and must succeed. With ``$DIAGEVO_DB`` naming the database, the suggestions
leave ``--db`` out and still run; a PostgreSQL URL's password is never printed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from diagevo.catalog import RoundCommitted
from diagevo.log import open_log
from tests.test_train import SMALL

ROOT = Path(__file__).resolve().parent.parent
ENTRY = Path(sys.executable).parent / "diagevo"
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "COLUMNS": "80",
    "PATH": "/usr/bin:/bin",
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),  # this tree's diagevo
}
ENV.pop("DIAGEVO_DB", None)

pytestmark = pytest.mark.skipif(
    not ENTRY.is_file(), reason="the diagevo entry point is not installed next to this Python"
)


def diagevo(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ENTRY), *args], cwd=cwd, capture_output=True, text=True, env=env or ENV, timeout=600)


def suggestions(text: str) -> list[str]:
    """The commands in ``text`` that begin with the entry point: in backquotes, in parentheses,
    after ``continue with:``, or on their own line under ``try:``."""
    prog = re.escape(str(ENTRY))
    found = re.findall(rf"`({prog} [^`]*)`", text)
    found += re.findall(rf"\(({prog} [^)]*)\)", text)
    found += re.findall(rf"continue with: ({prog} .*)$", text, flags=re.M)
    found += re.findall(rf"^\s+({prog} .*)$", text, flags=re.M)
    return list(dict.fromkeys(f.strip() for f in found))


def run_as_printed(cwd: Path, command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=env or ENV, timeout=600)
    assert ran.returncode == 0, (command, ran.stdout[-1000:], ran.stderr[-1000:])
    return ran


def test_what_diagevo_suggests_runs_as_printed(tmp_path: Path) -> None:
    db = "sqlite:///work.db"  # relative to the directory the user is in; not the default
    train = ["--db", db, "--quiet", "--set", "train.rounds=2", *SMALL]
    done = diagevo(tmp_path, "train", "--run", "r 1", "--rounds", "1", *train)
    assert done.returncode == 0, done.stderr[-2000:]
    hints = suggestions(done.stdout)
    assert len(hints) == 3 and all(f"--db {db}" in h and "--run 'r 1'" in h for h in hints), done.stdout
    for hint in hints:
        run_as_printed(tmp_path, hint)

    # the fork's "continue with": trains round 2 of the fork in the same database
    forked = diagevo(tmp_path, "memory", "fork", "--db", db, "--run", "r 1", "--round", "1", "--to", "f 1")
    assert forked.returncode == 0, forked.stderr
    (cont,) = suggestions(forked.stdout)
    assert cont == f"{ENTRY} train --run 'f 1' --resume --rounds 2 --db {db}"  # its run stopped at round 1
    run_as_printed(tmp_path, cont)
    with open_log(f"sqlite:///{tmp_path / 'work.db'}", create=False) as s:
        assert [e.round for e in s.read("f 1", types=(RoundCommitted,))] == [1, 2]

    # the round protocol's errors name the command that takes the missing step
    assert diagevo(tmp_path, "round", "start", "--run", "p", "--db", db).returncode == 0
    refused = diagevo(tmp_path, "round", "commit", "--run", "p", "--db", db)
    assert refused.returncode == 1 and "promotions are not decided" in refused.stderr
    (step,) = suggestions(refused.stderr)
    assert step == f"{ENTRY} round promote --run p --round 1 --allow-empty --db {db}"  # it holds no question
    run_as_printed(tmp_path, step)
    refused = diagevo(tmp_path, "round", "requests", "--n", "1", "--run", "nope", "--db", db)
    (start,) = suggestions(refused.stderr)
    assert start == f"{ENTRY} round start --run nope --db {db}"
    run_as_printed(tmp_path, start)
    assert diagevo(tmp_path, "round", "commit", "--db", db).returncode == 1  # nope's round 1 has no promotions yet

    # a database without diagevo's schema yet: the upgrade command, from a read command (an older
    # revision's is the same command, tests/test_store_schema.py)
    (tmp_path / "old.db").touch()
    refused = diagevo(tmp_path, "memory", "stats", "--db", "sqlite:///old.db")
    assert suggestions(refused.stderr) == [f"{ENTRY} db upgrade --db sqlite:///old.db"]
    run_as_printed(tmp_path, suggestions(refused.stderr)[0])
    assert "up to date" in diagevo(tmp_path, "db", "current", "--db", "sqlite:///old.db").stdout

    # with $DIAGEVO_DB naming the database, no --db is printed, and the commands still run
    env = {**ENV, "DIAGEVO_DB": db}
    assert diagevo(tmp_path, "round", "start", "--run", "q", env=env).returncode == 0
    refused = diagevo(tmp_path, "round", "commit", "--run", "q", env=env)
    (step,) = suggestions(refused.stderr)
    assert step == f"{ENTRY} round promote --run q --round 1 --allow-empty"
    run_as_printed(tmp_path, step, env=env)


@pytest.mark.postgres
def test_suggestions_leave_a_postgresql_password_out_and_still_run(tmp_path: Path, postgres_backend: object) -> None:
    url = make_url(postgres_backend.fresh_url()).set(password="s3cret-pw")  # type: ignore[attr-defined]
    db = url.render_as_string(hide_password=False)  # the server trusts 127.0.0.1: any password works
    assert diagevo(tmp_path, "round", "start", "--run", "p", "--db", db).returncode == 0
    refused = diagevo(tmp_path, "round", "commit", "--run", "p", "--db", db)
    assert refused.returncode == 1 and "s3cret" not in refused.stderr
    (step,) = suggestions(refused.stderr)
    assert "--db " in step and url.username in step
    run_as_printed(tmp_path, step)
    forked = diagevo(tmp_path, "memory", "fork", "--db", db, "--run", "p", "--round", "0", "--to", "f")
    assert "s3cret" not in forked.stdout + forked.stderr
