"""The configuration: one class per section (the round protocol's in diagevo.config.sections, each
component's beside it), composed into the one file users write; the log checks all but the
components' tables; every section refuses a name it does not hold with the field meant;
``diagevo config``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from diagevo.config.base import field_names, settings, suggest_fields
from diagevo.config.errors import ConfigError
from diagevo.config.sections import ChallengerConfig, MethodConfig, RoleConfig, SolverConfig, config_from_record
from diagevo.errors import BadInput
from diagevo.train.config import Config, load_config
from diagevo.train.hf.config import HFConfig
from diagevo.train.sim.config import SimParams
from tests.test_cli_memory import assert_one_line_error, run_cli

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
FLAT = DATA / "configs-flat-roles"  # configs/*.toml as written before [challenger] and [solver] existed


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
    # the GRPO fields are one class's; each role adds what only it has (the challenger's question
    # check, the solver's reward)
    assert set(ChallengerConfig.model_fields) - set(RoleConfig.model_fields) == {"known_questions_only"}
    assert set(SolverConfig.model_fields) - set(RoleConfig.model_fields) == {
        "reward",
        "wrong_label_share",
        "anchor_share",
    }
    assert (cfg.challenger.known_questions_only, cfg.solver.reward) == (False, "pseudo_label")  # the paper's
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
    import diagevo.config.sections as method
    import diagevo.train.hf.config as hf

    assert not hasattr(method, "GRPOConfig") and not hasattr(hf, "GRPOConfig")


@pytest.mark.parametrize("name", sorted(p.name for p in FLAT.glob("*.toml")))
def test_a_config_of_the_flat_shape_is_refused_naming_the_field_meant(name: str) -> None:
    """configs/*.toml as written before the role sections name their fields by names that were
    never released (``grpo.solver_max_steps``): refused, each with the field it became, which
    the current file sets to the same value."""
    flat = tomllib.loads((FLAT / name).read_text(encoding="utf-8"))
    now = tomllib.loads((ROOT / "configs" / name).read_text(encoding="utf-8"))
    fields = {f"{s}.{k}" for s, table in flat.items() if isinstance(table, dict) for k in table}
    former = sorted(fields - set(_field_keys(Config)))
    assert former  # the file holds some
    for key in former:
        section, field = key.split(".")
        meant = [m for m in suggest_fields(Config, key) if _get(now, m) == flat[section][field]]
        assert meant, key
    with pytest.raises(ConfigError) as refused:
        load_config(FLAT / name)
    assert refused.value.unknown == "field" and refused.value.key in former
    assert f"{FLAT / name}: unknown field " in str(refused.value) and "did you mean" in str(refused.value)


def _field_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    return [key for key, info in _fields(model, prefix) if not _is_section(info)]


def _get(data: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        data = data.get(part, {}) if isinstance(data, dict) else {}
    return data


def test_a_name_never_released_is_refused_in_set_with_the_option_meant(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(ROOT / "configs" / "tiny-hf.toml", ["grpo.solver_max_steps=3"])
    exc = refused.value
    assert (exc.key, exc.unknown, exc.meant, exc.value) == (
        "grpo.solver_max_steps",
        "field",
        ("solver.max_steps",),
        "3",
    )
    assert str(exc) == "unknown config field 'grpo.solver_max_steps' (did you mean solver.max_steps?)"  # no CLI
    code, _, err = run_cli(capsys, "config", "--set", 'hf.solver_model="m"')
    assert_one_line_error(code, err, "unknown config field 'hf.solver_model' (did you mean --set solver.model=\"m\"?)")


def test_an_unknown_section_is_named_with_the_one_meant(tmp_path: Path) -> None:
    """A misspelt table is named in its file (or as a --set section) with the section it most
    likely means."""
    path = tmp_path / "c.toml"
    path.write_text('[solver]\nmodel = "m"\n\n[trian]\nrounds = 1\n', encoding="utf-8")
    with pytest.raises(BadInput, match=r"c\.toml: unknown table \[trian\] \(did you mean \[train\]\?\)$"):
        load_config(path)
    with pytest.raises(BadInput, match=r"^unknown config section 'memroy' \(did you mean memory\?\)$"):
        load_config(None, ['solver.model="m"', "memroy.k=1"])


def test_a_config_built_in_python_is_refused_with_the_projects_error() -> None:
    """``Config(memroy=...)`` and a typo nested in a section raise :class:`ConfigError` (a
    :class:`BadInput`) naming the dotted field and, as data, the field meant; never pydantic's."""
    with pytest.raises(ConfigError) as refused:
        Config(memroy={"k": 1})
    assert (refused.value.key, refused.value.unknown, refused.value.meant) == ("memroy", "section", ("memory",))
    with pytest.raises(ConfigError) as refused:
        Config(sim={"params": {"solver_lrr": 2}})
    assert refused.value.key == "sim.params.solver_lrr" and refused.value.meant[0] == "sim.params.solver_lr"
    with pytest.raises(ConfigError, match=r"config: filter: need p_low <= p_high"):
        Config.model_validate({"filter": {"p_low": 0.9}})
    with pytest.raises(ConfigError) as refused:  # each component's section validates itself
        HFConfig(per_device_batch=0)
    assert refused.value.key == "per_device_batch" and not isinstance(refused.value, ValidationError)


def test_the_log_checks_its_sections_and_carries_each_components_table() -> None:
    """A stored config: every section the round protocol reads is checked, each field of it
    once; a component's own table (``[hf]``) is carried as written, so a change to a backend's
    fields never changes what a log accepts; the owner checks it when the run is read back whole."""
    record = {
        "memory": {"k": 0.5},
        "hf": {"devcie": "cuda", "removed_knob": 1},
        "solver": {"max_steps": 3, "model": "m"},
        "diagnosis": {"theta_dup": 0.4, "llm_url": "http://x", "api_key": "***"},
    }
    stored = config_from_record(record)
    assert isinstance(stored, MethodConfig) and not isinstance(stored, Config)
    assert (stored.solver.max_steps, stored.solver.model, stored.diagnosis.theta_dup) == (3, "m", 0.4)
    kept = stored.redacted()
    assert kept["hf"] == record["hf"] and kept["diagnosis"]["api_key"] is None
    with pytest.raises(ConfigError, match=r"unknown config field 'solver.old_length'"):
        config_from_record({**record, "solver": {"max_steps": 3, "old_length": 9}})
    with pytest.raises(ConfigError, match=r"unknown config field 'memory.kk' \(did you mean memory.k\?\)"):
        config_from_record({"memory": {"k": 0.5, "kk": 1}})
    with pytest.raises(ConfigError) as refused:  # read back whole: the hf backend checks its part
        Config.of(config_from_record({"k": 0.5, "hf": {"devcie": "cuda"}}))
    assert (refused.value.key, refused.value.meant) == ("hf.devcie", ("hf.device",))


def test_a_run_config_stored_and_read_back_is_the_config() -> None:
    from diagevo.rounds import config_record

    cfg = load_config(ROOT / "configs" / "tiny-hf.toml", ["memory.theta_up=0.8", "sim.drift=false"])
    record = config_record(cfg)  # what run.started stores: the whole composed config, redacted
    assert set(record) == set(Config.model_fields) - {"db"}
    stored = config_from_record(record)
    assert stored.redacted() == record  # carried as written
    assert Config.of(stored) == cfg


def test_a_runs_changes_of_the_method_leave_out_how_the_run_is_carried_out() -> None:
    """A section holds the method's fields and the run's settings side by side, each declared
    once; what a run changed of the method (``memory runs``) names the method's alone."""
    from diagevo.rounds import config_record
    from diagevo.views.runs import config_changes

    method = field_names(MethodConfig, method=True)
    assert {"memory.k", "challenger.max_steps", "diagnosis.theta_dup", "train.rounds"} <= set(method)
    assert not {"train.run", "challenger.model", "diagnosis.llm_url", "limits.text_bytes"} & set(method)
    record = config_record(load_config(ROOT / "configs" / "tiny-hf.toml", ["train.run=r"]))
    changed = config_changes(record)
    assert changed["challenger.max_steps"] == 1 and "challenger.model" not in changed and "train.run" not in changed


def test_the_sections_are_listed_in_the_files_order() -> None:
    keys = [s.key for s in settings(Config()) if s.key.startswith(("train.", "solver."))]
    assert keys == [
        "train.backend",
        "train.rounds",
        "train.seed",
        "train.run",
        "train.out_dir",
        "train.challenger_questions",
        "train.curriculum_questions",
        "train.keep_checkpoints",
        "train.report_to",
        "train.tracker_dir",
        "solver.model",
        "solver.batch_size",
        "solver.group_size",
        "solver.max_steps",
        "solver.max_new_tokens",
        "solver.learning_rate",
        "solver.lr_scheduler",
        "solver.lr_span",
        "solver.lr_warmup",
        "solver.keep_optimizer",
        "solver.reward",
        "solver.wrong_label_share",
        "solver.anchor_share",
    ]
    assert settings(Config())[0].key == "db"


def test_a_config_stored_by_an_earlier_version_is_not_read_by_the_method_config() -> None:
    """``run.started`` of a sim run trained before the role sections (``--seed 3 --run eq``)
    names fields by names never released: the method's reader takes the current shape only
    (the run.started event class turns an older stored shape into it when a log is read)."""
    stored = json.loads((DATA / "run-started-config-flat-roles.json").read_text(encoding="utf-8"))
    assert "solver_group_size" in stored["grpo"] and "solver_model" in stored["hf"]
    with pytest.raises(ConfigError, match=r"unknown config field 'grpo.challenger_batch_size'") as refused:
        config_from_record({**stored, "k": 0.5})
    assert refused.value.key.startswith("grpo.")


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
    from diagevo.train.sim.backend import SimBackend

    cfg = load_config(None, ["sim.params.eval_samples=2", "sim.params.world_seed=7"])
    backend = SimBackend(cfg, embedder=None)
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
        "solver.max_steps=3",
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
    expected = load_config(ROOT / "configs" / "tiny-hf.toml", ["solver.max_steps=3", 'train.out_dir="ck"'])
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
