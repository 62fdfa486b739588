"""``--config`` with the name of a config diagevo ships (``configs/sim.toml``, ``sim.toml``,
``sim``) reads the shipped copy where the current directory holds no such file, in any
installation; a real file always wins, and a name of two files or of none is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagevo.errors import BadInput, NotFound
from diagevo.errors.installation import shipped
from diagevo.train.config import config_file, load_config
from tests.test_cli_memory import assert_one_line_error, run_cli


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no configs/ here


def test_config_finds_a_packaged_config_by_its_name() -> None:
    sim = shipped("configs/sim.toml")
    assert sim is not None
    for name in ("configs/sim.toml", "sim.toml", "sim", "configs/sim"):
        assert config_file(Path(name)) == sim, name
    assert config_file(Path("tiny-hf")) == shipped("configs/tiny-hf.toml")
    assert load_config("configs/tiny-hf.toml").train.backend == "hf"


def test_a_real_config_file_wins_over_a_packaged_one(tmp_path: Path) -> None:
    (tmp_path / "sim.toml").write_text("[train]\nseed = 71\n", encoding="utf-8")
    assert config_file(Path("sim.toml")) == Path("sim.toml")
    assert load_config("sim.toml").train.seed == 71
    with pytest.raises(BadInput, match=r"--config sim names both sim.toml here and the packaged configs/sim.toml"):
        config_file(Path("sim"))


def test_a_config_of_no_file_and_no_packaged_name_lists_the_packaged_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(NotFound, match=r"no config file at nosuch.toml, .*configs/sim.toml, configs/smollm2-cpu.toml"):
        config_file(Path("nosuch.toml"))
    with pytest.raises(BadInput, match="configs/verl/solver.yaml is YAML, verl's config that diagevo ships"):
        config_file(Path("configs/verl/solver.yaml"))  # not a TOML config
    code, _, err = run_cli(capsys, "train", "--config", "sim-cpu", "--dry-run")
    assert_one_line_error(code, err, "no config file at sim-cpu", "packaged: configs/diagnosis_api.toml")
    code, out, err = run_cli(capsys, "train", "--config", "configs/sim.toml", "--dry-run", "--json")
    assert code == 0, err


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("sim.yaml", "'configs/sim.toml'"),
        ("/elsewhere/configs/sim.toml", "'configs/sim.toml'"),  # beside a script copied away from its checkout
        ("configs/tiny_hf", "'configs/tiny-hf.toml'"),
        ("qwen3-4b", "'configs/qwen3-4b-base.toml'"),
    ],
)
def test_a_config_of_no_file_offers_the_packaged_one_it_likely_means(
    given: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "train", "--config", given, "--dry-run")
    assert_one_line_error(code, err, f"(did you mean {meant}", "packaged: configs/diagnosis_api.toml")


def test_a_yaml_config_is_named_as_another_programs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A YAML file is never read as diagevo's config, even where it exists: verl's and accelerate's
    ship beside the TOML ones, each named as whose it is."""
    (tmp_path / "configs" / "accelerate").mkdir(parents=True)
    (tmp_path / "configs" / "accelerate" / "zero3-1gpu.yaml").write_text("a: 1\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "train", "--config", "configs/accelerate/zero3-1gpu.yaml", "--dry-run")
    assert_one_line_error(code, err, "is YAML, accelerate's config that diagevo ships: diagevo's configs are TOML")
    code, _, err = run_cli(capsys, "train", "--config", "configs/verl/solver.yaml", "--dry-run")
    assert_one_line_error(code, err, "is YAML, verl's config")
