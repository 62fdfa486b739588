"""The config a log's ``run.started`` carries: one schema, checked at ingest with the field named,
and whatever ingest accepts every later command reads (diagnose, the round protocol, replay,
report)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagevo.config.sections import MethodConfig, config_from_record
from diagevo.errors import BadInput
from diagevo.log import open_log
from diagevo.rounds import config_record, run_config
from diagevo.schemas import InvalidEvent
from diagevo.train.config import Config, load_config
from tests.llm_server import LLMServer
from tests.logs import ForgedRow, wire_event
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_diagnosis_pipeline import NEW, NEW_LABEL, j

RUN = "dg"


def log(config: dict[str, Any]) -> str:
    """A run from another trainer: started with ``config``, round 1 over, nothing remembered."""
    events = [
        {"type": "run.started", "run": RUN, "round": 0, "event_id": "start", "data": {"config": config, "seed": 0}},
        {"type": "round.committed", "run": RUN, "round": 1, "event_id": "commit-1", "data": {}},
    ]
    return "".join(json.dumps(e) + "\n" for e in events)


@pytest.fixture
def srv() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def test_a_log_with_the_paper_names_is_ingested_and_every_command_reads_it(
    srv: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'dg.db'}"
    src = tmp_path / "dg.jsonl"
    src.write_text(log({"k": 0.5, "theta_up": 0.7}), encoding="utf-8")
    code, _, err = run_cli(capsys, "memory", "ingest", str(src), "--db", db)
    assert code == 0, err
    with open_log(db) as store:
        cfg = run_config(store, RUN)
    assert (cfg.memory.k, cfg.memory.theta_up) == (0.5, 0.7) and cfg.solver == MethodConfig().solver

    # the round protocol: round 2 opened, requests drawn from the schedule of the run's config
    code, _, err = run_cli(capsys, "round", "start", "--run", RUN, "--db", db)
    assert code == 0, err
    code, out, err = run_cli(capsys, "round", "requests", "--n", "4", "--run", RUN, "--db", db, "--json")
    assert code == 0, err
    assert len(json.loads(out)["requests"]) == 4
    # the retained question whose failure is diagnosed below (diagnose records that failure)
    questions = tmp_path / "questions.jsonl"
    question = {"question_id": "q1", "mode": "free", "text": "Solve x^2 = 4 for x.", "answers": ["2"] * 9 + ["1"] * 3}
    questions.write_text(json.dumps(question) + "\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "round", "record", str(questions), "--run", RUN, "--db", db)
    assert code == 0, err
    code, _, err = run_cli(capsys, "round", "promote", "--run", RUN, "--db", db, "--json")  # θ_up of the config
    assert code == 0, err

    # diagnose: Prompt 1 finds a new cause, Prompt 3 opens a node for it
    failures = tmp_path / "failures.jsonl"
    row = {
        "failure_id": "f1",
        "question_id": "q1",
        "question": "Solve x^2 = 4 for x.",
        "pseudo_label": "2",
        "response": "x = -2",
        "reference": "x = 2",
        "known_causes": [],
    }
    failures.write_text(json.dumps(row) + "\n", encoding="utf-8")
    srv.script("extract", j(matched_cause_id=None, error_cause=NEW))
    srv.script("assign_node", j(create_new_node=True, new_node_label=NEW_LABEL, assigned_node=None))
    code, out, err = run_cli(
        capsys,
        "diagnose",
        str(failures),
        "--run",
        RUN,
        "--round",
        "2",
        "--llm-url",
        srv.url,
        "--model",
        "m",
        "--embedder",
        srv.url,
        "--embed-model",
        "e",
        "--db",
        db,
        "--json",
    )
    assert code == 0, err
    assert (json.loads(out)["new_causes"], json.loads(out)["new_nodes"]) == (1, 1)

    # the round's commit, replay and the report
    code, out, err = run_cli(capsys, "round", "commit", "--run", RUN, "--db", db, "--json")
    assert code == 0, err
    assert json.loads(out)["failures"] == 1  # recorded by diagnose
    code, out, err = run_cli(capsys, "memory", "replay", "--round", "2", "--run", RUN, "--db", db, "--json")
    assert code == 0, err
    assert [c["description"] for c in json.loads(out)["causes"]] == [NEW]
    code, _, err = run_cli(capsys, "report", "--db", db, "--run", RUN, "-o", str(tmp_path / "dg.html"))
    assert code == 0, err
    assert "theta_up" in (tmp_path / "dg.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"k": 0.5, "theta_upp": 0.7}, "run.started: data.config: unknown field 'theta_upp' (did you mean 'theta_up'"),
        (
            {"k": 0.5, "memory": {"kk": 1}},
            "run.started: data.config: unknown config field 'memory.kk' (did you mean memory.k?)",
        ),
        ({"k": 0.5, "theta_up": 2}, "run.started: data.config: theta_up: Input should be less than or equal to 1"),
        (
            {"k": 0.5, "solver": {"group_size": 1}},
            "run.started: data.config: solver.group_size: Input should be greater than or equal to 2",
        ),
        ({"theta_up": 0.7}, "run.started: data.config: config needs a positive k"),
        (
            {"memory": {"theta_upp": 0.7}},
            "run.started: data.config: unknown config field 'memory.theta_upp' (did you mean memory.theta_up?)",
        ),  # not k
    ],
)
def test_a_config_out_of_the_schema_is_refused_at_ingest_with_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], message: str
) -> None:
    path = tmp_path / "x.db"
    src = tmp_path / "x.jsonl"
    src.write_text(log(config), encoding="utf-8")
    code, _, err = run_cli(capsys, "memory", "ingest", str(src), "--db", f"sqlite:///{path}")
    assert_one_line_error(code, err, "line 1: " + message)
    assert not path.exists()  # nothing stored


def test_the_schema_takes_the_nested_shape_of_diagevos_own_runs() -> None:
    cfg = load_config(None, ["memory.theta_up=0.8", "solver.max_steps=3", 'diagnosis.api_key="sk-x"'])
    record = config_record(cfg)  # what run.started stores
    assert record["memory"]["k"] == 0.5 and "k" not in record and record["diagnosis"]["api_key"] == "***"  # k once
    back = config_from_record(record)  # the method's part checked, the rest carried: read back whole
    assert Config.of(back) == cfg.model_copy(update={"diagnosis": cfg.diagnosis.model_copy(update={"api_key": None})})
    # both shapes at once: a flat name wins over its field
    both = config_from_record(
        {"k": 1.0, "theta_dup": 0.6, "memory": {"k": 0.5, "theta_up": 0.9}, "db": "sqlite:///elsewhere.db"}
    )
    assert (both.memory.k, both.memory.theta_up, both.diagnosis.theta_dup) == (1.0, 0.9, 0.6)
    assert "db" not in both.redacted()


def test_run_configured_is_held_to_the_same_schema() -> None:
    wire_event("run.configured", RUN, 2, "c", config={"k": 1.0, "tau": 2.0})
    with pytest.raises(InvalidEvent, match=r"run.configured: data.config: unknown field 'taus'"):
        wire_event("run.configured", RUN, 2, "c", config={"k": 1.0, "taus": 2.0})


def test_a_log_stored_before_the_check_names_the_field_when_read(tmp_path: Path) -> None:
    """The store does not validate (ingest and producers do): a run.started written by an older
    version with a stray field reads back as an error naming it, not pydantic's count."""
    with open_log(f"sqlite:///{tmp_path / 'old.db'}") as store:
        store.append(
            [
                ForgedRow(
                    type="run.started",
                    run=RUN,
                    round=0,
                    event_id="s",
                    data={"config": {"k": 0.5, "note": "x"}, "seed": 0},
                )
            ]
        )
        said = r"the config of run 'dg' at seq 1 \(run.started of round 0\) cannot be used: unknown field 'note'"
        with pytest.raises(BadInput, match=said):
            run_config(store, RUN)
