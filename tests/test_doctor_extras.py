"""``diagevo doctor`` reports each of diagevo's extras: installed or not (each package's version or
its absence), what it enables, and what installs it; read from the installed package's metadata,
with the names of ``pyproject.toml``."""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

import pytest

from diagevo import doctor
from diagevo.doctor import check_extras
from diagevo.errors import USES, Fix
from diagevo.runtime.installed import EXTRAS, extra_packages
from tests.test_cli_memory import run_cli

ROOT = Path(__file__).resolve().parent.parent


def test_doctor_knows_what_each_extra_of_pyproject_enables() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert set(EXTRAS) == set(declared["optional-dependencies"])
    installed = importlib.metadata.metadata("diagevo").get_all("Provides-Extra") or []
    assert set(EXTRAS) == set(installed)


def test_an_extra_that_names_diagevos_own_extras_counts_their_packages() -> None:
    requires = [
        "numpy>=1.26",
        'pyarrow>=15; extra == "data"',
        'polars>=1.0; extra == "data"',
        "lancedb>=0.20; extra == 'index'",
        'pyarrow>=15; extra == "index"',
        'diagevo[data,index]; extra == "hf"',
        'torch>=2.9; extra == "hf"',
        'diagevo[hf]; extra == "gpu"',
        'vllm>=0.31 ; extra == "gpu"',
    ]
    found = extra_packages(requires)
    assert found["data"] == ["pyarrow", "polars"]
    assert found["hf"] == ["torch", "pyarrow", "polars", "lancedb"]  # its own packages first
    assert found["gpu"] == ["vllm", "torch", "pyarrow", "polars", "lancedb"]
    assert "numpy" not in {d for ds in found.values() for d in ds}


def test_doctor_reports_each_extra_installed_or_not_and_what_it_enables(capsys: pytest.CaptureFixture[str]) -> None:
    checks = {c.name: c for c in check_extras()}
    assert set(checks) == {f"extra {e}" for e in EXTRAS}
    data = checks["extra data"]  # this environment has the test, hf and docs extras
    assert data.status == "ok" and data.facts["installed"] and set(data.facts["packages"]) == {"polars", "pyarrow"}
    assert "polars " in data.detail and "pyarrow " in data.detail and "export dataset" in data.detail
    verl = checks["extra verl"]
    assert verl.facts["packages"] == {"verl": None} and not verl.facts["installed"]
    assert verl.status == "warning" and verl.detail.startswith("not installed (lacks verl): ")
    assert "how-to/verl" in str(verl.fix)  # its install line is on that page: torch first
    absent = check_extras(['nosuchpkg-diagevo>=1; extra == "bench"'])[0]
    assert absent.status == "warning" and absent.fix == Fix(extras=("bench",)), absent
    assert absent.detail == f"not installed (lacks nosuchpkg-diagevo): {EXTRAS['bench']}"
    code, out, err = run_cli(capsys, "doctor", "--json")
    assert code == 0, err
    shown = {c["name"]: c for c in json.loads(out)["checks"]}
    assert shown["extra verl"]["fix"] == "diagevo docs how-to/verl"
    assert shown["extra data"]["facts"]["packages"].keys() == {"polars", "pyarrow"}


def test_an_extra_partly_installed_names_the_jobs_that_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a verl venv pyarrow is there (verl brings it) and polars is not: ``export verl`` works,
    and doctor says so, by the modules the job looks up before it runs, not by the extra's packages."""
    monkeypatch.setattr(doctor, "module_present", lambda module: module != "polars")
    monkeypatch.setattr(doctor, "installed_version", lambda dist: None if dist == "polars" else "19.0.1")
    [data] = check_extras(['pyarrow>=15; extra == "data"', 'polars>=1.0; extra == "data"'])
    assert data.status == "warning" and data.fix == Fix(extras=("data",))
    assert data.detail.startswith(
        "partly installed (lacks polars): works: export verl, eval's Parquet benchmark files;"
    )
    assert "export dataset needs polars" in data.detail and "export verl needs" not in data.detail
    assert data.facts["uses"]["export verl"] == [] and data.facts["uses"]["export dataset"] == ["polars"]
    monkeypatch.setattr(doctor, "module_present", lambda module: False)
    monkeypatch.setattr(doctor, "installed_version", lambda dist: None)
    [none] = check_extras(['pyarrow>=15; extra == "data"'])
    assert none.detail.startswith("not installed (lacks ") and "works" not in none.detail


def test_each_job_of_the_table_belongs_to_an_extra_and_each_check_names_one() -> None:
    """``require_use`` reads :data:`USES` by the job's name: every name a module gives it is there."""
    assert {extra for extra, _ in USES.values()} <= set(EXTRAS)
    named = set()
    for path in [*(ROOT / "diagevo").rglob("*.py"), *(ROOT / "cli").rglob("*.py")]:
        named |= set(re.findall(r'require_use\(\s*"([^"]+)"', path.read_text(encoding="utf-8")))
    assert named and named <= set(USES), named - set(USES)


def test_the_verl_install_line_names_verls_version_its_trainers_packages_and_torch_first() -> None:
    """The verl page installs what ``make verl-contracts`` installs and checks: torch first (pip
    would take a CUDA torch from PyPI with verl), verl at the extra's lower bound, and the packages
    verl's trainer imports that plain verl does not bring; the CPU torch from PyTorch's CPU index."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    torch = re.search(r"^VERL_TORCH := (\S+)$", makefile, re.M)
    recipe = re.search(r"-e '\.\[verl\]' (.+)$", makefile, re.M)
    lowest = re.search(r'^verl = \["verl>=([0-9.]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert torch and recipe and lowest
    page = (ROOT / "docs" / "how-to" / "verl.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", page, re.S)
    assert block is not None
    first, second = block.group(1).strip().splitlines()
    assert first == f"pip install {torch.group(1)} --index-url https://download.pytorch.org/whl/cpu"
    words = second.split()
    assert words[:3] == ["pip", "install", torch.group(1)]  # the torch just installed, held
    assert f"verl=={lowest.group(1)}" in words and '"diagevo[verl]"' in words
    assert set(recipe.group(1).split()) <= set(words), recipe.group(1)
