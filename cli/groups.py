"""The command groups of ``diagevo`` as the user meets them: each command imported and built when
it runs (:class:`LazyGroup`, listed by its :class:`Lazy` line), and finished (:func:`finish`) with
what click and typer leave out: every integer bounded to what a database column holds, help text
reflowed, a value's display, and ``--json`` keeping stdout for the JSON alone."""

from __future__ import annotations

import functools
import gc
from importlib import import_module
from typing import Any, NamedTuple

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from diagevo.cli import examples
from diagevo.cli.common import json_alone_on_stdout


class Lazy(NamedTuple):
    """A command of a :class:`LazyGroup`: where it is defined (``module:name``, a function or a
    typer app), and its help: the line ``--help`` lists it with, stated here alone (a command's
    function carries no docstring of its own; the group loading it gives it this line)."""

    target: str
    help: str


INT64 = (-(2**63), 2**63 - 1)


class LazyGroup(TyperGroup):
    """A group whose commands are imported and built when one runs, or when ``commands`` is read
    (the reference, the tests): ``diagevo memory stats`` imports the modules of that command
    alone, and ``--help`` lists the commands by their :class:`Lazy` lines without importing any."""

    lazy: dict[str, Lazy] = {}
    path = ""  # the group's path after ``diagevo``

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loaded: dict[str, Any] = {}
        self._listing = False
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, Any]:
        return {name: self._load(name) for name in self.lazy}

    @commands.setter
    def commands(self, value: dict[str, Any]) -> None:
        self._loaded.update(value)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.lazy)

    def get_command(self, ctx: Any, cmd_name: str) -> Any | None:
        if cmd_name not in self.lazy:
            return None
        if self._listing and cmd_name not in self._loaded:
            return TyperCommand(cmd_name, help=self.lazy[cmd_name].help)
        return self._load(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def _load(self, name: str) -> Any:
        if name not in self._loaded:
            target, line = self.lazy[name]
            module, _, attr = target.partition(":")
            found = getattr(import_module(module), attr)
            gc.freeze()  # the command's modules live as long as those main froze
            command: Any
            if isinstance(found, typer.Typer):
                command = typer.main.get_group(found)
            else:
                single = typer.Typer(add_completion=False)
                single.command(name)(found)
                command = typer.main.get_command(single)
            command.name = name
            command.help = line
            self._loaded[name] = finish(command, f"{self.path} {name}".strip())
        return self._loaded[name]


def _bounded(process: Any, param: Any) -> Any:
    """A parameter's processing that refuses an integer beyond 64 bits (what a database column holds)."""

    def check(ctx: Any, value: Any) -> Any:
        value = process(ctx, value)
        for n in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(n, int) and not isinstance(n, bool) and not INT64[0] <= n <= INT64[1]:
                raise typer.BadParameter(
                    f"{str(n)[:40]} is out of range (at most {INT64[1]:,} in size)", ctx=ctx, param=param
                )
        return value

    return check


def _reflow(help_text: str | None) -> str | None:
    """A docstring as help: each paragraph one line (the terminal wraps it; a docstring's own
    line breaks would stay in the command list), ````code```` as ```code```."""
    if not help_text:
        return help_text
    paragraphs = [" ".join(p.split()) for p in help_text.replace("``", "`").split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def _metavar(param: Any) -> str | None:
    """What help shows of a flag's or a repeatable option's value (click's ``metavar``, which typer
    shows when it is set): nothing for a flag, ``TEXT (repeatable)`` for an option given many
    times (the repeatable options that take another type name it where they are declared);
    None leaves typer's own display."""
    if getattr(param, "is_flag", False):
        return ""
    if getattr(param, "multiple", False):
        return "TEXT (repeatable)"
    return None


def finish(command: Any, path: str) -> Any:
    """``command`` (at ``path`` after ``diagevo``) and the subcommands built with it (a
    :class:`LazyGroup` finishes its own as it loads them), as the user meets them: every
    integer bounded (``--round 99999999999999999999`` is a usage error naming the option, not an
    overflow deep in a database driver); :func:`_reflow` on every help, each parameter's value
    named by :func:`_metavar` unless it names its own; ``--json`` keeping stdout for the JSON
    alone (:func:`json_alone_on_stdout`); the help ending with the command's example and page
    (:mod:`cli.examples`, escaped: typer renders an epilog as Rich markup)."""
    command.help = _reflow(command.help)
    epilog = examples.epilog(path)
    if epilog is not None:
        command.epilog = escape(epilog)
    help_option = command.get_help_option(command.context_class(command))  # made once, on first use
    for param in [*getattr(command, "params", ()), *([help_option] if help_option else [])]:
        param.process_value = _bounded(param.process_value, param)
        if getattr(param, "help", None):
            param.help = _reflow(param.help)
        if param.metavar is None:
            param.metavar = _metavar(param)
        if "--json" in param.opts and command.callback is not None:
            command.callback = _json_alone(command.callback, param.name)
    if not isinstance(command, LazyGroup):
        for name, sub in getattr(command, "commands", {}).items():
            finish(sub, f"{path} {name}".strip())
    return command


def _json_alone(run: Any, flag: str) -> Any:
    """``run`` (a command's callback) inside :func:`json_alone_on_stdout` when its ``--json``
    (the parameter ``flag``) is given."""

    @functools.wraps(run)
    def with_json_alone(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get(flag):
            return run(*args, **kwargs)
        with json_alone_on_stdout():
            return run(*args, **kwargs)

    return with_json_alone
