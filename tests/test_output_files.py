"""Output files are written safely (issue 28, item 8): through a new temporary file of an
unpredictable name, created with O_EXCL and never through a symbolic link, replaced atomically
(a symbolic link at the output itself is refused);
a label that becomes a path must be a plain name.

The attacks: a symlink at the old predictable ``report.html.tmp``, at the very temporary name
the writer draws (its random part forced), and at the output itself, each pointing at a victim
file that must come through untouched; ``eval --bench ../x=FILE`` and friends, which must not
write outside ``--out``; a symlink planted where eval appends its per-question outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from diagevo.errors import BadInput
from diagevo.files.written import plain_name, replaced
from diagevo.log import open_log
from diagevo.log.paths import beside_database, run_dir
from tests.input_cases import cli
from tests.llm_server import LLMServer
from tests.logs import wire_event
from tests.test_cli_memory import case_study

FIXTURES = Path(__file__).resolve().parent / "data" / "benchmarks"
GSM8K = FIXTURES / "gsm8k_main_test.parquet"
VICTIM = "precious: must not change\n"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("files")
    url = f"sqlite:///{root / 'f.db'}"
    log = root / "case.jsonl"
    log.write_text(case_study().jsonl(), encoding="utf-8")
    code, _, err = cli("memory", "ingest", str(log), "--db", url)
    assert code == 0, err
    return url


WRITERS = {
    "report": (["report", "-o"], "out.html"),
    "export": (["memory", "export", "-o"], "out.jsonl"),
    "plot-svg": (["memory", "plot", "-o"], "out.svg"),
    "plot-csv": (["memory", "plot", "-o"], "out.csv"),
    "stats-csv": (["memory", "stats", "-o"], "out.csv"),
}


def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim.txt"
    v.write_text(VICTIM, encoding="utf-8")
    return v


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".tmp") and not p.is_symlink())


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_symlink_at_the_old_temporary_name_is_not_followed(db: str, tmp_path: Path, writer: str) -> None:
    args, name = WRITERS[writer]
    v = victim(tmp_path)
    out = tmp_path / name
    (tmp_path / (name + ".tmp")).symlink_to(v)
    code, _, err = cli(*args, str(out), "--db", db)
    assert code == 0, err
    assert v.read_text(encoding="utf-8") == VICTIM and out.is_file() and out.stat().st_size > 0
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_symlink_at_the_drawn_temporary_name_is_not_opened(
    db: str, tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attacker guessed the random part: O_EXCL refuses the name, the writer draws another."""
    import diagevo.files.written

    draws = iter(["guessed", "fresh"])
    monkeypatch.setattr(diagevo.files.written.secrets, "token_hex", lambda _n: next(draws))
    args, name = WRITERS[writer]
    v = victim(tmp_path)
    out = tmp_path / name
    planted = tmp_path / f".{name}.guessed.tmp"
    planted.symlink_to(v)
    code, _, err = cli(*args, str(out), "--db", db)
    assert code == 0, err
    assert v.read_text(encoding="utf-8") == VICTIM and out.is_file() and not out.is_symlink()
    assert planted.is_symlink() and leftovers(tmp_path) == []


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_symlink_at_the_output_is_neither_written_through_nor_replaced(db: str, tmp_path: Path, writer: str) -> None:
    """Refused in one line (issue 47): followed, a planted link would overwrite its target;
    replaced, the user's own link (to ``/proc/self/fd/1``, say) would be lost."""
    args, name = WRITERS[writer]
    v = victim(tmp_path)
    out = tmp_path / name
    out.symlink_to(v)
    code, _, err = cli(*args, str(out), "--db", db)
    assert code == 1 and "is a symbolic link" in err and len(err.strip().splitlines()) == 1, err
    assert v.read_text(encoding="utf-8") == VICTIM and out.is_symlink() and leftovers(tmp_path) == []


def test_replaced_is_all_or_nothing(tmp_path: Path) -> None:
    out = tmp_path / "x.txt"
    out.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError):
        with replaced(out) as fh:
            fh.write("half of the new")
            raise RuntimeError("killed mid-write")
    assert out.read_text(encoding="utf-8") == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"]
    with replaced(out) as fh:
        fh.write("new")
    assert out.read_text(encoding="utf-8") == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"]
    mask = os.umask(0o022)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask  # a new file's usual mode, not mkstemp's 0600


@pytest.mark.parametrize(
    "name", ["../x", "gsm8k/../../x", "../../evil:gsm8k", "a/b", "a\\b", ".hidden", "-x", "gsm8k\x1b[2J", "", "x" * 201]
)
def test_a_label_that_is_no_plain_name_is_refused(name: str) -> None:
    with pytest.raises(BadInput, match="is not a plain name"):
        plain_name(name, "--bench NAME")


@pytest.mark.parametrize(
    "bench",
    [
        f"../x={GSM8K}",
        f"gsm8k/../../escaped={GSM8K}",
        f"../../escaped:gsm8k={GSM8K}",
        f"gsm8k\\..\\x={GSM8K}",
        f"-gsm8k={GSM8K}",
    ],
)
def test_eval_refuses_a_bench_label_that_leaves_out(tmp_path: Path, bench: str) -> None:
    out = tmp_path / "work" / "out"
    code, _, err = cli("eval", "--model", "m", "--url", "http://127.0.0.1:9/v1", "--out", str(out), "--bench", bench)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "is not a plain name" in err, err
    assert not (tmp_path / "work").exists() and not (tmp_path / "escaped.jsonl").exists()


def test_eval_of_a_run_id_with_dots_stays_under_out(tmp_path: Path) -> None:

    db = f"sqlite:///{tmp_path / 'r.db'}"
    run = "../../escaped"
    with open_log(db, create=True) as store:
        config = {"k": 0.5, "train": {"backend": "hf"}, "solver": {"model": "base"}}
        store.append(
            [
                wire_event("run.started", run, 0, "s", config=config, seed=0),
                wire_event("round.started", run, 1, "r1"),
                wire_event("checkpoint.written", run, 1, "c1", path="round001-solver", phase="solver"),
                wire_event("round.committed", run, 1, "k1"),
            ]
        )
        (run_dir(beside_database(store.url, ".runs"), run) / "round001-solver").mkdir(parents=True)
    out = tmp_path / "a" / "b" / "out"
    with LLMServer() as srv:
        srv.default("other", lambda body: ["$\\boxed{3}$"] * body.get("n", 1))
        code, stdout, err = cli(
            "eval",
            "--run",
            run,
            "--url",
            srv.url,
            "--db",
            db,
            "--out",
            str(out),
            "--rounds",
            "1",
            "--bench",
            f"gsm8k={GSM8K}",
            "--json",
        )
    assert code == 0, err
    written = [p for p in tmp_path.rglob("*.jsonl")]
    assert written and all(p.is_relative_to(out) for p in written), written
    assert json.loads(stdout)["results"][0]["n"] == 3


def test_eval_does_not_append_through_a_planted_symlink(tmp_path: Path) -> None:
    v = victim(tmp_path)
    out = tmp_path / "out"
    (out / "m").mkdir(parents=True)
    (out / "m" / "gsm8k.jsonl").symlink_to(v)
    with LLMServer() as srv:
        srv.default("other", lambda body: ["$\\boxed{3}$"] * body.get("n", 1))
        code, _, err = cli("eval", "--model", "m", "--url", srv.url, "--out", str(out), "--bench", f"gsm8k={GSM8K}")
    assert code == 1 and "symbolic link" in err and len(err.strip().splitlines()) == 1, err
    assert v.read_text(encoding="utf-8") == VICTIM
