"""What a release promises, tested: ``diagevo --version`` names the package and the schema it
writes, and the schema promise holds (docs/how-to/upgrade.md): from 0.1.0 on, every schema change
ships a migration that takes a 0.1.0 database to head with its ``memory export`` unchanged.

The promise is checkable because each part of it fails on its own: the 0.1.0 fixture
(``tests/data/release-0.1.0/``, a real ``diagevo train`` run) is upgraded by ``db upgrade`` and
exports byte for byte what it exported when 0.1.0 wrote it; the migrations form one chain from
the revision 0.1.0 wrote to the head, every file of ``migrations/versions/`` on it (so that
upgrade runs every migration there is); and a released migration is never edited (the fixture
sits at its revision: an edit would never run on it).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import shutil
import sqlite3
import subprocess
import tomllib
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from diagevo.log.schema import head_revision, revision_status
from tests.input_cases import cli

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ROOT / "migrations" / "versions"
FIXTURES = sorted((Path(__file__).parent / "data").glob("release-*"))
FIRST = "0.1.0"  # the release the promise starts from
RELEASED_MIGRATIONS = {  # each migration a release shipped, by its file's sha256: never edited
    "0001_baseline.py": "af437ded27f2e1fed81b08fb3889d51551a7b016682d38b6a08ba6c690968159",
}


def _revision_of(db: Path) -> str:
    """The revision a database file stands at, read without diagevo or Alembic."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        (row,) = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    conn.close()
    return str(row[0])


def _fixture(folder: Path) -> tuple[Path, Path]:
    release = folder.name.removeprefix("release-")
    return folder / f"release-{release}.db", folder / f"release-{release}.jsonl"


def test_version_names_the_build_and_the_schema_it_writes() -> None:
    """The metadata's version (setup.py's, from the repository, once installed) and Alembic's head,
    each read where it is kept. A checkout past the release is a development version of the next
    patch, its commits since the release and its commit in it; none is typed by hand."""
    from tests.wheels import checkout_version

    code, out, err = cli("--version")
    assert code == 0, err
    built = checkout_version()
    assert importlib.metadata.version("diagevo") == built  # a stale install reports a stale version
    assert out == f"diagevo {built} (schema {head_revision()})\n"
    assert "version" not in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    head = subprocess.run(["git", "rev-parse", "--short=9", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0 and built != FIRST:  # a checkout past the release: 0.1.1.devN+g<HEAD>
        assert re.fullmatch(rf"0\.1\.1\.dev\d+\+g{head.stdout.strip()}(\.dirty)?", built), built


def test_the_first_release_has_its_fixture() -> None:
    assert [f.name for f in FIXTURES][:1] == [f"release-{FIRST}"]
    for folder in FIXTURES:
        db, export = _fixture(folder)
        assert db.is_file() and export.is_file() and (folder / "make_release_fixture.py").is_file(), folder


@pytest.mark.parametrize("folder", FIXTURES, ids=[f.name for f in FIXTURES])
def test_a_released_database_upgrades_to_head_with_its_export_unchanged(folder: Path, tmp_path: Path) -> None:
    db, export = _fixture(folder)
    shutil.copyfile(db, tmp_path / "old.db")
    url = f"sqlite:///{tmp_path / 'old.db'}"
    released = _revision_of(db)
    assert revision_status(url).current == released
    code, _, err = cli("db", "upgrade", "--db", url)
    assert code == 0, err
    assert _revision_of(tmp_path / "old.db") == head_revision()
    run = json.loads(export.read_text(encoding="utf-8").splitlines()[0])["run"]
    code, _, err = cli("memory", "export", "--run", run, "--db", url, "-o", str(tmp_path / "now.jsonl"))
    assert code == 0, err
    assert (tmp_path / "now.jsonl").read_bytes() == export.read_bytes()
    code, out, err = cli("memory", "verify", "--run", run, "--db", url, "--json")
    assert code == 0 and json.loads(out)["ok"] is True, out + err


def test_the_fixture_is_taken_through_the_next_migration_too(next_migration: str, tmp_path: Path) -> None:
    """With a stand-in for the next migration (:func:`tests.conftest.next_migration`) the 0.1.0
    database is behind head: ``db upgrade`` runs it, and the export is still the fixture's."""
    db, export = _fixture(FIXTURES[0])
    shutil.copyfile(db, tmp_path / "old.db")
    url = f"sqlite:///{tmp_path / 'old.db'}"
    assert revision_status(url).state == "outdated"
    code, _, err = cli("db", "upgrade", "--db", url)
    assert code == 0, err
    assert _revision_of(tmp_path / "old.db") == next_migration
    code, _, err = cli("memory", "export", "--run", "release-0.1.0", "--db", url, "-o", str(tmp_path / "now.jsonl"))
    assert code == 0, err
    assert (tmp_path / "now.jsonl").read_bytes() == export.read_bytes()


def test_every_migration_lies_on_the_one_chain_from_the_first_release() -> None:
    """``db upgrade`` of the fixture runs every migration file there is: one head, one base (the
    revision 0.1.0 wrote), each file of ``migrations/versions/`` a revision between them. A
    second head, a branch or a file Alembic does not walk from 0.1.0's revision fails here."""
    script = ScriptDirectory(str(ROOT / "migrations"))
    first = _revision_of(_fixture(FIXTURES[0])[0])
    assert script.get_bases() == [first]
    assert script.get_heads() == [head_revision()]
    chain = list(script.walk_revisions(base=first, head="heads"))
    assert [r.revision for r in chain][-1] == first
    assert all(len(r.nextrev) <= 1 for r in chain), "a branch: each revision has one successor"
    files = {p.name for p in VERSIONS.glob("*.py") if p.name != "__init__.py"}
    assert {Path(str(r.path)).name for r in chain} == files


def test_a_released_migration_is_never_edited() -> None:
    """The released databases sit at these revisions: an edit of one would never run on them, and
    their schema would silently differ from a new database's. A schema change is a new migration."""
    for name, digest in RELEASED_MIGRATIONS.items():
        assert hashlib.sha256((VERSIONS / name).read_bytes()).hexdigest() == digest, (
            f"{name} shipped in a release: add a migration instead of editing it"
        )
