"""The CLI loads a command's module when that command runs: ``--help`` lists every command by
the line of :data:`diagevo.cli.app.COMMANDS` without importing any, and that line is the loaded
command's help (stated once: in the table)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from diagevo.cli.app import LazyGroup, build
from diagevo.log import open_log
from tests.logs import Log

ROOT = Path(__file__).resolve().parent.parent


def test_each_listed_line_is_the_commands_help() -> None:
    root = build()
    for group in (root, *(root.commands[name] for name in ("memory", "round", "runs"))):
        assert isinstance(group, LazyGroup)
        for name, lazy in group.lazy.items():
            command = group.commands[name]
            assert command.short_help is None and command.help == lazy.help, name


ENTRY = "from diagevo.cli.app import main\nmain()"  # the installed ``diagevo`` script
AS_MODULE = "import runpy\nrunpy.run_module('diagevo.cli.app', run_name='__main__', alter_sys=True)"  # python -m


def imported(*args: str, run: str = ENTRY) -> set[str]:
    """Every module imported by ``diagevo ARGS`` (in a fresh interpreter)."""
    code = (
        "import contextlib, io, sys\n"
        f"sys.argv = ['diagevo', *{list(args)!r}]\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n"
        f"        exec({run!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(' '.join(sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return set(done.stdout.split())


def loaded(*args: str, run: str = ENTRY) -> set[str]:
    """The ``diagevo.cli`` modules of :func:`imported`."""
    return {m for m in imported(*args, run=run) if m.startswith("diagevo.cli.")}


@pytest.mark.parametrize("run", [ENTRY, AS_MODULE], ids=["diagevo", "python -m diagevo.cli.app"])
def test_help_imports_no_command_and_a_command_its_own_modules(tmp_path: Path, run: str) -> None:
    shared = {
        "diagevo.cli.app",
        "diagevo.cli.common",
        "diagevo.cli.ending",
        "diagevo.cli.examples",
        "diagevo.cli.fixes",
        "diagevo.cli.groups",
        "diagevo.cli.safe",
    }
    assert loaded("--help", run=run) == shared
    assert loaded("memory", "--help", run=run) == shared
    stats = loaded("memory", "stats", "--db", f"sqlite:///{tmp_path / 'x.db'}", run=run)  # no such database: its error
    helpers = {"diagevo.cli.store", "diagevo.cli.tables", "diagevo.cli.progress"}
    assert stats - shared - helpers == {"diagevo.cli.follow", "diagevo.cli.stats"}


def small_log(tmp_path: Path) -> str:
    """The URL of a SQLite log of one committed round with a cause ``C1``."""
    db = f"sqlite:///{tmp_path / 'x.db'}"
    with open_log(db) as store:
        store.append(Log().node("N1").cause("C1", "N1").commit().events())
    return db


READS = [("why", "C1"), ("events", "--cause", "C1"), ("replay", "--round", "1"), ("show",)]


@pytest.mark.parametrize("read", READS, ids=[r[0] for r in READS])
def test_a_read_of_the_memory_loads_neither_the_interchange_nor_verification(
    tmp_path: Path, read: tuple[str, ...]
) -> None:
    """``memory why`` and the other reads do not pay for what ``ingest``, ``export`` and
    ``verify`` need: the JSONL format, the verification of every view, the vector index's numpy;
    nor for SQLAlchemy (a SQLite log is read without it)."""
    heavy = {"diagevo.interchange", "diagevo.views.verify", "diagevo.cli.operate", "numpy", "sqlalchemy"}
    assert heavy & imported("memory", *read, "--db", small_log(tmp_path)) == set()


@pytest.mark.parametrize("read", [*READS, ("stats",)], ids=[*(r[0] for r in READS), "stats"])
def test_a_read_of_the_memory_loads_not_the_config_models(tmp_path: Path, read: tuple[str, ...]) -> None:
    """The reads take a run's config as stored: neither the config's models (pydantic's, which
    validate a config for a round, a fork or a what-if) nor its TOML parser, nor the counting
    rules (which verify, ingest and the checkpoint refusals check a log against) load with them."""
    heavy = {"diagevo.config.sections", "tomllib", "diagevo.memory.counting"}
    assert heavy & imported("memory", *read, "--db", small_log(tmp_path)) == set()


@pytest.mark.parametrize("command", ["verify", "export"])
def test_verify_and_export_load_not_the_vector_index(tmp_path: Path, command: str) -> None:
    """Verification checks the vector index's saved state by its name alone: neither it nor
    the export (whose format checks a fork's source as verification does) loads the index's
    numpy, nor SQLAlchemy for a SQLite log."""
    heavy = {"diagevo.views.index", "numpy", "sqlalchemy"}
    assert heavy & imported("memory", command, "--db", small_log(tmp_path)) == set()


@pytest.mark.parametrize("command", ["start", "requests", "promote", "commit"])
def test_the_round_protocol_loads_verl_for_record_alone(tmp_path: Path, command: str) -> None:
    """verl's module (its reward functions' HTTP client, numpy, BLEU) is for ``round record
    --from-verl``: the protocol's other commands start without it."""
    assert "diagevo.verl" not in imported("round", command, "--help")
    assert "diagevo.verl" in imported("round", "record", "--help")


def test_an_error_is_told_without_the_training_preflight(tmp_path: Path) -> None:
    """A command's error (here an unknown cause) is told without the preflight's modules (its
    embedder's numpy, the doctor): NotReady, the one error told need by need, is the errors' own."""
    heavy = {"diagevo.doctor", "numpy"}
    assert heavy & imported("memory", "why", "C9", "--db", small_log(tmp_path)) == set()


def test_the_list_of_runs_loads_not_the_round_protocol(tmp_path: Path) -> None:
    """``runs`` reads; ``runs tag`` and ``runs note`` write through the round protocol, loaded
    when one of them runs."""
    assert "diagevo.rounds" not in imported("runs", "--db", small_log(tmp_path))
    assert "diagevo.rounds" in imported("runs", "tag", "--help")


HELPS = [
    ("train", "--help"),
    ("gpu-check", "--help"),
    ("models", "--help"),
    ("round", "start", "--help"),
    ("doctor", "--help"),
]


@pytest.mark.parametrize("args", HELPS, ids=[" ".join(a[:-1]) for a in HELPS])
def test_the_training_loop_loads_when_a_run_trains(args: tuple[str, ...]) -> None:
    """A command's help loads not the training loop (its diagnosis pipeline and HTTP clients):
    ``gpu-check`` loads its check when it runs, and ``models`` builds models without it. Readers of
    a run's config (the round protocol, ``doctor``) load not even how a run is trained."""
    loaded = imported(*args)
    assert "diagevo.train.loop" not in loaded
    if args[0] in ("round", "doctor", "models"):
        assert "diagevo.train.run" not in loaded
