"""Only ``cli/`` spells a command line: the library says what went wrong and what fixes it as
data (:class:`diagevo.errors.Fix`, its steps: a :class:`diagevo.errors.Call` of the library, ...),
and the CLI spells that for the shell and the installation it runs in (a Python caller reads it
in words, or as the Python call).

The test reads every string literal of the library that is not a docstring and refuses the
spellings of a command line: ``diagevo SUBCOMMAND``, ``pip install``, ``make TARGET``, a
subcommand with its options (``train --resume``), ``pass --FLAG`` (``with``, ``use``, ``another
--FLAG``), ``source .venv/...``, a command of the system (``sudo``, ``apt-get``, ``rm -rf``), and
any flag inside words (a flag alone is an argument of a command line the library runs: vLLM's,
accelerate's, pip's). A system package, a service to start, a folder to remove are fields of
:class:`~diagevo.errors.Fix` the CLI spells (issue 84)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from diagevo.errors import Argument, BadInput, Call, Fix, Override

ROOT = Path(__file__).resolve().parent.parent
SUBCOMMANDS = "train|memory|round|runs|doctor|diagnose|eval|report|db|models|config|gpu-check|ablate"
COMMAND_LINE = re.compile(
    rf"\bdiagevo (?:{SUBCOMMANDS})\b|\bpip install\b|\bmake [a-z]|\b(?:{SUBCOMMANDS}) --[a-z]"
    r"|\b(?:pass|with|use|another) --[a-z]|\bsource \.venv|\bmemory fork\b"
)
SYSTEM = re.compile(r"\b(?:sudo|apt-get|apt install|rm -rf|brew install)\b")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z_-]+")
TRAINER_NAME = "diagevo train"
"""The name ``run.started`` records for diagevo's own trainer: a name in the log, not a command."""


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            found.add(id(node.value))  # a docstring, or a string standing alone (a comment)
    return found


def spells(text: str) -> bool:
    """Whether ``text`` spells a command line, a command of the system, or a flag inside words."""
    return bool(COMMAND_LINE.search(text) or SYSTEM.search(text) or (FLAG.search(text) and " " in text.strip()))


def spelled_commands(package: Path) -> list[str]:
    """``path:line: literal`` for each string literal below ``package`` (``cli`` and the
    migrations aside) that spells a command line."""
    out = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] in ("cli", "migrations"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
                continue
            if node.value != TRAINER_NAME and spells(node.value):
                out.append(f"{path.relative_to(package.parent)}:{node.lineno}: {node.value[:100]!r}")
    return out


def test_the_library_spells_no_command_line() -> None:
    assert spelled_commands(ROOT / "diagevo") == []


@pytest.mark.parametrize(
    "literal",
    [
        "run it with diagevo train --rounds 3",
        "pip install -e '.[hf]'",
        "make vllm-cpu",
        "pass --resume to go on",
        "choose another --out or remove it",
        "map a column with --field NAME.ROLE=COLUMN",
        "start PostgreSQL (e.g. sudo service postgresql start)",
        "rm -rf models/tiny",
        "put it back (or name its folder: --out-dir)",
    ],
)
def test_the_scan_finds_a_spelled_command(tmp_path: Path, literal: str) -> None:
    (tmp_path / "offender.py").write_text(f'"""a docstring may say {literal}"""\n\nMESSAGE = {literal!r}\n')
    (found,) = spelled_commands(tmp_path)
    assert found.endswith(f"offender.py:3: {literal!r}")


def test_an_error_says_its_fix_in_words_to_python_and_as_a_command_to_the_cli() -> None:
    from diagevo.cli.fixes import message

    need = BadInput("the vllm engine needs vLLM:", Fix(otherwise=(Override("hf.use_vllm", False),), extras=("gpu",)))
    assert str(need) == "the vllm engine needs vLLM: install diagevo's gpu extra, or set hf.use_vllm = false"
    spelled = message(need)
    assert spelled.startswith("the vllm engine needs vLLM: `") and "[gpu]" in spelled
    assert spelled.endswith(", or --set hf.use_vllm=false`")
    again = BadInput("continue it with", Call("train", "train(..., resume=True)", resume=True), then=", or not")
    assert str(again) == "continue it with `train(..., resume=True)`, or not"
    assert message(again).startswith("continue it with `diagevo train --resume") and message(again).endswith(
        "`, or not"
    )
    aside = BadInput("write beside them", Argument("force", True), aside=True, about="out")
    assert (str(aside), message(aside)) == ("write beside them (force=True)", "write beside them (`--force`)")
    assert (aside.fix, aside.about) == (Argument("force", True), "out")  # what a caller acts on, as data


def test_every_call_a_fix_names_has_a_command() -> None:
    """Each library call an error names is one the CLI can spell: a call it cannot is a KeyError
    in the error path, so the names are read from the sources."""
    from diagevo.cli.fixes import COMMANDS

    named = set()
    for path in (ROOT / "diagevo").rglob("*.py"):
        named |= set(re.findall(r'\bCall\(\s*f?"([\w.]+)"', path.read_text(encoding="utf-8")))
    assert named and named <= set(COMMANDS), named - set(COMMANDS)


def test_the_errors_page_shows_each_fix_as_a_python_caller_and_the_cli_read_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table of ``docs/reference/errors.md`` is what the code prints: each row's error built
    as the library builds it, read by ``str`` and by the CLI (``diagevo`` as typed, the default
    database)."""
    from diagevo.cli.fixes import message
    from diagevo.errors import RetryLater, Unavailable, fork_call, resume_call, start_call
    from diagevo.rounds import OutOfOrder, UnknownRun

    monkeypatch.setattr("diagevo.cli.common.program", lambda: "diagevo")
    monkeypatch.setattr("diagevo.cli.common._acting_on", [None])
    commit = Call("Round.commit", "rnd.commit(metrics, allow_failed=True)", run="r", round=2, allow_failed=True)
    shown = [
        UnknownRun("no run 'r' in sqlite:///diagevo.db: start it with", start_call("r"), about="r"),
        OutOfOrder("cannot commit round 2: 3 of 4 failures failed to diagnose; commit without their evidence:", commit),
        RetryLater("run 'r' stopped in round 2: once the diagnostician answers, continue with", resume_call("r")),
        BadInput("its rounds through 2 are intact: fork it from round 2", fork_call("r", 2, "r-r2"), aside=True),
        BadInput(
            "out holds other files: name a new directory, or write beside them", Argument("force", True), aside=True
        ),
        BadInput("run 'r' holds no language model: evaluate a model directory", Argument("model", "DIR"), aside=True),
        Unavailable("the vllm engine needs vLLM installed, or", Override("hf.use_vllm", False)),
    ]
    page = (ROOT / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    table = page.split("| the CLI prints |\n|---|---|---|\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table == [f"| `{e.fix!r}` | {e} | {message(e)} |" for e in shown]


def test_a_flag_alone_is_an_argument_not_words() -> None:
    """A command line the library runs holds its flags as words of their own (``--port``)."""
    assert not spells("--port") and not spells("--served-model-name")
