"""``diagevo export dataset``: a run as Parquet files and a dataset card, loadable without diagevo;
``diagevo export verl``: a round as the Parquet files verl trains on."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from diagevo.cli.common import DbOpt, JsonOpt, console, emit_json, round_from_0
from diagevo.cli.safe import text
from diagevo.cli.store import open_store
from diagevo.dataset import export_dataset
from diagevo.verl import export_round

export_app = typer.Typer(no_args_is_help=True)

RunOpt = Annotated[str, typer.Option("--run", help="The run to export.")]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="The directory to write (created if missing).")]


@export_app.command()
def dataset(
    run: RunOpt,
    out: OutOpt,
    upto_round: Annotated[
        int | None,
        typer.Option("--round", callback=round_from_0, help="Export rounds 1 to this committed round (default: all)."),
    ] = None,
    retained_only: Annotated[
        bool, typer.Option("--retained-only", help="Only the questions the filter retained (the curriculum).")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Write into a directory holding other files (they are left as they are).")
    ] = False,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    """Write RUN as Parquet files (questions, failures with their diagnoses, nodes, causes, every
    cause's state per round) and a README.md dataset card that Hugging Face datasets reads."""
    with open_store(db, readonly=True) as store:
        done = export_dataset(store, run, out, upto_round=upto_round, retained_only=retained_only, force=force)
    if json:
        emit_json(asdict(done))
        return
    table = Table(title=text(f"run {done.run}, rounds 1-{done.round}, in {done.directory}"), title_justify="left")
    for col in ("file", "rows", "bytes"):
        table.add_column(col, justify="left" if col == "file" else "right")
    for f in done.files:
        table.add_row(f.name, "-" if f.name == "README.md" else str(f.rows), f"{f.bytes:,}")
    console.print(table)


@export_app.command()
def verl(
    run: RunOpt,
    out: OutOpt,
    t: Annotated[
        int | None,
        typer.Option(
            "--round", min=1, help="The round (default: the run's open round; a committed one is exported when named)."
        ),
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option(
            "--questions",
            help="verl's generation output of curriculum.parquet (the questions the challenger wrote): "
            "also write construct.parquet, each question as a solver prompt for its construction responses.",
        ),
    ] = None,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    """Write a round of RUN as the Parquet files verl's RLHFDataset reads: solver.parquet (the
    retained questions, once recorded, with their pseudo-labels) and, while the round is open,
    challenger.parquet (the challenger's update prompts), curriculum.parquet (the prompts
    Q^cur is generated from) and with --questions construct.parquet; and verl.json, the batch
    settings each file trains with (the overrides shown) and what a rollout dump must match.
    Files of other programs in the directory are never replaced (diagevo docs how-to/verl)."""
    with open_store(db, readonly=True) as store:
        done = export_round(store, run, out, t=t, questions=questions)
    if json:
        emit_json(done.to_dict())
        return
    state = "open" if done.open else "committed"
    title = f"run {done.run}, round {done.round} ({state}), in {done.directory}"
    table = Table(title=text(title), title_justify="left")
    for col in ("file", "rows", "bytes", "verl overrides"):
        table.add_column(col, justify="right" if col in ("rows", "bytes") else "left")
    for f in done.files:
        rows = f"{f.rows} ({f.left_out} without a question)" if f.left_out else str(f.rows)
        table.add_row(f.name, rows, f"{f.bytes:,}", text(" ".join(f.overrides)))
    console.print(table)
