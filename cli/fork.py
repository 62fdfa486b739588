"""``diagevo memory fork`` and ``diagevo memory diff``: what-if experiments from a stored run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer
from rich.table import Table

from diagevo.cli.common import CLIError, DbOpt, JsonOpt, console, emit_json, round_from_0, spell
from diagevo.cli.safe import text
from diagevo.cli.store import open_store, say_passed
from diagevo.fork import diff_runs, fork_run
from diagevo.results.runs import RunDiff, passed_line
from diagevo.rounds import OUR_TRAINER, run_trainer, stored_config
from diagevo.text.words import plural, times


def fork(
    run: Annotated[str, typer.Option("--run", help="The run to fork.")],
    at_round: Annotated[int, typer.Option("--round", callback=round_from_0, help="Its committed round to fork at.")],
    to: Annotated[str, typer.Option("--to", help="The new run's id.")],
    db: DbOpt = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Change the fork's config from its first round on: section.field=value."),
    ] = None,
    json: JsonOpt = False,
) -> None:
    with open_store(db) as store:
        done = fork_run(store, run, at_round, to, list(set_ or [])).to_dict()
        saved = stored_config(store, to)
        trainer = run_trainer(store, to)
    ours = trainer in (None, OUR_TRAINER)  # a log of an older diagevo does not say: as before
    if json:
        emit_json(done | {"trainer": trainer})
        return
    for left in done["left_behind"]:  # rows the copy's class refuses: the source's own refusals are named apart
        say_passed(passed_line(run, left["seq"], left["why"]))
    if ours:
        # a fork at or past its run's last round trains one more round when continued
        more = [] if saved is not None and saved.train.rounds > at_round else ["--rounds", str(at_round + 1)]
        how = spell("train", "--run", to, "--resume", *more, db=db)
    else:
        how = f"its trainer ({trainer}), through the round protocol: {spell('round', 'start', '--run', to, db=db)}"
    console.print(
        text(
            f"run {to}: {plural(done['events'], 'event')}, a copy of run {run} through round {at_round} "
            f"(source hash {done['source_hash'][:12]}); continue with: {how}"
        ),
        soft_wrap=True,
    )


def diff(
    runs: Annotated[
        list[str], typer.Option("--run", metavar="A --run B", help="Two runs to compare (give --run twice).")
    ],
    at_round: Annotated[
        int | None,
        typer.Option("--round", callback=round_from_0, help="Compare M_t of this round (default: each run's last)."),
    ] = None,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    if len(runs) != 2:
        raise CLIError(f"give --run exactly twice (--run A --run B), not {times(len(runs))}")
    with open_store(db, readonly=True) as store:
        d = diff_runs(store, runs[0], runs[1], at_round)
    if json:
        emit_json(d.to_dict())
        return
    console.print(_schedule_table(d))
    _print_differing_causes(d)
    _print_one_sided(d)


def _schedule_table(d: RunDiff) -> Table:
    """F_t, ε and the memory's counts of the two runs side by side."""
    sched = Table(title="schedule", title_justify="left")
    sched.add_column("")
    for run in d.runs:
        sched.add_column(text(run), justify="right")
    for key in ("round", "k", "F", "epsilon_next", "causes", "active", "mastered", "nodes"):
        va, vb = (getattr(row, key) for row in d.schedule)
        fmt = (lambda v: f"{v:.3f}") if isinstance(va, float) else str
        sched.add_row(key.replace("epsilon_next", "ε_t+1").replace("F", "F_t"), fmt(va), fmt(vb))
    for key, name in FIGURE_NAMES.items():  # where either commit has it; "–" where one has not
        values = [getattr(row, key) for row in d.schedule]
        if any(v is not None for v in values):
            sched.add_row(name, *("–" if v is None else f"{v:.3f}" for v in values))
    return sched


FIGURE_NAMES = {
    "heldout_acc": "held-out acc",
    "pseudo_label_acc": "shared label acc (Fig. 3c)",
    "retained_label_acc": "kept labels right",
}
"""The round's figures (:data:`diagevo.fork.ROUND_FIGURES`) under the schedule."""


def _print_differing_causes(d: RunDiff) -> None:
    """The causes (matched by the event that created them) whose state or frequency differ."""
    a, b = d.runs
    n = len(d.causes_differing)
    matched = "causes matched by the event that created them, not by id"
    if not n:
        console.print(text(f"no cause differs in state or frequency ({matched})"))
        return
    causes = Table(title=text(f"{plural(n, 'cause')} {'differs' if n == 1 else 'differ'}"), title_justify="left")
    for h in ("cause", a, b, "description"):
        causes.add_column(text(h), overflow="fold")
    for c in d.causes_differing:
        sa, sb = c.sides
        causes.add_row(
            text(c.cause_id), f"{sa.state} f={sa.frequency}", f"{sb.state} f={sb.frequency}", text(c.description)
        )
    console.print(causes)
    console.print(text((matched, "dim")))


def _print_one_sided(d: RunDiff) -> None:
    """What one run has and the other lacks, and the ids that name different things in each."""
    for run in d.runs:  # wrapped at the terminal; a long list cut (--json has every id)
        console.print(
            text(f"only in {run}: causes {_some(d.causes_only_in[run])}; nodes {_some(d.nodes_only_in[run])}")
        )
    clashes = (
        (d.same_node_id_differs, "node id", "skill node"),
        ([c.cause_id for c in d.same_id_differs], "id", "cause"),
    )
    for ids, noun, thing in clashes:
        if ids:
            names = "names" if len(ids) == 1 else "name"
            said = f"{plural(len(ids), noun)} {names} a different {thing} in each run (created after the fork)"
            console.print(text(f"{said}: {_some(ids)}"))


LISTED = 20
"""Ids a line of ``memory diff`` lists before it says how many more there are."""


def _some(ids: Sequence[str]) -> str:
    """``C1, C2, ...`` cut after :data:`LISTED` ids with the count of the rest; ``-`` for none."""
    if not ids:
        return "-"
    shown = ", ".join(ids[:LISTED])
    return shown if len(ids) <= LISTED else f"{shown} and {len(ids) - LISTED} more"
