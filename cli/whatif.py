"""``diagevo memory whatif``: the memory re-decided on a run's recorded evidence, one derived run
per setting asked, side by side in one table."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from diagevo.cli.common import DbOpt, JsonOpt, console, emit_json
from diagevo.cli.safe import text
from diagevo.cli.store import open_store, say_passed
from diagevo.results.runs import passed_line
from diagevo.whatif import RoundOutcome, Sweep, what_if_sweep


def whatif(
    run: Annotated[str, typer.Option("--run", help="The recorded run to re-decide.")],
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="A setting of the model-free deciders, section.field=value: memory.k, memory.theta_up or "
            "memory.state_updates; v1,v2,... writes one derived run per value (every combination, at most 100: "
            "counted and checked before the first is written).",
        ),
    ] = None,
    to: Annotated[
        list[str] | None,
        typer.Option("--to", help="The derived runs' ids, one per combination (default: RUN~field=value)."),
    ] = None,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    with open_store(db) as store:
        done = what_if_sweep(store, run, list(set_ or []), list(to or []))
    if json:
        emit_json(asdict(done))
        return
    for w in done.whatifs:  # the source's rows a what-if was made without: the rules' refusals are named apart
        for left in w.left_behind:
            say_passed(passed_line(w.source, left.seq, left.why))
    render(done)


def _cell(r: RoundOutcome | None) -> str:
    if r is None:
        return "-"
    return f"{r.active}/{r.mastered} {r.F}\nε {r.epsilon_next:.3f}"


def render(done: Sweep) -> None:
    """The recorded run's rounds and each what-if's, side by side: Active/Mastered, F_t, ε_{t+1}."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column("round", justify="right", no_wrap=True)
    table.add_column("recorded", justify="right", min_width=9)
    for w in done.whatifs:
        label = " ".join(f"{k.rpartition('.')[2]}={v}" for k, v in w.settings.items()) or "no change"
        table.add_column(text(label), justify="right", min_width=9, overflow="fold")
    columns = [{r.round: r for r in done.recorded}, *({r.round: r for r in w.rounds} for w in done.whatifs)]
    for t in sorted({t for c in columns for t in c}):
        table.add_row(str(t), *(_cell(c.get(t)) for c in columns), end_section=True)
    console.print(text(f"run {done.source}: Active/Mastered F_t, then ε_t+1, at each commit"))
    console.print(table)
    for w in done.whatifs:
        state = "written" if w.created else "there already, unchanged"
        changed = ", ".join(f"{k}={v}" for k, v in w.settings.items()) or "no setting changed"
        console.print(text(f"run {w.run} ({changed}): {state}, from run {w.source} through round {w.source_round}"))
    console.print(text((f"What a what-if is: {done.meaning}.", "dim")), soft_wrap=True)
