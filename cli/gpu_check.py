"""``diagevo gpu-check``: one round of the real loop on a CUDA GPU, timed phase by phase."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from diagevo.cli.common import JsonOpt, console, emit_json
from diagevo.cli.progress import progress_for
from diagevo.cli.safe import text


def gpu_check(
    model: Annotated[Path, typer.Option("--model", help="A local model directory; both roles start from it.")] = Path(
        "models/smollm2"
    ),
    out: Annotated[
        Path, typer.Option("--out", help="Where the check's log and checkpoints go (must not hold a previous check).")
    ] = Path("gpu-check"),
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="SECTION.FIELD=VALUE", help="Override a field of configs/gpu-check.toml."),
    ] = None,
    json: JsonOpt = False,
) -> None:
    # the check trains (the loop, its diagnosis' HTTP clients, numpy): loaded when it runs, not for --help
    from diagevo.train.gpu_check import run_check

    with progress_for(console, enabled=not json) as tick:
        report = run_check(model, out, overrides=list(set_ or []), progress=tick)
    if json:
        emit_json(report.as_dict())
    else:
        console.print(
            text(
                f"{report.device}: {report.engine}, attention {report.attention}; "
                + ", ".join(f"{k} {v}" for k, v in report.versions.items())
            ),
            soft_wrap=True,
        )
        table = Table("phase", "seconds", "peak GiB", "steps", "prompts/step", "completions/step", box=None)
        for name, f in report.phases.items():
            table.add_row(
                name,
                f"{f.seconds:.1f}",
                f"{f.peak_gib:.2f}",
                str(f.steps or ""),
                str(f.prompts_per_step or ""),
                str(f.completions_per_step or ""),
            )
        console.print(table)
        console.print(
            f"round {report.round_seconds:.1f} s; loop sampling {report.sampled_tokens} tokens at "
            f"{report.sampled_tokens_per_s:.0f} tokens/s; "
            f"weights changed: "
            + ", ".join(f"{r} {s:.0%} of tensors" for r, s in report.weights_changed.items())
            + (
                f"; verify {'clean' if not report.verify_problems else 'FAILED'}; vLLM engines per process "
                f"{report.vllm_engines}"
            ),
            soft_wrap=True,
        )
        console.print(
            text(("passed", "green")) if report.passed else text(("FAILED:", "red"), " " + "; ".join(report.failures)),
            soft_wrap=True,
        )
    if not report.passed:
        raise typer.Exit(1)
