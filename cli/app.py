"""The ``diagevo`` command: a thin typer app over the library. Here its table of commands (each
loaded when it runs: :mod:`diagevo.cli.groups`) and ``main``, which tells how a command that does
not end well ended (:mod:`diagevo.cli.ending`)."""

from __future__ import annotations

import gc
import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

import diagevo
from diagevo.cli.common import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Interrupted,
    acting_on,
    err_console,
)
from diagevo.cli.ending import (
    check_utf8,
    environmental,
    error_lines,
    internal_error,
    leave_now,
    one_line_of,
    usage_error,
)
from diagevo.cli.groups import Lazy, LazyGroup, finish
from diagevo.cli.safe import error_line, text
from diagevo.errors import DiagevoError
from diagevo.text.redaction import redact_text
from diagevo.text.untrusted import shorten
from diagevo.text.words import close_to, you_mean

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANCE_LOG", "error")  # lance logs table creation as a warning
os.environ.setdefault("LANCEDB_LOG", "error")  # ... and so does lancedb (its own variable)
# pydantic's first validator reads every installed distribution's entry points looking for
# plugins (typer turns them off around its own option validators, not around ours: the config
# models that verify, ingest and train build); the command runs none
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


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
    "status": Lazy(
        "diagevo.cli.rounds:status", "Where the run's open round stands (or its next one) and the step it takes next."
    ),
}


RUNS_COMMANDS: dict[str, Lazy] = {
    "tag": Lazy("diagevo.cli.labels:tag", "Tag a run (stored as a `run.tagged` event)."),
    "note": Lazy("diagevo.cli.labels:note", "Add a free-text note to a run (stored as a `run.noted` event)."),
}


class _Root(LazyGroup):
    lazy = COMMANDS

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """A command of a group typed at the top (``diagevo events``) is refused naming the group's
        command it most likely means (``memory events``): typer suggests only the top's own commands."""
        name = args[0] if args else ""
        if name and name not in self.lazy and not name.startswith("-"):  # typer's suggestion loads them all too
            subs = [(g, s) for g, c in self.commands.items() if isinstance(c, TyperGroup) for s in c.list_commands(ctx)]
            near = close_to(name, [*self.lazy, *(s for _, s in subs)])
            inner = [f"{g} {s}" for g, s in subs if s in near]
            if inner:
                top = [c for c in near if c in self.lazy]
                ctx.fail(f"No such command {name!r}{you_mean([repr(c) for c in [*top, *inner]])}")
        return super().resolve_command(ctx, args)


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
        from diagevo.log.revision import HEAD_REVISION  # the migrations' head; the log's import for --version alone

        sys.stdout.write(f"diagevo {diagevo.__version__} (schema {HEAD_REVISION})\n")
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


def build() -> Any:
    """The click command tree of the app (:func:`~diagevo.cli.groups.finish`), each command loaded when it runs or
    when the tree's ``commands`` are read."""
    return finish(typer.main.get_command(app), "")


def main() -> None:
    # what the imports built lives as long as the process: out of the collector's passes, which
    # a read of tens of thousands of events would otherwise repeat over it (Python's gc.freeze)
    gc.freeze()
    acting_on(None)
    try:
        check_utf8(sys.argv[1:], os.environ)
        code = build()(standalone_mode=False, prog_name="diagevo")
    except Interrupted as exc:
        err_console.print(text(redact_text(str(exc))), soft_wrap=True)
        leave_now(EXIT_INTERRUPTED)
    except (KeyboardInterrupt, typer.Abort):
        err_console.print("interrupted")
        leave_now(EXIT_INTERRUPTED)
    except DiagevoError as exc:
        for line in error_lines(exc):
            err_console.print(line, soft_wrap=True)
        sys.exit(int(getattr(exc, "exit_code", EXIT_ERROR)))  # a preflight refusal: 2
    except OSError as exc:
        if not environmental(exc):
            err_console.print(text(internal_error(exc)), soft_wrap=True)
            sys.exit(EXIT_INTERNAL)
        where = f"{shorten(str(exc.filename), 120)}: " if exc.filename else ""
        err_console.print(error_line(redact_text(where + (exc.strerror or one_line_of(exc)).lower())), soft_wrap=True)
        sys.exit(EXIT_ERROR)
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `diagevo memory` alone: the help, once
            shown = str(exc.format_message())  # type: ignore[attr-defined]  # rich help printed itself: ""
            if shown.strip():
                sys.stdout.write(shown + "\n")
            sys.exit(0)
        usage = usage_error(exc)
        if usage is None:  # not the user's doing: a bug, shown as one
            if os.environ.get("DIAGEVO_TRACEBACK"):
                raise
            err_console.print(text(internal_error(exc)), soft_wrap=True)
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
