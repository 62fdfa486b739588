"""The CLI loads a command's module when that command runs: ``--help`` lists every command by
the line of :data:`diagevo.cli.app.COMMANDS` without importing any, and that line is the loaded
command's help (stated once: in the table)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from diagevo.cli.app import LazyGroup, build

ROOT = Path(__file__).resolve().parent.parent


def test_each_listed_line_is_the_commands_help() -> None:
    root = build()
    for group in (root, root.commands["memory"]):
        assert isinstance(group, LazyGroup)
        for name, lazy in group.lazy.items():
            command = group.commands[name]
            assert command.short_help is None and command.help == lazy.help, name


def loaded(*args: str) -> set[str]:
    """The ``diagevo.cli`` modules imported by ``diagevo ARGS`` (in a fresh interpreter)."""
    code = (
        "import contextlib, io, sys\n"
        f"sys.argv = ['diagevo', *{list(args)!r}]\n"
        "from diagevo.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(' '.join(m for m in sys.modules if m.startswith('diagevo.cli.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return set(done.stdout.split())


def test_help_imports_no_command_and_a_command_its_own_modules(tmp_path: Path) -> None:
    shared = {"diagevo.cli.app", "diagevo.cli.common", "diagevo.cli.examples", "diagevo.cli.safe"}
    assert loaded("--help") == shared
    assert loaded("memory", "--help") == shared
    stats = loaded("memory", "stats", "--db", f"sqlite:///{tmp_path / 'x.db'}")  # no such database: its error
    helpers = {"diagevo.cli.fixes", "diagevo.cli.tables", "diagevo.cli.progress"}
    assert stats - shared - helpers == {"diagevo.cli.follow", "diagevo.cli.stats"}
