"""The ``diagevo`` command: a thin typer app over the library."""

from __future__ import annotations

import atexit
import errno
import functools
import gc
import os
import sys
import tempfile
import traceback
from collections.abc import Mapping
from importlib import import_module
from typing import Annotated, Any, NamedTuple

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from diagevo.cli import examples
from diagevo.cli.common import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Interrupted,
    acting_on,
    err_console,
    json_alone_on_stdout,
    program,
)
from diagevo.cli.safe import error_line, text
from diagevo.errors import BadInput, DiagevoError, NotReady
from diagevo.text.parsing import one_line, utf8_problem
from diagevo.text.redaction import redact_argv, redact_text
from diagevo.text.untrusted import shell_join, shorten

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANCE_LOG", "error")  # lance logs table creation as a warning
os.environ.setdefault("LANCEDB_LOG", "error")  # ... and so does lancedb (its own variable)
# pydantic's first validator reads every installed distribution's entry points looking for
# plugins (typer turns them off around its own option validators, not around ours: the config
# models that verify, ingest and train build); the command runs none
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


class Lazy(NamedTuple):
    """A command of a :class:`LazyGroup`: where it is defined (``module:name``, a function or a
    typer app), and its help: the line ``--help`` lists it with, stated here alone (a command's
    function carries no docstring of its own; the group loading it gives it this line)."""

    target: str
    help: str


# every command of ``diagevo``, in the order ``--help`` lists them
COMMANDS: dict[str, Lazy] = {
    "gpu-check": Lazy(
        "diagevo.cli.gpu_check:gpu_check",
        "One round of the real loop on a CUDA GPU: seconds and peak memory per phase, tokens/s, completions per step; "
        "fails if a policy did not change, verify fails, or a process built more than one vLLM engine.",
    ),
    "train": Lazy("diagevo.cli.train:train", "Run the co-evolution loop (CPU simulator by default)."),
    "ablate": Lazy(
        "diagevo.cli.train:ablate",
        "Table 2 and Table 4 variants on the simulator, with each world property on and off; on the hf backend (the "
        "mini world) full DiagEvo, no memory, frozen challenger and the oracle (the true answer as the solver's "
        "reward) by default, in the configured world. Each (world, variant, seed) is a run of the log: run the "
        "command again and finished runs are skipped, a stopped one resumed.",
    ),
    "config": Lazy(
        "diagevo.cli.config:config_command",
        "Print the resolved config: every field's value and what it does, as TOML (secrets redacted).",
    ),
    "diagnose": Lazy(
        "diagevo.cli.diagnose:diagnose",
        "Diagnose failures from any trainer (FAILURES.jsonl, or verl's rollout dump with --from-verl): Prompts 1-4, "
        "appended to the run's event log. In a round opened with 'round start' the failures are recorded first (each "
        "of a retained question). (--diagnostician heuristic: offline rules, not the paper's LLM diagnostician.)",
    ),
    "eval": Lazy(
        "diagevo.cli.eval:eval_command",
        "Benchmark accuracy (greedy pass@1; mean@k for AMC and AIME) of a model or of a run's checkpoints.",
    ),
    "report": Lazy(
        "diagevo.cli.report:report_command",
        "Write an offline HTML report of a run: accuracy, memory lifecycle, schedule, questions, every cause's story, "
        "trees, timing, config. With several --run, one page comparing them: their curves (accuracy and every metric, "
        "F_t, ε, Active/Mastered) on shared axes.",
    ),
    "doctor": Lazy(
        "diagevo.cli.doctor:doctor",
        "What this installation can do: database, disk, PostgreSQL, models, embedding model, hf backend, vLLM, "
        "Chromium, diagevo on PATH, and a diagnostician server; each ok / warning / missing with its fix. Exits 1 only "
        "when something you named (--db, --postgres, --model, --config, --diagnostician) is not ok.",
    ),
    "docs": Lazy(
        "diagevo.cli.docs:docs_command",
        "The documentation this diagevo carries, offline: the list of its pages and shipped files, one page "
        "(Markdown, rendered on a terminal), or one shipped file (an example, a config).",
    ),
    "memory": Lazy("diagevo.cli.app:memory_app", "Inspect, audit, move and verify the error-cause memory."),
    "round": Lazy("diagevo.cli.app:round_app", "Drive one round of the memory from another trainer."),
    "runs": Lazy(
        "diagevo.cli.runs:runs_app", "The runs of a database: status, rounds, origin, config; tag and note them."
    ),
    "db": Lazy("diagevo.cli.db:db_app", "Database schema: upgrade, current revision."),
    "export": Lazy("diagevo.cli.export:export_app", "A run as files others can load without diagevo."),
    "models": Lazy(
        "diagevo.cli.models:models_app",
        "Local models for the hf backend (a tiny pair built here, SmolLM2 from PyPI).",
    ),
}

MEMORY_COMMANDS: dict[str, Lazy] = {
    "replay": Lazy(
        "diagevo.cli.memory:replay",
        "Rebuild M_N from the log; show the memory tree and the schedule for round N+1.",
    ),
    "show": Lazy("diagevo.cli.memory:show", "The memory after the run's last event (an unfinished round included)."),
    "why": Lazy(
        "diagevo.cli.memory:why",
        "The story of one cause: creation, promotions, reactivations, merges and its most recent attributions (every "
        "one with --all or --json).",
    ),
    "events": Lazy(
        "diagevo.cli.memory:events",
        "List events, filtered (every filter is an indexed read). With --follow, every event of the run from its first "
        "(filtered) and then each new one as another process appends it, a line each (a JSON line with "
        "--json/--jsonl), until Ctrl-C or --until-round.",
    ),
    "ingest": Lazy(
        "diagevo.cli.operate:ingest",
        "Validate a whole JSONL file, then store it in one transaction (or nothing).",
    ),
    "export": Lazy("diagevo.cli.operate:export", "Write the run's log as JSONL (with seq, recorded_at, hash)."),
    "verify": Lazy(
        "diagevo.cli.operate:verify",
        "Check the hash chain, the texts against their keys, the invariants, and that the saved views (snapshots, the "
        "statistics) equal the log and reach no further than it.",
    ),
    "stats": Lazy(
        "diagevo.cli.stats:stats",
        "One row per committed round: the memory, what the round did, and every metric the run recorded, by name "
        "(held-out accuracy, --metric of round commit, bench/NAME of eval --run). With --follow, a line per round as "
        "another process commits it (a JSON line with --json). With --steps, one row per GRPO step of the hf backend "
        "(x = the role's global step).",
    ),
    "plot": Lazy(
        "diagevo.cli.stats:plot",
        "Memory lifecycle per round (the paper's Figure 3b): terminal bars, or an SVG image with -o.",
    ),
    "reindex": Lazy("diagevo.cli.diagnose:reindex", "Rebuild the vector index (LanceDB) of a run from its event log."),
    "fork": Lazy(
        "diagevo.cli.fork:fork",
        "A new run whose log is RUN's log through ROUND's commit, continued by the trainer that wrote RUN (train "
        "--resume for diagevo's own, the round protocol for another).",
    ),
    "diff": Lazy(
        "diagevo.cli.fork:diff",
        "Causes whose state or frequency differ, nodes in one run only, F_t and ε side by side.",
    ),
    "whatif": Lazy(
        "diagevo.cli.whatif:whatif",
        "Re-decide RUN's memory (promotions, reactivations, F_t, ε, the schedule) on its recorded evidence under other "
        "settings, each as a derived run that every read command reads.",
    ),
}


ROUND_COMMANDS: dict[str, Lazy] = {
    "start": Lazy("diagevo.cli.rounds:start", "Start the run (when new) and open its next round."),
    "requests": Lazy(
        "diagevo.cli.rounds:requests_",
        "Generation requests drawn from the schedule of M_{t-1} (Eq. 1-2), with challenger prompts.",
    ),
    "record": Lazy(
        "diagevo.cli.record:record",
        "Record generated questions with their construction responses: votes, filter (Eq. 3).",
    ),
    "promote": Lazy(
        "diagevo.cli.rounds:promote",
        "Decide the round's promotions (Eq. 5-6) against M_{t-1}, once (after its questions are recorded).",
    ),
    "withdraw": Lazy(
        "diagevo.cli.rounds:withdraw",
        "Take back a batch of recorded questions or failures before the commit, as if never recorded.",
    ),
    "commit": Lazy("diagevo.cli.rounds:commit", "Commit the round: M_t is the memory here."),
}


RUNS_COMMANDS: dict[str, Lazy] = {
    "tag": Lazy("diagevo.cli.labels:tag", "Tag a run (stored as a `run.tagged` event)."),
    "note": Lazy("diagevo.cli.labels:note", "Add a free-text note to a run (stored as a `run.noted` event)."),
}


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
            self._loaded[name] = _finish(command, f"{self.path} {name}".strip())
        return self._loaded[name]


class _Root(LazyGroup):
    lazy = COMMANDS


class _Memory(LazyGroup):
    lazy = MEMORY_COMMANDS
    path = "memory"


class RunsGroup(LazyGroup):
    """``diagevo runs``: the list is the group's own callback (:data:`diagevo.cli.runs.runs_app`)."""

    lazy = RUNS_COMMANDS
    path = "runs"


class _Round(LazyGroup):
    lazy = ROUND_COMMANDS
    path = "round"


def _show_version(value: bool) -> None:
    """The package's version (its metadata) and the schema revision its databases are migrated to."""
    if value:
        from diagevo.log.schema import HEAD_REVISION  # the migrations' head; the log's import for --version alone

        sys.stdout.write(f"diagevo {_version()} (schema {HEAD_REVISION})\n")
        raise typer.Exit()


app = typer.Typer(
    cls=_Root,
    name="diagevo",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and schema revision.", is_eager=True, callback=_show_version),
    ] = False,
) -> None:
    """DiagEvo: diagnosis-guided self-play around an event-sourced error-cause memory."""


# the groups of ``diagevo memory`` and ``diagevo round``: a LazyGroup lists and loads their
# commands, and takes its help from its Lazy line (a callback would add nothing)
memory_app = typer.Typer(cls=_Memory, no_args_is_help=True)
round_app = typer.Typer(cls=_Round, no_args_is_help=True)


# OSErrors that say something about the machine, not about diagevo: one line, like a DiagevoError
_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EACCES, errno.EPERM, errno.EROFS, errno.EDQUOT, errno.EMFILE})


def _environmental(exc: OSError) -> bool:
    """An OSError about the machine (disk full, permissions) or about a path the user named."""
    named = exc.filename is not None and exc.errno in (
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.ENAMETOOLONG,
    )
    return exc.errno in _ENVIRONMENT_ERRNOS or named


def _one_line(exc: BaseException) -> str:
    """The first line of the message, at most a few hundred characters (a huge bad value is not
    echoed), without credentials."""
    from diagevo.cli.fixes import message  # an error's path alone pays for the fixes' tables

    said = redact_text(message(exc)).strip()
    return one_line(said.splitlines()[0], 390) if said else type(exc).__name__  # with "error: ", at most 400


def _error_lines(exc: DiagevoError) -> list[Any]:
    """An error as the user reads it: one line; a preflight refusal of several needs, one line
    under its first for each (what, why, and the fix spelled for this installation)."""
    from diagevo.cli.fixes import need_line

    if not isinstance(exc, NotReady):
        return [error_line(_one_line(exc))]
    lines = [one_line(redact_text(need_line(c)), 379) for c in exc.needs]
    if len(lines) == 1:
        return [error_line(f"not ready: {lines[0]}")]
    head = error_line(f"not ready: {len(lines)} needs are missing (each with its fix)")
    return [head, *(text(f"  {line}") for line in lines)]


def _internal_error(exc: BaseException) -> str:
    """A bug in diagevo: one line that names the exception and a file holding its traceback
    (the command line and the traceback without credentials)."""
    fd, path = tempfile.mkstemp(prefix="diagevo-traceback-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(f"diagevo {_version()}\nargv: {redact_argv(sys.argv)!r}\n\n")
        fh.write(redact_text("".join(traceback.format_exception(exc))))
    return f"internal error: {type(exc).__name__}: {_one_line(exc)} (traceback written to {path})"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # reads the installed packages: for --version alone

    try:
        return version("diagevo")
    except PackageNotFoundError:
        return "unknown"


def _usage_error(exc: BaseException) -> str | None:
    """One line for a command-line usage error (bad option value, missing argument, ...), which
    click would print as a multi-line panel; None for any other exception."""
    if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
        return None
    moved = _misplaced_option(exc, sys.argv[1:])
    if moved is not None:
        return moved
    message = redact_text(" ".join(str(exc.format_message()).split()))
    ctx = getattr(exc, "ctx", None)
    # a value refused is answered by its rule; a missing or unknown option by what the command needs
    needs = _needs(ctx) if ctx is not None and not _bad_value(exc) else ""
    if needs:
        message = message.rstrip(".")
    hint = f"{needs} (see '{ctx.command_path} --help')" if ctx is not None else ""
    return message + hint


def _bad_value(exc: BaseException) -> bool:
    """Whether click refused a value given (``--steps 0``), not a missing or unknown option (its
    ``MissingParameter`` is a ``BadParameter`` of no value; typer carries a click of its own)."""
    return isinstance(exc, typer.BadParameter) and type(exc).__name__ != "MissingParameter"


def _needs(ctx: Any) -> str:
    """``; it needs --run A --run B``: the command's required options as its help shows them
    (their metavar), so that an unknown or missing option is answered with the form that works,
    not only the options that are spelled alike (click's guess for ``memory diff --to`` is ``--json``)."""
    needed = [
        f"{p.opts[0]} {p.metavar or p.name.upper()}"
        for p in getattr(ctx.command, "params", ())
        if getattr(p, "required", False) and getattr(p, "opts", None) and p.opts[0].startswith("--")
    ]
    return f"; {ctx.command_path} needs {' '.join(needed)}" if needed else ""


def _misplaced_option(exc: BaseException, args: list[str]) -> str | None:
    """``diagevo --db URL runs``: an option of the command, given before it (where a group,
    which takes none of them, refuses it), as one line with the command line that has it after
    the command; None for any other usage error."""
    name, ctx = getattr(exc, "option_name", None), getattr(exc, "ctx", None)
    if not name or ctx is None or not hasattr(ctx.command, "commands"):
        return None
    at = next((i for i, a in enumerate(args) if a == name or a.startswith(name + "=")), None)
    if at is None:
        return None
    inline = "=" in args[at]
    for takes_value in (False,) if inline else (True, False):
        given = args[at : at + 2] if takes_value else args[at : at + 1]
        rest = args[at + len(given) :]
        command, words = ctx.command, []
        while rest and hasattr(command, "commands") and rest[0] in command.list_commands(ctx):  # the command after it
            words.append(rest[0])
            command = command.get_command(ctx, rest.pop(0))
        option = next((p for p in getattr(command, "params", ()) if name in getattr(p, "opts", ())), None)
        if words and option is not None and (inline or takes_value != getattr(option, "is_flag", False)):
            line = shell_join([program(), *args[:at], *words, *given, *rest])
            return redact_text(f"{name} is an option of the command, given after it: {line}")
    return None


INT64 = (-(2**63), 2**63 - 1)


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


def _leave_now(code: int) -> None:
    """After Ctrl-C: the exit handlers (they stop the math-verify worker), then out without
    Python's teardown, which can spend seconds freeing torch and the rest after the message is shown.
    The store is closed already (the commands hold it in ``with``). Inside pytest, an ordinary exit."""
    if "pytest" in sys.modules:
        sys.exit(code)
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


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


def _finish(command: Any, path: str) -> Any:
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
            _finish(sub, f"{path} {name}".strip())
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


def build() -> Any:
    """The click command tree of the app (:func:`_finish`), each command loaded when it runs or
    when the tree's ``commands`` are read."""
    return _finish(typer.main.get_command(app), "")


def _check_utf8(args: list[str], env: Mapping[str, str]) -> None:
    """Command-line arguments and diagevo's environment variables that are not UTF-8 are named
    in diagevo's words (which argument or variable, which byte at which offset), before a
    command sees them."""
    for i, arg in enumerate(args, 1):
        problem = utf8_problem(arg)
        if problem is not None:
            before = args[i - 2] if i > 1 else ""
            named = f"option {before}" if before.startswith("--") and "=" not in before else f"argument {i}"
            option, eq, value = arg.partition("=")
            if arg.startswith("--") and eq and utf8_problem(option) is None:
                named, problem = f"option {option}", utf8_problem(value)
            raise BadInput(f"{named} of the command line: {problem}")
    for name in sorted(env):
        if name.startswith("DIAGEVO_"):
            problem = utf8_problem(env[name])
            if problem is not None:
                raise BadInput(f"environment variable {name}: {problem}")


def main() -> None:
    # what the imports built lives as long as the process: out of the collector's passes, which
    # a read of tens of thousands of events would otherwise repeat over it (Python's gc.freeze)
    gc.freeze()
    acting_on(None)
    try:
        _check_utf8(sys.argv[1:], os.environ)
        code = build()(standalone_mode=False, prog_name="diagevo")
    except Interrupted as exc:
        err_console.print(text(redact_text(str(exc))), soft_wrap=True)
        _leave_now(EXIT_INTERRUPTED)
    except (KeyboardInterrupt, typer.Abort):
        err_console.print("interrupted")
        _leave_now(EXIT_INTERRUPTED)
    except DiagevoError as exc:
        for line in _error_lines(exc):
            err_console.print(line, soft_wrap=True)
        sys.exit(int(getattr(exc, "exit_code", EXIT_ERROR)))  # a preflight refusal: 2
    except OSError as exc:
        if not _environmental(exc):
            err_console.print(text(_internal_error(exc)), soft_wrap=True)
            sys.exit(EXIT_INTERNAL)
        where = f"{shorten(str(exc.filename), 120)}: " if exc.filename else ""
        err_console.print(error_line(redact_text(where + (exc.strerror or _one_line(exc)).lower())), soft_wrap=True)
        sys.exit(EXIT_ERROR)
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `diagevo memory` alone: the help, once
            shown = str(exc.format_message())  # type: ignore[attr-defined]  # rich help printed itself: ""
            if shown.strip():
                sys.stdout.write(shown + "\n")
            sys.exit(0)
        usage = _usage_error(exc)
        if usage is None:  # not the user's doing: a bug, shown as one
            if os.environ.get("DIAGEVO_TRACEBACK"):
                raise
            err_console.print(text(_internal_error(exc)), soft_wrap=True)
            sys.exit(EXIT_INTERNAL)
        err_console.print(error_line(usage), soft_wrap=True)
        sys.exit(int(getattr(exc, "exit_code", EXIT_USAGE)))
    if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C in a command into exit code 130
        err_console.print("interrupted")
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    # ``python -m diagevo.cli.app`` runs this file as ``__main__``, a second copy of the module
    # beside the ``diagevo.cli.app`` the command tables name: its ``main`` would build the groups
    # from one copy's classes and finish them with the other's, and ``isinstance(command,
    # LazyGroup)`` failing would load every command of a group (every module behind them)
    from diagevo.cli.app import main as installed_main

    installed_main()
