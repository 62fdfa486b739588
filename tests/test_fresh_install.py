"""A plain ``pip install`` of the wheel, no extra, into a fresh venv (the tested versions, from the
package index): none of the heavy packages come, the core's jobs run there away from the checkout
(tests/fresh_install.py; ``python -m tests.fresh_install`` prints what it weighs), and every page
of ``diagevo docs`` renders there, with the examples and configs it ships found by their names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fresh_install import HEAVY, Installed, install, the_core_runs
from tests.wheels import build_wheel

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    where = tmp_path_factory.mktemp("fresh")
    return install(build_wheel(where), where / "env", constraints=True)


def test_a_plain_install_brings_no_heavy_package_and_runs_the_core(installed: Installed, tmp_path: Path) -> None:
    names = {d.split()[0] for d in installed.distributions}
    assert "diagevo" in names and {"sqlalchemy", "typer", "numpy"} <= names
    assert not names & set(HEAVY) and not any(n.startswith("nvidia-") for n in names), sorted(names)
    work = tmp_path / "work"
    work.mkdir()
    assert the_core_runs(installed, work) == []
    assert (work / "fresh.db").exists() and not (work / "models").exists()


def test_every_page_renders_in_a_wheel_install(installed: Installed, tmp_path: Path) -> None:
    """``diagevo docs PAGE`` for every page ``diagevo docs --json`` lists: exit 0, no internal error
    (a page including a file the wheel lacks once exited 70); each shipped file is where its
    ``--path`` says, so ``cp "$(diagevo docs --path examples/verl_round.sh)" .`` works; and a
    packaged config is found by its name."""
    work = tmp_path / "work"
    work.mkdir()
    listed = installed.run("diagevo", "docs", "--json", cwd=work)
    assert listed.returncode == 0, listed.stderr
    listing = json.loads(listed.stdout)
    assert not listing["checkout"] and "how-to/verl" in {p["name"] for p in listing["pages"]}
    failed = {}
    for page in listing["pages"]:
        done = installed.run("diagevo", "docs", page["name"], cwd=work)
        if done.returncode != 0 or "Traceback" in done.stderr or not done.stdout.strip():
            failed[page["name"]] = (done.returncode, done.stderr.strip()[-300:])
    assert failed == {}
    files = {f["name"]: Path(f["path"]) for f in listing["files"]}
    assert {"examples/verl_round.sh", "examples/trl_grpo_trainer.py", "configs/verl/solver.yaml"} <= set(files)
    for name in ("examples/verl_round.sh", "configs/verl/solver.yaml"):
        done = installed.run("diagevo", "docs", "--path", name, cwd=work)
        path = Path(done.stdout.strip())
        assert done.returncode == 0 and path == files[name] and path.is_relative_to(installed.env), done.stderr
        assert path.read_text(encoding="utf-8").startswith(("#!/usr/bin/env bash", "# verl's trainer"))
    plan = installed.run("diagevo", "train", "--config", "tiny-hf", "--dry-run", "--json", cwd=work)
    assert plan.returncode == 0 and json.loads(plan.stdout)["backend"] == "hf", plan.stderr
    assert list(work.iterdir()) == []
