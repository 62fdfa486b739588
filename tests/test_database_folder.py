"""What belongs to one database lives in one folder beside it (``x.db`` + ``x.diagevo/``): an
earlier layout (``x.lance``, ``x.runs``, ``x.leases`` beside ``x.db``) is moved in without loss,
and a symbolic link planted as the folder or one of its parts is refused in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from diagevo.errors import BadInput
from diagevo.files.written import database_part
from diagevo.log import StoreError, open_log
from diagevo.log.paths import beside_database
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_train import SMALL


def test_a_run_leaves_the_database_and_one_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "train", "--db", "sqlite:///x.db", "--run", "r", "--rounds", "1", "--quiet", *SMALL)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("x.db-")) == ["x.db", "x.diagevo"]
    # the default static embedder's vectors are computed again, never kept: no index.lance
    assert sorted(p.name for p in (tmp_path / "x.diagevo").iterdir()) == ["leases", "runs"]
    assert (tmp_path / "x.diagevo" / "runs" / "r").is_dir()


def test_an_earlier_layout_is_moved_into_the_folder_without_loss(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    url = f"sqlite:///{db}"
    with open_log(url) as store:  # the log itself stays where it is
        store.append([])
    old = {".lance": "vectors/data.bin", ".runs": "r/round001-solver/solver/model.safetensors", ".leases": "abc.lock"}
    for suffix, rel in old.items():
        f = db.with_suffix(suffix) / rel
        f.parent.mkdir(parents=True)
        f.write_bytes(suffix.encode() * 1000)
    inode = db.with_suffix(".runs").stat().st_ino
    assert beside_database(url, ".runs") == tmp_path / "x.diagevo" / "runs"
    assert beside_database(url, ".lance") == tmp_path / "x.diagevo" / "index.lance"
    with open_log(url) as store:  # the lease folder moves at the first lease
        with store.lease("r", "test"):
            pass
    for suffix, rel in old.items():
        part = {".lance": "index.lance", ".runs": "runs", ".leases": "leases"}[suffix]
        assert not db.with_suffix(suffix).exists()
        assert (tmp_path / "x.diagevo" / part / rel).read_bytes() == suffix.encode() * 1000
    assert (tmp_path / "x.diagevo" / "runs").stat().st_ino == inode  # renamed, not copied
    assert beside_database(url, ".runs") == tmp_path / "x.diagevo" / "runs"  # and again: nothing to move


def test_both_layouts_present_is_refused_naming_both_and_nothing_moves(tmp_path: Path) -> None:
    base = tmp_path / "x.db"
    (tmp_path / "x.runs" / "a").mkdir(parents=True)
    (tmp_path / "x.diagevo" / "runs" / "b").mkdir(parents=True)
    with pytest.raises(BadInput, match=r"both .*x\.runs .* and .*x\.diagevo/runs exist"):
        database_part(base, "runs")
    assert (tmp_path / "x.runs" / "a").is_dir() and (tmp_path / "x.diagevo" / "runs" / "b").is_dir()


@pytest.mark.parametrize("planted", ["x.diagevo", "x.diagevo/leases", "x.leases"])
def test_a_symlinked_lease_folder_is_refused_and_nothing_is_written_elsewhere(tmp_path: Path, planted: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with open_log(url) as store:
        store.append([])
    link = tmp_path / planted
    link.parent.mkdir(exist_ok=True)
    os.symlink(elsewhere, link)
    with open_log(url) as store:
        with pytest.raises(StoreError, match=r"is a symbolic link: diagevo writes only inside its own folder"):
            with store.lease("r", "test"):
                pass
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("planted", ["x.diagevo/index.lance", "x.lance"])
def test_a_symlinked_index_folder_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert run_cli(capsys, "round", "start", "--run", "r", "--db", db)[0] == 0
    link = tmp_path / planted
    link.parent.mkdir(exist_ok=True)
    os.symlink(elsewhere, link)
    code, _, err = run_cli(capsys, "memory", "reindex", "--db", db, "--run", "r", "--json")
    assert_one_line_error(code, err, f"{link} is a symbolic link")
    assert list(elsewhere.iterdir()) == []
    assert json.loads(run_cli(capsys, "runs", "--db", db, "--json")[1])["runs"][0]["run"] == "r"


def test_a_dry_run_names_the_new_place_and_moves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.runs" / "r").mkdir(parents=True)
    code, out, err = run_cli(capsys, "train", "--db", "sqlite:///x.db", "--run", "r", "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["checkpoints"] == str(Path("x.diagevo") / "runs" / "r")
    assert (tmp_path / "x.runs" / "r").is_dir() and not (tmp_path / "x.diagevo").exists()
