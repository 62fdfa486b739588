"""``make train`` in a fresh clone installs what it runs, the core alone (with the tested versions);
``make test`` keeps the full set-up (the test, hf and docs extras). Read from make's own plan
(``make -n``) for a venv that does not exist yet."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def planned(target: str, venv: Path) -> list[str]:
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"], capture_output=True, text=True, check=True
    )
    return [line for line in done.stdout.splitlines() if " install " in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_train_installs_the_core_alone(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    train = planned("train", venv)
    core = f"{venv}/bin/pip install -q -c requirements/constraints.txt -e ."
    assert train == [f"{venv}/bin/pip install -q --upgrade pip", core], train
    test = planned("test", venv)
    assert f"{venv}/bin/pip install -q -c requirements/constraints.txt -e '.[test,hf,docs]'" in test, test
    assert not venv.exists()
