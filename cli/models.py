"""``diagevo models``: local models for the ``hf`` backend."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cli.common import JsonOpt, console, emit_json

models_app = typer.Typer(no_args_is_help=True, help="Local models for the hf backend.")


@models_app.command("tiny")
def tiny(
    out: Annotated[Path, typer.Option("--out", help="Directory to write (challenger/, solver/, heldout.jsonl).")],
    steps: Annotated[int, typer.Option("--steps", min=0, help="Supervised warm-up steps.")] = 300,
    hidden: Annotated[int, typer.Option("--hidden", min=8, help="Hidden size (a multiple of 4).")] = 64,
    layers: Annotated[int, typer.Option("--layers", min=1, help="Decoder layers.")] = 2,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the corpus, initialisation and warm-up.")] = 0,
    json: JsonOpt = False,
) -> None:
    """Build a tiny Qwen3 challenger/solver pair and its tokenizer on this machine (no download)."""
    from diagevo.train.hf.tiny import TinySpec, build_tiny

    if hidden % 4:
        raise ValueError(f"--hidden must be a multiple of 4 (4 attention heads), not {hidden}")
    spec = TinySpec(hidden=hidden, layers=layers, steps=steps, seed=seed)
    with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, disable=json or not console.is_terminal) as progress:
        task = progress.add_task("warm-up", total=steps)
        build_tiny(out, spec, lambda _p, d, n: progress.update(task, completed=d, total=n))
    if json:
        emit_json({"out": str(out), "challenger": str(out / "challenger"), "solver": str(out / "solver")})
        return
    console.print(f"tiny model pair written to [bold]{out}[/]: challenger/, solver/, heldout.jsonl", soft_wrap=True)
