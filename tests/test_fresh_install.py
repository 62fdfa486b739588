"""A plain ``pip install`` of the wheel, no extra, into a fresh venv (the tested versions, from the
package index): none of the heavy packages come, and the core's jobs run there away from the
checkout (tests/fresh_install.py; ``python -m tests.fresh_install`` prints what it weighs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fresh_install import HEAVY, install, the_core_runs
from tests.wheels import build_wheel

pytestmark = pytest.mark.slow


def test_a_plain_install_brings_no_heavy_package_and_runs_the_core(tmp_path: Path) -> None:
    installed = install(build_wheel(tmp_path), tmp_path / "env", constraints=True)
    names = {d.split()[0] for d in installed.distributions}
    assert "diagevo" in names and {"sqlalchemy", "typer", "numpy"} <= names
    assert not names & set(HEAVY) and not any(n.startswith("nvidia-") for n in names), sorted(names)
    work = tmp_path / "work"
    work.mkdir()
    assert the_core_runs(installed, work) == []
    assert (work / "fresh.db").exists() and not (work / "models").exists()
