"""Every runnable example of README.md and docs/ runs, against a small run made here.

Runnable blocks are fenced ```` ```console ```` (each ``$ `` line is a command; a line ending in
``\\`` continues; other lines are shown output and not compared) and ```` ```python ````. Blocks
fenced ``bash``, ``sql``, ``toml``, ``json`` show what needs a GPU, a model, a server or an
administrator, and are not run.

The commands run in a copy of a directory holding a two-round simulator run ``demo`` in
``diagevo.db`` (made once per session), with ``diagevo`` on the PATH being this checkout's CLI.
A ``diagevo train`` runs with the test's small sizes appended (fewer questions a round); the one
that made the session's run (``diagevo train --run demo --rounds 2``) is not run again in its
copy, which already holds that run, and prints what it printed then. Each file's blocks run in
order, in one copy, so a later block may use what an earlier one made.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```(console|python)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
SMALL = ["--set", "train.challenger_questions=16", "--set", "train.curriculum_questions=48"]
SESSION_TRAIN = ["train", "--run", "demo", "--rounds", "2"]

SHIM = """#!{python}
import os, sys
args = sys.argv[1:]
if args[:1] == ["train"] and "--dry-run" not in args:
    if args == {session!r} and os.path.exists(os.environ["DOCS_SESSION_OUTPUT"]):
        sys.stdout.write(open(os.environ["DOCS_SESSION_OUTPUT"], encoding="utf-8").read())
        sys.exit(0)
    args = args + {small!r}
sys.argv = ["diagevo", *args]
from diagevo.cli.app import main
main()
"""


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(path.read_text(encoding="utf-8"))]


def commands(console: str) -> list[str]:
    """The ``$ `` lines of a console block, continuation lines joined."""
    out: list[str] = []
    pending: str | None = None
    for line in console.splitlines():
        if pending is not None:
            pending += "\n" + line
        elif line.startswith("$ "):
            pending = line[2:]
        else:
            continue
        if not pending.endswith("\\"):
            out.append(pending)
            pending = None
    assert pending is None, f"a command ends with a continuation: {pending!r}"
    return out


WITH_BLOCKS = [p for p in documents() if blocks(p)]


def test_the_readme_and_the_docs_have_runnable_examples() -> None:
    counted = {p.relative_to(ROOT).as_posix(): len(blocks(p)) for p in WITH_BLOCKS}
    assert counted.get("README.md", 0) >= 2, counted
    assert sum(counted.values()) >= 10, counted
    for path in WITH_BLOCKS:
        for kind, body in blocks(path):
            assert kind == "python" or commands(body), f"{path}: a console block without a $ line"


def test_every_diagevo_name_the_pages_write_exists() -> None:
    """``docs/hooks.py`` fails the site's build on a page that names a ``diagevo.X`` diagevo does
    not have (a module, a public name, a member); the same check, on every page and the README."""
    from docs.render import unknown_names

    unknown = {p.relative_to(ROOT).as_posix(): unknown_names(p.read_text(encoding="utf-8")) for p in documents()}
    assert {p: names for p, names in unknown.items() if names} == {}
    said = "`diagevo.whatif.sweep(...)`, `diagevo.Round.next_step`, `diagevo.Round.skip`, `sqlite:///diagevo.db`"
    assert unknown_names(said) == ["diagevo.Round.skip", "diagevo.whatif.sweep"]


@pytest.fixture(scope="module")
def session_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A directory with the run ``demo`` (two small simulator rounds) and the environment that
    puts this checkout's ``diagevo`` on the PATH."""
    base = tmp_path_factory.mktemp("docs-run")
    bin_dir = tmp_path_factory.mktemp("docs-bin")
    shim = bin_dir / "diagevo"
    shim.write_text(SHIM.format(python=sys.executable, session=SESSION_TRAIN, small=SMALL), encoding="utf-8")
    shim.chmod(0o755)
    output = tmp_path_factory.mktemp("docs-out") / "train.txt"
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": str(ROOT),
        "HOME": str(base),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "COLUMNS": "100",
        "DOCS_SESSION_OUTPUT": str(output),
    }
    done = subprocess.run(
        [str(shim), *SESSION_TRAIN],
        cwd=base,
        env={**env, "DOCS_SESSION_OUTPUT": str(output) + ".none"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output.write_text(done.stdout, encoding="utf-8")
    return base, env


@pytest.mark.parametrize("path", WITH_BLOCKS, ids=[p.relative_to(ROOT).as_posix() for p in WITH_BLOCKS])
def test_every_example_runs(path: Path, session_run: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    base, env = session_run
    work = tmp_path / "work"
    shutil.copytree(base, work)
    for kind, body in blocks(path):
        if kind == "python":
            done = subprocess.run([sys.executable, "-c", body], cwd=work, env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"{path.name}: python block failed:\n{body}\n{done.stderr[-3000:]}"
            continue
        for command in commands(body):
            words = shlex.split(command.replace("\\\n", " "))
            assert words and words[0] == "diagevo", f"{path.name}: only diagevo commands are run here: {command!r}"
            done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"{path.name}: `{command}` exited {done.returncode}:\n{done.stderr[-3000:]}"


def test_every_file_beside_the_database_is_in_the_getting_started_table(
    session_run: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """What a run and a read leave beside ``diagevo.db`` (the index, checkpoints, writer leases,
    SQLite's ``-wal`` and ``-shm``) is each a row of "What each file is"."""
    base, env = session_run
    work = tmp_path / "work"
    shutil.copytree(base, work)
    done = subprocess.run(["diagevo", "memory", "stats"], cwd=work, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    table = page.split("## What each file is", 1)[1].split("\n\n", 2)[1]
    beside = sorted(p.name for p in work.iterdir() if p.name.startswith("diagevo."))
    assert {"diagevo.db", "diagevo.diagevo"} <= set(beside), beside
    assert [n for n in beside if f"`{n}`" not in table and f"`{n}/" not in table] == []
