"""``diagevo eval``: benchmark scores of a model directory, or of a run's solver checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from diagevo.cli.common import CLIError, DbOpt, JsonOpt, console, emit_json, err_console, resumable
from diagevo.cli.progress import progress_for
from diagevo.cli.safe import text
from diagevo.cli.store import open_store
from diagevo.config.errors import ConfigError
from diagevo.doctor import check_engine, require
from diagevo.eval.benchmarks import load_benchmark
from diagevo.eval.config import EvalConfig
from diagevo.eval.runs import ModelEvaluation, RunEvaluation, evaluate_model, evaluate_run
from diagevo.files.written import plain_name
from diagevo.generation import make_engine
from diagevo.runtime.progress import quiet_libraries
from diagevo.views.memory import resolve_run

EngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine", help="local (transformers), vllm, or endpoint (default: endpoint with --url, else local)."
    ),
]


def _pairs(items: list[str], what: str, example: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise CLIError(f"{what} {item!r} is not of the form {example}")
        out.append((key.strip(), value.strip()))
    return out


def load_benches(specs: list[str], fields: list[str], limit: int | None) -> list[Any]:
    """Parse ``NAME=PATH`` and ``NAME.ROLE=COLUMN`` options and read every file (all before
    anything is generated, so a bad file costs nothing)."""
    mapping: dict[str, dict[str, str]] = {}
    for key, column in _pairs(fields, "--field", "NAME.ROLE=COLUMN"):
        name, dot, role = key.rpartition(".")
        if not dot or not name:
            raise CLIError(f"--field {key}={column}: name the benchmark and the role, e.g. gsm8k.question={column}")
        mapping.setdefault(name, {})[role] = column

    pairs = _pairs(specs, "--bench", "NAME=PATH")
    for name, _ in pairs:  # NAME names the outputs file under --out
        plain_name(name, "--bench NAME")
    names = [name.partition(":")[0] for name, _ in pairs]
    for name in mapping:
        if name not in names:
            raise CLIError(f"--field {name}.…: no --bench named {name}")
    if len(set(names)) != len(names):
        raise CLIError(f"--bench {next(n for n in names if names.count(n) > 1)} is given twice")
    return [load_benchmark(name, path, mapping.get(name.partition(":")[0]), limit) for name, path in pairs]


def _engine_factory(engine: str | None, url: str | None) -> tuple[str, Any]:
    kind = engine or ("endpoint" if url else "local")
    if kind not in ("local", "vllm", "endpoint"):
        raise CLIError(f"--engine {kind}: use local, vllm or endpoint")
    if kind == "endpoint" and not url:
        raise CLIError(
            "--engine endpoint needs --url (the server's OpenAI-compatible base URL, e.g. http://host:8000/v1)"
        )
    if kind != "endpoint" and url:
        raise CLIError(f"--url is for the endpoint engine, not {kind}")

    require(check_engine(kind))  # before anything is loaded or recorded: one line, exit 2

    def build(model: str) -> Any:
        try:
            if kind == "local":
                quiet_libraries()
            return make_engine(kind, model, **({"url": url} if kind == "endpoint" else {}))  # type: ignore[arg-type]
        except ImportError as exc:
            raise CLIError(
                f"the {kind} engine cannot be loaded here ({exc}); evaluate through a server with --url"
            ) from None

    return kind, build


def _table(rows: Sequence[tuple[int | None, Any]], title: str, selected: int | None = None) -> Table:
    table = Table(title=text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    with_round = any(t is not None for t, _ in rows)
    heads = (["round"] if with_round else []) + ["benchmark", "n", "accuracy", "mean@k", "unparsed", "seconds"]
    for h in heads:
        table.add_column(h, justify="left" if h == "benchmark" else "right", no_wrap=True)
    for t, r in rows:
        mean = f"{r.mean_at_k:.3f} (k={r.k})" if r.mean_at_k is not None else "-"
        resumed = f" ({r.resumed} resumed)" if r.resumed else ""
        mark = " *" if selected is not None and t == selected else ""
        cells = [f"{t}{mark}"] if with_round else []
        cells += [r.benchmark, str(r.n), f"{r.accuracy:.3f}", mean, str(r.unparsed), f"{r.seconds:.1f}{resumed}"]
        table.add_row(*(text(c) for c in cells))
    return table


BenchOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--bench",
        help=(
            "NAME=PATH of a benchmark file (repeatable); NAME begins with a kind: math500, gsm8k, olympiadbench, "
            "minerva, amc, aime, mmlu_pro, supergpqa, gpqa_diamond, bbeh, mmlu, mixed."
        ),
    ),
]

ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="Model directory (local, vllm) or the model name the server knows (endpoint)."),
]

EvalRunOpt = Annotated[
    str | None,
    typer.Option("--run", help="Evaluate this run's solver checkpoints and record the scores in its log."),
]

RoundsOpt = Annotated[str, typer.Option("--rounds", help="With --run: all, N, N,M or N-M (round 0 is the base model).")]

SelectOpt = Annotated[
    str | None,
    typer.Option(
        "--select",
        help=(
            "With --run: VAL_FILE (or NAME=PATH) whose accuracy picks the best round; --bench files are then "
            "evaluated on that round."
        ),
    ),
]

FieldOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--field", help="NAME.ROLE=COLUMN: read a role (question, answer, options, id, ...) from another column."
    ),
]

UrlOpt = Annotated[
    str | None,
    typer.Option("--url", help="OpenAI-compatible base URL (vllm serve, a provider); key from $DIAGEVO_LLM_API_KEY."),
]

LimitOpt = Annotated[int | None, typer.Option("--limit", help="Only the first N questions of each file.")]

SamplesOpt = Annotated[
    int | None, typer.Option("--samples", help="k of mean@k for AMC and AIME (default 32; 0 = greedy only).")
]

MaxNewTokensOpt = Annotated[int | None, typer.Option("--max-new-tokens", help="Longest response (default 4096).")]

BatchSizeOpt = Annotated[
    int | None,
    typer.Option("--batch-size", help="Questions per generation batch; outputs are saved after each (default 64)."),
]

SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed of the mean@k samples (default 0).")]

OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Directory of the per-question outputs (JSONL, resumable).")]
OutDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--out-dir",
        help="With --run: the folder its checkpoints were written under (train's --out-dir or train.out_dir; "
        "default: the database's folder), whatever the run's stored config says.",
    ),
]


def eval_command(
    bench: BenchOpt = None,
    model: ModelOpt = None,
    run: EvalRunOpt = None,
    rounds: RoundsOpt = "all",
    select: SelectOpt = None,
    field: FieldOpt = None,
    engine: EngineOpt = None,
    url: UrlOpt = None,
    limit: LimitOpt = None,
    samples: SamplesOpt = None,
    max_new_tokens: MaxNewTokensOpt = None,
    batch_size: BatchSizeOpt = None,
    seed: SeedOpt = None,
    out: OutOpt = Path("eval"),
    out_dir: OutDirOpt = None,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    _check_targets(model, run, bench, select)
    if out_dir is not None and run is None:
        raise CLIError("--out-dir says where a run's checkpoints lie: use it with --run")
    cfg = _eval_config(limit, samples, max_new_tokens, batch_size, seed)
    benches = load_benches(bench or [], field or [], limit)
    validation = _validation_bench(select, limit) if select else None
    kind, make = _engine_factory(engine, url)
    greedy_only = 0 if samples == 0 else None
    done: ModelEvaluation | RunEvaluation
    # bars on a terminal; piped or into a log file, a plain line on stderr every 10 s per phase
    with progress_for(err_console, enabled=not json, transient=True, width=None) as bars, resumable():
        if model is not None:
            done = evaluate_model(make, model, benches, cfg, out, samples=greedy_only, progress=bars, engine_name=kind)
            title = f"model {model}"
        else:
            with open_store(db) as store:
                done = evaluate_run(
                    store,
                    resolve_run(store, run),
                    benches,
                    make,
                    cfg,
                    out,
                    rounds=rounds,
                    validation=validation,
                    samples=greedy_only,
                    engine_name=kind,
                    progress=bars,
                    checkpoints=out_dir,
                )
            title = f"run {done.run}"
    if json:
        emit_json(done.to_dict())
        return
    selected = done.selected if isinstance(done, RunEvaluation) else None
    console.print(_table(done.rows, title, selected))
    if isinstance(done, RunEvaluation) and done.selected is not None:
        best = done.validation[done.selected]
        console.print(
            text(
                f"selected round {done.selected} (* above): validation accuracy {best.accuracy:.3f} on {best.benchmark}"
            )
        )
    if done.rows:
        console.print(text((f"per-question outputs under {out}/ (rerun the same command to resume)", "dim")))


def _check_targets(model: str | None, run: str | None, bench: list[str] | None, select: str | None) -> None:
    """A model or a run, and something to evaluate it on."""
    if (model is None) == (run is None):
        raise CLIError("give either --model DIR or --run R")
    if select and run is None:
        raise CLIError("--select picks a round of a run: use it with --run")
    if not bench and not select:
        raise CLIError("nothing to evaluate: give --bench NAME=PATH (or --select VAL_FILE with --run)")


def _eval_config(
    limit: int | None, samples: int | None, max_new_tokens: int | None, batch_size: int | None, seed: int | None
) -> Any:
    """The evaluation settings given on the command line, each refused under its option's name."""
    if limit is not None and limit < 1:
        raise CLIError(f"--limit {limit}: give a positive number of questions")
    if samples is not None and samples < 0:
        raise CLIError(f"--samples {samples}: give k >= 1, or 0 for greedy only")
    settings = {"max_new_tokens": max_new_tokens, "batch_size": batch_size, "seed": seed, "samples": samples or None}
    try:
        return EvalConfig(**{k: v for k, v in settings.items() if v is not None})
    except ConfigError as exc:
        raise CLIError(f"--{exc.key.replace('_', '-')}: {exc.error['msg']}") from None


def _validation_bench(select: str, limit: int | None) -> Any:
    """The file of ``--select`` (``VAL_FILE`` or ``NAME=PATH``) whose accuracy picks a round."""
    name, sep, path = select.partition("=")
    if sep:
        plain_name(name, "--select NAME")
    return load_benchmark(name if sep else "validation:mixed", path if sep else select, None, limit)
