"""Writes the 0.1.0 fixture: ``release-0.1.0.db``, a database diagevo 0.1.0 wrote with its own
trainer, and ``release-0.1.0.jsonl``, that database's ``memory export`` then.

The schema promise (docs/how-to/upgrade.md, CHANGELOG.md): from 0.1.0 on, every schema change
ships a migration that takes this database to head with its export unchanged, byte for byte
(``tests/test_release_fixture.py``). Where ``tests/data/baseline_log/`` holds a log built event by
event (two runs, an open round, on both backends), this is what a user's 0.1.0 left: a whole
``diagevo train`` run on the simulator, every event its trainer writes, its saved views and
statistics, at schema revision 0001. Two rounds of a small config (the default's questions
scaled down), seed 0. Written once, by 0.1.0; never rewritten (the point is the bytes an older
diagevo wrote).

    .venv/bin/python tests/data/release-0.1.0/make_release_fixture.py
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RELEASE = "0.1.0"
DB = HERE / f"release-{RELEASE}.db"
EXPORT = HERE / f"release-{RELEASE}.jsonl"
RUN = "release-0.1.0"
TRAIN = (
    *("train", "--rounds", "2", "--seed", "0", "--run", RUN, "--quiet"),
    *("--set", "train.challenger_questions=8", "--set", "train.curriculum_questions=16"),
    *("--set", "grpo.construction_responses=4"),
)


def diagevo(*args: str, cwd: Path) -> str:
    """The installed ``diagevo`` of this interpreter, as a user runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "diagevo.cli.app", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"diagevo {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return done.stdout


def main() -> None:
    version = diagevo("--version", cwd=HERE).split()
    assert version[1] == RELEASE and version[3] == "0001)", f"write the fixture with diagevo {RELEASE}: {version}"
    with tempfile.TemporaryDirectory(prefix="diagevo-release-") as tmp:
        work = Path(tmp)
        url = "sqlite:///release.db"
        diagevo(*TRAIN, "--db", url, cwd=work)
        diagevo("memory", "verify", "--run", RUN, "--db", url, cwd=work)
        diagevo("memory", "export", "--run", RUN, "--db", url, "-o", str(EXPORT), cwd=work)
        with sqlite3.connect(work / "release.db") as conn:  # one file: no WAL beside it, no free pages
            conn.execute("PRAGMA journal_mode = DELETE")
            conn.execute("VACUUM")
        conn.close()
        shutil.copyfile(work / "release.db", DB)


if __name__ == "__main__":
    main()
