"""The sections of the pages built from the CLI: the CLI reference, the exit codes, the commands.

They complete the library's generators (:data:`diagevo.docs.generated.GENERATORS`) into
:func:`generators`, what the site's build (``docs/hooks.py``) and ``diagevo docs`` fill a
page's ``<!-- generated: NAME -->`` lines with:

- ``cli``: every command and group of the app's click tree as :func:`diagevo.cli.app.build`
  makes it (the help ``--help`` shows), its usage and options, and its example and page
  (:mod:`cli.examples`);
- ``errors``: the exit codes (:data:`cli.common.EXIT_CODES`), then every error class a user can
  fix, found in the sources of the library and the CLI;
- ``commands``: the modules of ``cli/`` with the first paragraph of their docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from diagevo.cli import examples
from diagevo.cli.common import EXIT_CODES
from diagevo.docs.generated import GENERATORS as LIBRARY
from diagevo.docs.generated import PACKAGE, cell, error_classes, module_table

CLI = Path(__file__).resolve().parent


def errors() -> str:
    out = ["| exit code | when |", "|---|---|"]
    out += [f"| {code} | {cell(when)} |" for code, when in EXIT_CODES.items()]
    return "\n".join([*out, "", error_classes({"diagevo": PACKAGE, "diagevo.cli": CLI})])


def cli(tree: Any) -> str:
    """Each command and group of ``tree``, ``diagevo`` itself first, then in the order of their paths."""
    out: list[str] = []
    for path, command in examples.command_paths(tree).items():
        if not getattr(command, "hidden", False):
            out += _command(path, command)
    return "\n".join(out)


def _command(path: str, command: Any) -> list[str]:
    name = f"diagevo {path}".strip()
    ctx = command.context_class(command, info_name=name)
    out = [f"## {name}", ""]
    if command.help:
        out += [command.help, ""]
    out += ["```text", f"Usage: {name} {' '.join(command.collect_usage_pieces(ctx))}", "```", ""]
    rows = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        shown, said = param.get_help_record(ctx) or ("", getattr(param, "help", None) or "")
        if param.param_type_name == "argument":  # as the usage line names it (FILE, [PAGE])
            shown = " ".join(param.get_usage_pieces(ctx))
        rows.append(f"| `{shown}` | {cell(said)} |")
    if rows:
        out += ["| argument or option | what it does |", "|---|---|", *rows, ""]
    if path in examples.EXAMPLES:
        example, page = examples.EXAMPLES[path]
        out += [f"Example: `{example}`  ", f"More: [`diagevo docs {page}`](../{page}.md)", ""]
    return out


def generators(tree: Any) -> dict[str, Callable[[], str]]:
    """Every generated section of the pages by marker name, the CLI reference from ``tree``
    (the app's click tree: the one running, or :func:`diagevo.cli.app.build`'s)."""
    return {
        **LIBRARY,
        "cli": lambda: cli(tree),
        "errors": errors,
        "commands": lambda: module_table(CLI, "cli"),
    }
