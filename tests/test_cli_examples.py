"""Every command's help ends with one example and the page about it (:mod:`cli.examples`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from diagevo.cli import examples
from diagevo.cli.app import build

ROOT = Path(__file__).resolve().parent.parent


def test_every_command_and_group_has_an_example_and_a_page_that_exists() -> None:
    from diagevo.docs.pages import pages

    names = {p.name for p in pages().pages}
    paths = examples.command_paths(build())
    missing = sorted(p or "(diagevo itself)" for p in paths if p not in examples.EXAMPLES)
    assert not missing, f"no example in cli/examples.py for: {', '.join(missing)}"
    stale = sorted(set(examples.EXAMPLES) - set(paths))
    assert not stale, f"cli/examples.py names commands that do not exist: {stale}"
    for path, (example, page) in examples.EXAMPLES.items():
        assert page in names, f"{path!r}: no page {page} (diagevo docs lists them)"
        words = example.split()
        assert words[0] == "diagevo" and " ".join(words[1:]).startswith(path), (path, example)


def test_each_example_is_a_command_line_the_cli_accepts() -> None:
    """Parsed (not run) by the real command: an example naming a removed option, a missing
    argument or an extra one fails here (a file that does not exist here is fine)."""
    import shlex

    root = build()  # typer's own click (typer._click): classes told apart by name
    for path, (example, _) in examples.EXAMPLES.items():
        args = shlex.split(example)[1:]
        command = root
        while hasattr(command, "commands") and args and not args[0].startswith("-"):
            command = command.commands[args.pop(0)]
        runnable = not hasattr(command, "commands") or getattr(command, "invoke_without_command", False)
        assert runnable, f"{example}: names a group, not a command"
        try:
            command.make_context(path or "diagevo", args)
        except Exception as exc:
            said = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            refused = type(exc).__name__ == "BadParameter" and "does not exist" in said
            assert refused, f"{example}: {type(exc).__name__}: {said}"


@pytest.mark.parametrize("argv", [["--help"], ["memory", "why", "--help"], ["round", "--help"]])
def test_help_ends_with_the_example_and_the_page(argv: list[str]) -> None:
    path = " ".join(argv[:-1])
    example, page = examples.EXAMPLES[path]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "diagevo.cli.app", *argv], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    tail = [line.strip() for line in done.stdout.strip().splitlines() if line.strip()][-2:]
    assert tail == [f"Example:  {example}", f"More: diagevo docs {page}"]


def test_every_more_line_is_a_command_that_shows_its_page_in_any_installation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``More:`` names ``diagevo docs PAGE``, which a pip install runs, never a file of a checkout;
    run as printed, it shows the page."""
    from tests.test_cli_memory import run_cli

    mores = {}
    for path, command in examples.command_paths(build()).items():
        (more,) = [line for line in (command.epilog or "").splitlines() if line.startswith("More:")]
        mores[path] = more
        assert re.fullmatch(r"More: diagevo docs [a-z0-9-]+(/[a-z0-9-]+)?", more), (path, more)
    for more in sorted(set(mores.values())):
        code, out, err = run_cli(capsys, *more.split()[2:], "--path")
        assert code == 0 and out.endswith(".md\n"), (more, err)


LITERAL_PATH = re.compile(r"\bdocs/[\w./-]*\.md\b|\bdocs/(?:how-to|concepts|reference)/")


def test_no_message_of_the_library_or_the_cli_names_a_page_as_a_file_of_the_checkout() -> None:
    """A help, an error or a hint names a page as ``diagevo docs`` takes it (docstrings, which are
    for the code's readers, aside)."""
    import ast

    found = []
    for folder in (ROOT / "diagevo", ROOT / "cli"):
        for file in sorted(folder.rglob("*.py")):
            tree = ast.parse(file.read_text(encoding="utf-8"))
            docs = {
                id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                    if LITERAL_PATH.search(node.value):
                        found.append(f"{file.relative_to(ROOT)}:{node.lineno}: {node.value[:80]!r}")
    assert found == []


def test_help_texts_are_reflowed_paragraphs_without_rst_quotes() -> None:
    """A docstring's line breaks would stay in the command list (``tokens/s,`` alone on a line of
    ``diagevo --help``): every help, of commands and of their options, is paragraphs of one line."""
    for path, command in examples.command_paths(build()).items():
        helps = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
        for h in helps:
            assert all("\n" not in para for para in h.split("\n\n")), (path, h)
            assert "``" not in h, (path, h)
