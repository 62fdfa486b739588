"""The shipped examples run wherever they are copied, as the pages advise
(``cp "$(diagevo docs --path examples/external_trainer.py)" . && python external_trainer.py ...``):
each copied alone into an empty folder and run there, its config taken by its packaged name, not
from a folder beside the script. The TRL example needs a model: tests/test_trl_example.py runs
its copy in the slow tier."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import diagevo
from tests.test_cli_memory import run_cli

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--set", "train.challenger_questions=4", "--set", "train.curriculum_questions=8"]
RUNS = {
    "external_trainer.py": ["--db", "sqlite:///copied.db", "--run", "copied", "--rounds", "1", *SMALL],
    "verl_round_trip.py": ["--db", "sqlite:///copied.db", "--run", "copied", "--out", "rounds", "--rounds", "1"],
}
ELSEWHERE = {"trl_grpo_trainer.py": "tests/test_trl_example.py"}


def copied(name: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """``examples/NAME`` copied alone into ``folder`` from where ``diagevo docs --path`` finds it."""
    code, out, err = run_cli(capsys, "docs", "--path", f"examples/{name}")
    assert code == 0, err
    folder.mkdir()
    return Path(shutil.copy(out.strip(), folder))


def test_every_example_is_run_from_a_copy() -> None:
    shipped = {p.name for p in (ROOT / "examples").glob("*.py")} - {"__init__.py"}
    assert shipped == set(RUNS) | set(ELSEWHERE)
    for name, test in ELSEWHERE.items():
        assert f'copied("{name}"' in (ROOT / test).read_text(encoding="utf-8"), test


@pytest.mark.parametrize("name", sorted(RUNS))
def test_an_example_copied_into_an_empty_folder_runs(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = copied(name, tmp_path / "empty", capsys)
    done = subprocess.run(
        [sys.executable, script.name, *RUNS[name]],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "round 1:" in done.stdout, done.stdout[-2000:]
    with diagevo.open_store(f"sqlite:///{script.parent / 'copied.db'}") as store:
        assert diagevo.verify_run(store, "copied") == []
