"""Bad input, bad places and bad endpoints: one line on stderr, a non-zero exit, nothing stored,
nothing created, and never a byte written into a database that is not diagevo's."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from diagevo.cli.app import app
from diagevo.log import open_log
from diagevo.train.config import Config
from tests.llm_server import LLMServer
from tests.test_cli_memory import assert_one_line_error, case_study, run_cli, write
from tests.test_diagnosis_cli import line
from tests.test_diagnosis_pipeline import D1, L1, RUN, seed

READERS = [
    ["memory", "stats"],
    ["memory", "replay", "--round", "1"],
    ["memory", "show"],
    ["memory", "why", "C1"],
    ["memory", "events"],
    ["memory", "export"],
    ["memory", "verify"],
    ["memory", "plot"],
    ["memory", "reindex"],
    ["db", "current"],
]


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a[:2]))
def test_read_commands_do_not_create_a_missing_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    path = tmp_path / "nothing-here.db"
    code, _, err = run_cli(capsys, *args, "--db", f"sqlite:///{path}")
    assert_one_line_error(code, err, f"no database at {path}")
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_writers_create_a_missing_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'new.db'}"
    assert run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)[0] == 0
    assert run_cli(capsys, "memory", "stats", "--db", db)[0] == 0


def _foreign_sqlite(path: Path) -> bytes:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE foo (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO foo (name) VALUES ('keep me')")
    con.commit()
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--rounds", "1", "--quiet"],
        ["memory", "ingest", "LOG"],
        ["memory", "stats"],
        ["db", "upgrade"],
        ["db", "current"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_foreign_database_is_refused_byte_for_byte_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    path = tmp_path / "app.db"
    before = _foreign_sqlite(path)
    log = str(write(tmp_path, case_study()))
    code, out, err = run_cli(capsys, *[log if a == "LOG" else a for a in args], "--db", f"sqlite:///{path}")
    if args[:2] == ["db", "current"]:  # a reader that reports, not refuses
        assert code == 0 and "not a diagevo database" in out
    else:
        assert_one_line_error(code, err, "is not a diagevo database: it holds foo")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "log.jsonl"]  # no -wal, no index


@pytest.mark.parametrize("rounds", ["0", "-3"])
def test_train_refuses_a_round_count_below_one(tmp_path: Path, capsys: pytest.CaptureFixture[str], rounds: str) -> None:
    path = tmp_path / "t.db"
    code, _, err = run_cli(capsys, "train", "--rounds", rounds, "--db", f"sqlite:///{path}", "--quiet")
    assert_one_line_error(code, err, "--rounds", "greater than or equal to 1", "'diagevo train --help'")
    assert not path.exists()


def test_train_json_without_dry_run_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.db"
    code, out, err = run_cli(capsys, "train", "--rounds", "1", "--json", "--db", f"sqlite:///{path}")
    assert_one_line_error(code, err, "--json goes with --dry-run", "memory stats --json")
    assert out == "" and not path.exists()


def test_resuming_a_run_that_does_not_exist_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'm.db'}"
    run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)
    with open_log(db) as s:
        before = (s.runs(), s.last_seq("r1"))
    code, _, err = run_cli(capsys, "train", "--resume", "--run", "nosuch", "--db", db, "--quiet")
    assert_one_line_error(code, err, "no run 'nosuch' to resume")
    assert "did you mean" not in err
    code, _, err = run_cli(capsys, "train", "--resume", "--run", "R1", "--db", db, "--quiet")
    assert_one_line_error(code, err, "no run 'R1' to resume in", "(did you mean 'r1'?)")
    with open_log(db) as s:
        assert (s.runs(), s.last_seq("r1")) == before


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("memory.fixed_free_ratio=1.5", "config: memory.fixed_free_ratio: Input should be less than or equal to 1"),
        ("memory.theta_up=-0.1", "config: memory.theta_up: Input should be greater than or equal to 0"),
        ("solver.group_size=0", "config: solver.group_size: Input should be greater than or equal to 2"),
        (
            "grpo.solver_group_size=0",
            "unknown config field 'grpo.solver_group_size' (did you mean --set solver.group_size=0?)",
        ),  # a name never released: refused, the field meant named
        (
            "grpo.construction_responses=0",
            "config: grpo.construction_responses: Input should be greater than or equal to 1",
        ),
        (
            "diagnosis.dedup_candidates=0",
            "config: diagnosis.dedup_candidates: Input should be greater than or equal to 1",
        ),
        ("train.rounds=0", "config: train.rounds: Input should be greater than or equal to 1"),
        (
            "sim.diagnostician_error_rate=2",
            "config: sim.diagnostician_error_rate: Input should be less than or equal to 1",
        ),
        ("filter.p_low=0.9", "config: filter: need p_low <= p_high"),
    ],
)
def test_numeric_config_fields_have_ranges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, message: str
) -> None:
    path = tmp_path / "c.db"
    code, _, err = run_cli(capsys, "train", "--db", f"sqlite:///{path}", "--quiet", "--set", override)
    assert_one_line_error(code, err, message)
    assert not path.exists()


def _numeric_fields(model: type[Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        sub = getattr(ann, "model_fields", None)
        if sub is not None:
            out += _numeric_fields(ann, f"{prefix}{name}.")
        elif any(t in str(ann) for t in ("int", "float")) and "dict" not in str(ann):
            out.append((prefix + name, field))
    return out


def test_every_numeric_config_field_has_a_range() -> None:
    fields = _numeric_fields(Config)
    assert len(fields) > 30
    bare = [name for name, f in fields if not any(hasattr(m, a) for m in f.metadata for a in ("ge", "gt", "le", "lt"))]
    assert bare == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "/nonexistent/x.toml"], "no config file at /nonexistent/x.toml"),
        (["--config", "/"], "config / is a directory"),
    ],
)
def test_a_bad_config_path_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, "train", "--db", f"sqlite:///{tmp_path / 'x.db'}", "--quiet", *args)
    assert_one_line_error(code, err, message)
    assert "Errno" not in err


def test_ingest_of_an_empty_file_or_a_directory_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.db"
    db = f"sqlite:///{path}"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n", encoding="utf-8")
    code, _, err = run_cli(capsys, "memory", "ingest", str(empty), "--db", db)
    assert_one_line_error(code, err, f"{empty} is empty: no events to ingest")
    code, _, err = run_cli(capsys, "memory", "ingest", str(tmp_path), "--db", db)
    assert_one_line_error(code, err, f"{tmp_path} is a directory")
    assert not path.exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["memory", "replay"], "Missing option '--round'"),
        (["memory", "stats", "--bogus"], "No such option: --bogus"),
        (
            ["diagnose", "f.jsonl", "--run", "r", "--round", "1", "--concurrency", "0"],
            "Invalid value for '--concurrency'",
        ),
        (["train", "--seed", "-1"], "Invalid value for '--seed'"),
        # the form that works, not only the options spelled alike (click's guess for --to is --json)
        (
            ["memory", "diff", "--to", "b"],
            "No such option: --to (did you mean --json?); diagevo memory diff needs ",
        ),
        (["memory", "diff", "--to", "b"], "needs --run A --run B"),
        (["memory", "diff"], "Missing option '--run'; diagevo memory diff needs --run A --run B"),
        (["diagnose", "--rnu", "r"], "diagevo diagnose needs --run RUN"),
    ],
)
def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    code, out, err = run_cli(capsys, *args)
    assert_one_line_error(code, err, needle, "--help")
    assert code == 2 and out == ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_diagnose_against_an_unreachable_endpoint_stops_before_appending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'd.db'}"
    with open_log(db) as store:
        seed(store, {"N1": (L1, [("C1", D1)])})
        before = store.last_seq(RUN)
    failures = tmp_path / "failures.jsonl"
    failures.write_text(line("f1") + "\n", encoding="utf-8")
    url = f"http://127.0.0.1:{_free_port()}/v1"
    code, _, err = run_cli(
        capsys,
        "diagnose",
        str(failures),
        "--run",
        RUN,
        "--round",
        "2",
        "--llm-url",
        url,
        "--db",
        db,
        "--embedder",
        "local",
    )
    assert_one_line_error(code, err, f"cannot reach the diagnostician at {url}: connection refused")
    assert "timed out" not in err
    with open_log(db) as store:
        assert store.last_seq(RUN) == before
    # an embeddings endpoint that is down is caught the same way, before the first Prompt 1
    with LLMServer() as srv:
        code, _, err = run_cli(
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
            "--db",
            db,
            "--embedder",
            url,
            "--embed-model",
            "m",
        )
        assert_one_line_error(code, err, f"cannot reach the embedder at {url}: connection refused")
        assert not srv.calls("extract")
    with open_log(db) as store:
        assert store.last_seq(RUN) == before


def test_diagnose_of_a_directory_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        capsys, "diagnose", str(tmp_path), "--run", "r", "--round", "1", "--llm-url", "http://127.0.0.1:1/v1"
    )
    assert_one_line_error(code, err, "is a directory")


MEMORY_READERS = {"replay", "show", "why", "stats", "events", "export", "verify", "plot"}


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return [(path, cmd)]
    return [c for name, sub in subs.items() for c in _commands(sub, (*path, name))]


def test_every_option_has_help_text() -> None:
    """Except those of the memory read commands and of ablate, which have their own owners' tests."""
    import typer

    missing = []
    for path, cmd in _commands(typer.main.get_command(app)):
        if path[0] == "ablate" or (path[0] == "memory" and path[-1] in MEMORY_READERS):
            continue
        missing += [f"{' '.join(path)} {p.opts}" for p in cmd.params if not getattr(p, "help", None)]
    assert missing == []


def test_no_stray_blank_line_before_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --quiet and without a terminal, an error is the only thing printed."""
    db = f"sqlite:///{tmp_path / 'm.db'}"
    run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)
    code, out, err = run_cli(capsys, "train", "--run", "r1", "--db", db)
    assert_one_line_error(code, err, "run 'r1' already exists")
    assert out == ""


def test_a_bug_is_one_internal_error_line_with_its_traceback_in_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ValueError that no raise site declared is a bug: not a "user error", but one line that
    names a file with the whole traceback (exit 70)."""
    import diagevo.views.queries

    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)[0] == 0

    def broken(*_a: Any, **_k: Any) -> Any:
        raise ValueError("an undeclared slip")

    monkeypatch.setattr(diagevo.views.queries, "accumulate", broken)  # what memory stats reads
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    code, _, err = run_cli(capsys, "memory", "stats", "--db", db)
    assert code == 70
    assert_one_line_error(code, err, "internal error: ValueError: an undeclared slip (traceback written to ")
    path = Path(err.split("traceback written to ")[1].strip().rstrip(")"))
    assert path.parent == tmp_path and "Traceback" in path.read_text() and "an undeclared slip" in path.read_text()


def test_declared_errors_are_one_line_and_derive_from_diagevo_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from diagevo import errors
    from diagevo.fork import ForkError
    from diagevo.interchange import IngestError
    from diagevo.log import ConflictError, SchemaOutdated, StoreError
    from diagevo.memory.fold import InvariantError
    from diagevo.rounds import ProtocolError

    for cls in (StoreError, IngestError, InvariantError, ProtocolError, ForkError):
        assert issubclass(cls, errors.DiagevoError), cls
    assert issubclass(ConflictError, errors.Conflict) and issubclass(SchemaOutdated, errors.NotADiagevoDatabase)
    missing = tmp_path / "models" / "nosuch"
    (tmp_path / "models").mkdir()
    from diagevo.generation.local import check_local_model

    with pytest.raises(errors.NotFound, match="no such directory"):
        check_local_model(str(missing))
    with pytest.raises(errors.BadInput, match="no network"):
        check_local_model("Qwen/Qwen3-4B-Base")


def test_a_refused_ingest_leaves_no_database_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "bogus"}\n')
    path = tmp_path / "new.db"
    code, _, err = run_cli(capsys, "memory", "ingest", str(bad), "--db", f"sqlite:///{path}")
    assert_one_line_error(code, err, "unknown event type 'bogus'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "nosuch.toml"], "no config file at nosuch.toml"),
        (["--config", "bad.toml"], "bad.toml: "),
        (["--set", "memory.k=-1"], "memory.k"),
    ],
)
def test_a_refused_round_start_leaves_no_database_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.toml").write_text("x = \n")
    code, _, err = run_cli(capsys, "round", "start", "--run", "r", "--db", "sqlite:///new.db", *args)
    assert_one_line_error(code, err, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


def test_version_and_help_in_the_users_terms(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.startswith("diagevo ")
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = run_cli(capsys, "train", "--help")  # a flag takes no value (--help too); --set is given many times
    assert code == 0 and "--help" in out and "<bool>" not in out
    assert "list[str]" not in out and "TEXT (repeatable)" in out
    code, out, _ = run_cli(capsys, "memory", "ingest", "--help")
    assert code == 0 and "Usage: diagevo memory ingest [OPTIONS]" in out and "file" in out.lower()
    for group in ([], ["memory"], ["round"]):  # a group alone: its help, once
        code, out, _ = run_cli(capsys, *group)
        assert code == 0 and out.count("Usage: ") == 1 and out.rstrip() == run_cli(capsys, *group, "--help")[1].rstrip()


@pytest.mark.parametrize("command", [["memory", "stats"], ["round", "start", "--run", "x"]], ids=["reader", "writer"])
def test_a_host_style_sqlite_url_suggests_three_slashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """``sqlite://diagevo.db`` makes ``diagevo.db`` a host: the error names the URL meant, nothing
    is created."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *command, "--db", "sqlite://diagevo.db")
    assert_one_line_error(code, err, "sqlite://diagevo.db names a host", "sqlite:///diagevo.db")
    code, _, err = run_cli(capsys, *command, "--db", "sqlite://runs/exp1.db")
    assert_one_line_error(code, err, "a SQLite file is sqlite:///runs/exp1.db")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["memory", "stats"], ["round", "start", "--run", "x"]], ids=["reader", "writer"])
def test_a_directory_as_sqlite_database_says_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    code, _, err = run_cli(capsys, *command, "--db", "sqlite:///configs")
    assert_one_line_error(code, err, "configs is a directory, not a SQLite database file")
    assert "disk I/O" not in err and "unable to open" not in err
    assert list((tmp_path / "configs").iterdir()) == []


@pytest.mark.parametrize("command", [["memory", "stats"], ["train", "--rounds", "1"]], ids=["reader", "writer"])
def test_a_sqlite_database_in_a_missing_directory_names_the_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *command, "--db", "sqlite:///sub/other.db")
    assert_one_line_error(code, err, "error: no directory sub to hold the database other.db")
    assert "unable to open" not in err
    (tmp_path / "notes").write_text("")
    code, _, err = run_cli(capsys, *command, "--db", "sqlite:///notes/other.db")
    assert_one_line_error(code, err, "error: notes is a file, not a directory: it cannot hold the database other.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]  # nothing created, the directory neither


@pytest.mark.parametrize(
    ("override", "meant"),
    [
        ("k=1", "--set memory.k=1"),  # a paper name
        ("theta_up=0.6", "--set memory.theta_up=0.6"),
        ("memory.kk=2", "--set memory.k=2"),  # a misspelling
        ("filter.theta_up=0.6", "--set memory.theta_up=0.6"),  # the right name in the wrong section
    ],
)
def test_an_unknown_set_field_suggests_the_dotted_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, meant: str
) -> None:
    db = tmp_path / "s.db"
    code, _, err = run_cli(capsys, "round", "start", "--run", "x", "--db", f"sqlite:///{db}", "--set", override)
    assert_one_line_error(code, err, f"did you mean {meant}?")
    assert not db.exists()
    # and the suggestion is a field the config takes
    fixed = meant.removeprefix("--set ")
    assert run_cli(capsys, "round", "start", "--run", "x", "--db", f"sqlite:///{db}", "--set", fixed)[0] == 0


def test_an_unknown_field_in_a_config_file_suggests_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[memory]\ntheta_upp = 0.6\n")
    code, _, err = run_cli(
        capsys, "round", "start", "--run", "x", "--db", f"sqlite:///{tmp_path / 'c.db'}", "--config", str(cfg)
    )
    assert_one_line_error(code, err, f"{cfg}: unknown field theta_upp in [memory] (did you mean theta_up?)")
    assert "Extra inputs" not in err


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("memroy.k=1", "unknown config section 'memroy' (did you mean memory?)"),
        ("Train.rounds=1", "unknown config section 'Train' (did you mean train?)"),
        ("sim.parms.solver_lr=1", "unknown config section 'sim.parms' (did you mean sim.params?)"),
        ("params.solver_lr=1", "unknown config section 'params' (did you mean sim.params?)"),  # the wrong level
        ("zzz.k=1", "unknown config section 'zzz' (the sections: train, grpo, challenger, solver, filter,"),
        ("memory.nope=1", "unknown config field 'memory.nope' (the fields are listed by `diagevo config`)"),
    ],
)
def test_an_unknown_set_section_suggests_the_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, message: str
) -> None:
    db = tmp_path / "s.db"
    code, _, err = run_cli(capsys, "train", "--db", f"sqlite:///{db}", "--quiet", "--set", override)
    assert_one_line_error(code, err, f"error: {message}")
    assert "Extra inputs" not in err
    assert not db.exists()


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[trian]\nrounds = 1\n", "unknown table [trian] (did you mean [train]?)"),
        ("[sim.parms]\nsolver_lr = 1\n", "unknown table [sim.parms] (did you mean [sim.params]?)"),
        ('["a b"]\nk = 1\n', "unknown table ['a b'] (the tables: [train], [grpo],"),
        ("[train]\nrounsd = 1\n", "unknown field rounsd in [train] (did you mean rounds or run?)"),
        ("[filter]\ntheta_up = 0.6\n", "unknown field theta_up in [filter] (did you mean theta_up in [memory]?)"),
        ("rounds = 1\n", "unknown field rounds at the top level (did you mean rounds in [train]?)"),
    ],
)
def test_an_unknown_table_or_field_in_a_config_file_is_named_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, message: str
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml)
    db = tmp_path / "c.db"
    code, _, err = run_cli(capsys, "train", "--db", f"sqlite:///{db}", "--quiet", "--config", str(cfg))
    assert_one_line_error(code, err, f"error: {cfg}: {message}")
    assert "Extra inputs" not in err
    assert not db.exists()


def test_a_set_override_is_named_as_such_even_beside_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[memory]\nk = 0.4\n")
    code, _, err = run_cli(capsys, "config", "--config", str(cfg), "--set", "memory.kk=2")
    assert_one_line_error(code, err, "error: unknown config field 'memory.kk' (did you mean --set memory.k=2?)")


def test_a_resumed_run_names_the_field_a_set_breaks_against_its_stored_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--resume --set`` is checked against the run's stored config, not pydantic's title line."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    args = ("train", "--db", db, "--run", "x", "--quiet")
    assert run_cli(capsys, *args, "--rounds", "1", "--set", "filter.p_high=0.5")[0] == 0
    code, _, err = run_cli(capsys, *args, "--rounds", "2", "--resume", "--set", "filter.p_low=0.6")
    assert_one_line_error(code, err, "error: config: filter: need p_low <= p_high")
    assert "validation error" not in err


def test_a_long_refusal_keeps_its_command_whole_and_cuts_its_explanation(monkeypatch: pytest.MonkeyPatch) -> None:
    """An outage's refusal names the cause at length and ends in the command that resumes the run:
    the explanation is cut at the line's 390 characters, the command never (a run stopped under a
    long folder lost the end of its resume command to the cut: a command that runs something else)."""
    from diagevo.cli import common
    from diagevo.cli.ending import one_line_of
    from diagevo.errors import RetryLater, resume_call

    monkeypatch.setattr(common, "_acting_on", [None])  # no database acted on: the command has no --db
    resume = resume_call("down", "/t/" + "d" * 150)
    command = f"`diagevo train --resume --run down --out-dir /t/{'d' * 150}`"
    why = "run 'down' stopped in round 2, not committed: 36 of 72 failures failed to diagnose (" + "x" * 300 + ")"
    message = f"{why}; once the diagnostician answers, continue with"
    said = one_line_of(RetryLater(message, resume, then=" (waited 3 s)"))
    assert said == f"{message[:389]}… {command} (waited 3 s)", said
    short = one_line_of(RetryLater("stopped; continue with", resume, then=" (waited 3 s)"))
    assert short == f"stopped; continue with {command} (waited 3 s)"
    huge = resume_call("r" * 512)  # a fix as long as a line: cut as any line is
    assert len(one_line_of(RetryLater("stopped; continue with", huge))) == 390
