"""The configuration: one section per GRPO role, every field described, the names of earlier
versions still read (TOML, --set, configs stored in older logs), ``diagevo config``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from diagevo.config import RENAMED, ChallengerConfig, Config, RoleConfig, SimParams, SolverConfig, load_config, migrate
from diagevo.errors import BadInput
from tests.test_cli_memory import assert_one_line_error, run_cli

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
FLAT = DATA / "configs-flat-roles"  # configs/*.toml as they were before [challenger] and [solver]


def _fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for name, info in model.model_fields.items():
        out.append((prefix + name, info))
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out += _fields(sub, f"{prefix}{name}.")
    return out


def test_every_field_of_every_section_is_described() -> None:
    fields = _fields(Config)
    assert len(fields) > 100
    assert [key for key, info in fields if not (info.description or "").strip()] == []


def test_the_roles_share_one_model_and_differ_in_defaults() -> None:
    cfg = Config()
    assert isinstance(cfg.challenger, RoleConfig) and isinstance(cfg.solver, RoleConfig)
    assert set(ChallengerConfig.model_fields) == set(SolverConfig.model_fields) == set(RoleConfig.model_fields)
    # Table 8: 6 challenger steps and 12 solver steps, both 256 x 8
    assert (cfg.challenger.max_steps, cfg.solver.max_steps) == (6, 12)
    assert (
        (cfg.challenger.batch_size, cfg.challenger.group_size)
        == (cfg.solver.batch_size, cfg.solver.group_size)
        == (256, 8)
    )
    assert cfg.role("challenger") is cfg.challenger and cfg.role("solver") is cfg.solver
    assert cfg.challenger_questions == 6 * 256
    # a section given in part keeps the role's own defaults for the rest
    part = load_config(None, ["challenger.batch_size=4"])
    assert (part.challenger.batch_size, part.challenger.max_steps, part.challenger.max_new_tokens) == (4, 6, 512)


def test_no_config_class_shares_a_name_with_trl() -> None:
    import diagevo.config as config

    assert not hasattr(config, "GRPOConfig")


@pytest.mark.parametrize("name", sorted(p.name for p in FLAT.glob("*.toml")))
def test_every_config_of_the_flat_shape_loads_as_its_current_file(name: str) -> None:
    """configs/*.toml as they were written before the role sections load into the same config
    as the files in configs/ now."""
    assert load_config(FLAT / name) == load_config(ROOT / "configs" / name)


def test_the_shipped_configs_use_no_former_name() -> None:
    for path in (ROOT / "configs").glob("*.toml"):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        used = {f"{s}.{k}" for s, table in data.items() if isinstance(table, dict) for k in table}
        assert used.isdisjoint(RENAMED), path.name


def test_former_names_are_read_from_set_overrides() -> None:
    cfg = load_config(
        ROOT / "configs" / "tiny-hf.toml",
        ["grpo.solver_max_steps=3", 'hf.challenger_model="other"', "hf.max_new_tokens=99"],
    )
    assert (cfg.solver.max_steps, cfg.challenger.model, cfg.solver.max_new_tokens) == (3, "other", 99)
    # an override by a former name beats the file's value under the current name, and the other way round
    flat = load_config(FLAT / "tiny-hf.toml", ["solver.max_steps=5", "grpo.challenger_group_size=6"])
    assert (flat.solver.max_steps, flat.challenger.group_size) == (5, 6)


def test_a_field_given_under_both_names_must_agree(tmp_path: Path) -> None:
    path = tmp_path / "both.toml"
    path.write_text("[grpo]\nsolver_max_steps = 3\n\n[solver]\nmax_steps = 3\n", encoding="utf-8")
    assert load_config(path).solver.max_steps == 3
    path.write_text("[grpo]\nsolver_max_steps = 3\n\n[solver]\nmax_steps = 4\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"grpo.solver_max_steps = 3 and solver.max_steps = 4 disagree"):
        load_config(path)


def test_an_unknown_section_is_named_with_the_one_meant_and_former_names_still_pass(tmp_path: Path) -> None:
    """A misspelt table is named in its file (or as a --set section) with the section it most
    likely means; a former name (:data:`RENAMED`) beside it is no unknown field."""
    path = tmp_path / "c.toml"
    path.write_text('[hf]\nsolver_model = "m"\n\n[trian]\nrounds = 1\n', encoding="utf-8")
    with pytest.raises(BadInput, match=r"c\.toml: unknown table \[trian\] \(did you mean \[train\]\?\)$"):
        load_config(path)
    with pytest.raises(BadInput, match=r"^unknown config section 'memroy' \(did you mean memory\?\)$"):
        load_config(None, ['hf.solver_model="m"', "memroy.k=1"])
    path.write_text('[hf]\nsolver_model = "m"\n', encoding="utf-8")
    assert load_config(path, ["grpo.solver_max_steps=3"]).solver.model == "m"


def test_migrate_leaves_its_input_as_it_was() -> None:
    data = {"grpo": {"solver_batch_size": 4}, "hf": {"solver_model": "m"}}
    assert migrate(data) == {"grpo": {}, "hf": {}, "solver": {"batch_size": 4, "model": "m"}}
    assert data == {"grpo": {"solver_batch_size": 4}, "hf": {"solver_model": "m"}}


def test_a_config_stored_by_an_earlier_version_loads(tmp_path: Path) -> None:
    """run.started of a sim run trained before the role sections (``--seed 3 --run eq``): read
    back through the one reader of stored configs, it is the run's config now."""
    from diagevo.log import open_log
    from diagevo.rounds import stored_config
    from diagevo.schemas import new_event

    stored = json.loads((DATA / "run-started-config-flat-roles.json").read_text(encoding="utf-8"))
    assert "solver_group_size" in stored["grpo"] and "solver_model" in stored["hf"]
    with open_log(f"sqlite:///{tmp_path / 'old.db'}") as store:
        store.append([new_event("run.started", "eq", 0, "start", config={**stored, "k": 0.5}, seed=3)])
        cfg = stored_config(store, "eq")
    assert cfg == load_config(ROOT / "configs" / "sim.toml", ["train.seed=3", 'train.run="eq"'])
    assert (cfg.solver.group_size, cfg.challenger.max_steps, cfg.solver.model) == (8, 6, "Qwen/Qwen3-8B-Base")
    # the run stores its config in the current shape from now on
    assert "solver_group_size" not in cfg.redacted()["grpo"] and cfg.redacted()["solver"]["group_size"] == 8


def test_the_simulator_parameters_are_typed() -> None:
    cfg = load_config(None, ["sim.params.solver_lr=2", "sim.params.challenger_steps=3"])
    assert isinstance(cfg.sim.params, SimParams)
    assert (cfg.sim.params.solver_lr, cfg.sim.params.challenger_steps) == (2.0, 3)
    assert Config.model_validate({"sim": {"params": {"solver_lr": 3}}}).sim.params.solver_lr == 3.0  # a stored dict
    with pytest.raises(BadInput, match=r"unknown config field 'sim.params.no_such_knob'"):
        load_config(None, ["sim.params.no_such_knob=1"])
    with pytest.raises(BadInput, match=r"config: sim.params.challenger_steps: Input should be a valid integer"):
        load_config(None, ["sim.params.challenger_steps=2.5"])
    with pytest.raises(BadInput, match=r"config: sim.params.dedup_width: Input should be greater than 0"):
        load_config(None, ["sim.params.dedup_width=0"])


def test_the_simulator_reads_its_typed_parameters() -> None:
    from diagevo.train.sim import SimBackend

    cfg = load_config(None, ["sim.params.eval_samples=2", "sim.params.world_seed=7"])
    backend = SimBackend(cfg, seed=0, embedder=None)
    assert (backend.params.eval_samples, backend.params.world_seed) == (2, 7)


def test_grpo_arguments_take_each_roles_section() -> None:
    from diagevo.train.hf.args import grpo_kwargs, phase_plan

    cfg = load_config(
        None,
        ["challenger.group_size=4", "challenger.max_new_tokens=33", "solver.max_new_tokens=77", "solver.max_steps=2"],
    )
    chal, solver = phase_plan(cfg, "challenger", 10), phase_plan(cfg, "solver", 10_000)
    assert (chal.group, solver.group, solver.steps) == (4, 8, 2)
    assert grpo_kwargs(cfg, chal, "out")["max_completion_length"] == 33
    assert grpo_kwargs(cfg, solver, "out")["max_completion_length"] == 77


# --- diagevo config ---------------------------------------------------------------------------


def test_config_prints_every_field_with_its_help_as_loadable_toml(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sets = [
        "--set",
        "grpo.solver_max_steps=3",
        "--set",
        'diagnosis.api_key="sk-very-secret"',
        "--set",
        'train.out_dir="ck"',
    ]
    code, out, err = run_cli(capsys, "config", "--config", str(ROOT / "configs" / "tiny-hf.toml"), *sets)
    assert code == 0, err
    assert "sk-very-secret" not in out and '# api_key = "***"' in out
    assert "# Most GRPO optimizer steps per round (Table 8: 12 for the solver).\nmax_steps = 3    # default 12" in out
    # the output is a config file: it loads into the config it shows (the secret left out)
    (tmp_path / "shown.toml").write_text(out, encoding="utf-8")
    again = load_config(tmp_path / "shown.toml")
    expected = load_config(ROOT / "configs" / "tiny-hf.toml", ["grpo.solver_max_steps=3", 'train.out_dir="ck"'])
    assert again == expected


def test_config_json_lists_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys, "config", "--json", "--set", 'diagnosis.api_key="sk-very-secret"', "--set", 'db="postgresql://u:pw@h/x"'
    )
    assert code == 0
    data = json.loads(out)
    fields = {f["key"]: f for f in data["fields"]}
    assert set(fields) == {key for key, info in _fields(Config) if not _is_section(info)}
    assert fields["solver.max_steps"] == {
        "key": "solver.max_steps",
        "value": 12,
        "default": 12,
        "help": "Most GRPO optimizer steps per round (Table 8: 12 for the solver).",
    }
    assert fields["diagnosis.api_key"]["value"] == "***" and "sk-very-secret" not in out
    assert fields["db"]["value"] == "postgresql://u:***@h/x" and ":pw@" not in out
    assert data["config"].endswith("configs/sim.toml")


def _is_section(info: Any) -> bool:
    return isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)


def test_config_refuses_a_bad_override_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "config", "--set", "challenger.group_size=1")
    assert_one_line_error(code, err, "config: challenger.group_size: Input should be greater than or equal to 2")
