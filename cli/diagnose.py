"""``diagevo diagnose FAILURES.jsonl`` and ``diagevo memory reindex``.

``diagnose`` runs the diagnosis pipeline (Prompts 1-4, stages 2a/3a/3.5/4a) for failures produced
by any trainer, appends the decisions to the run's log and prints a summary. The whole file is
validated before anything is stored; a bad line is reported as ``line N: reason``. Into a round
opened with ``round start`` the failures are recorded first (``failure.recorded``); whether they
were is :func:`diagevo.diagnosis.pipeline.diagnose`'s to decide, and the summary says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import Progress
from rich.table import Table

from diagevo.catalog.failure import Failure
from diagevo.cli.common import CLIError, DbOpt, JsonOpt, RunOpt, console, emit_json, err_console, resumable
from diagevo.cli.progress import RichBars, bar_columns
from diagevo.cli.safe import text
from diagevo.cli.store import open_store
from diagevo.diagnosis.pipeline import diagnose as diagnose_round
from diagevo.diagnosis.tools import check_endpoints, diagnosis_config, diagnostician_for, embedder_for, vector_index
from diagevo.errors import require_use
from diagevo.log import Recorder
from diagevo.rounds import Round, current_round, round_state
from diagevo.text.formats import read_lines
from diagevo.text.parsing import bad, file_lines, input_file, quoted
from diagevo.text.urls import resolve_db_url
from diagevo.text.words import did_you_mean
from diagevo.train.config import load_config
from diagevo.verl import rollout_failures
from diagevo.views.index import default_index_path
from diagevo.views.index import reindex as rebuild
from diagevo.views.memory import resolve_run

PHASES = {"extract": "Prompt 1 (extraction)", "maintain": "stages 2a-3.5 (memory)", "consolidate": "stage 4a (merges)"}

EmbedderOpt = Annotated[
    str | None,
    typer.Option("--embedder", help="'local' (MiniLM, offline) or an OpenAI-compatible embeddings base URL."),
]
EmbedModelOpt = Annotated[str | None, typer.Option("--embed-model", help="Model name for an embeddings endpoint.")]
IndexOpt = Annotated[
    Path | None,
    typer.Option(
        "--index",
        help=(
            "LanceDB directory of the vector index (default: in the database's folder, dir/x.db -> "
            "dir/x.diagevo/index.lance; else ./diagevo-DB-KEY.diagevo/index.lance)."
        ),
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", help="TOML config whose diagnosis section sets the defaults (e.g. configs/diagnosis_api.toml)."
    ),
]


def _diagnosis_config(config: Path | None, **overrides: Any) -> Any:
    return diagnosis_config(load_config(config).diagnosis, **overrides)


HEURISTIC_NOTE = "heuristic diagnostician: deterministic rules on the final answer, not the paper's LLM diagnostician"
UNOPENED_NOTE = (
    "note: round {round} of run {run} was never opened (diagevo round start), so the failures were recorded with "
    "their diagnosis, unchecked against the round's questions (the log holds none)"
)

DiagnosticianOpt = Annotated[
    str,
    typer.Option(
        "--diagnostician",
        help="'llm': the paper's diagnostician, Prompts 1-4 sent to --llm-url. 'heuristic': offline rules on how the "
        "final answer misses the pseudo-label (no final answer, sign, off by one, off by a factor, wrong number), "
        "NOT the paper's LLM diagnostician: to try the round protocol without a server.",
    ),
]


def _summary_table(s: Any, heuristic: bool = False) -> Table:
    title = f"diagnosis of run {s.run}, round {s.round}" + (
        " (heuristic, not the paper's LLM diagnostician)" if heuristic else ""
    )
    table = Table(title=text(title), show_header=False)  # the note itself goes to stderr, once
    table.add_column(style="bold")
    table.add_column(justify="right")
    rows = [
        ("failures", s.failures),
        ("recorded (new / already stored)", f"{s.recorded} / {s.already_recorded}"),
        *([("recorded with their diagnosis (round never opened)", s.unopened)] if s.unopened else []),
        ("already decided (resumed)", s.resumed),
        ("recurrence matches", s.recurrences),
        ("duplicates of stored causes", s.duplicates),
        ("reactivations", s.reactivations),
        ("new causes", s.new_causes),
        ("new skill nodes", s.new_nodes),
        ("non-skill slips", s.non_skill),
        ("failed diagnoses (left undiagnosed)", s.failed),
        *([("asked again after a failed diagnosis", s.retried)] if s.retried else []),
        ("failed merge decisions", s.merge_failed),
        ("Prompt 2 lists cut to the cap", s.dedup_truncated),
        ("merge candidates / merges", f"{s.merge_candidates} / {s.merges}"),
        ("LLM calls", s.llm_calls),
        ("θ_dup / θ_merge", f"{s.theta_dup:g} / {s.theta_merge:g}"),
        (
            "seconds (extract / memory / merges)",
            f"{s.extraction_s:.1f} / {s.maintenance_s:.1f} / {s.consolidation_s:.1f}",
        ),
    ]
    for k, v in rows:
        table.add_row(k, str(v))
    return table


def diagnose(
    run: Annotated[str, typer.Option("--run", help="Run id whose memory the failures update.")],
    open_round: Annotated[
        int | None,
        typer.Option("--round", min=1, help="The run's open round (default: it; the last committed round + 1)."),
    ] = None,
    failures_file: Annotated[
        Path | None,
        typer.Argument(help="JSONL, one failure a line (diagevo docs how-to/own-trainer).", show_default=False),
    ] = None,
    from_verl: Annotated[
        Path | None,
        typer.Option(
            "--from-verl",
            help="Instead of FAILURES.jsonl: verl's rollout dump (its trainer.rollout_data_dir: the "
            "export's directory, which holds its verl.json, or a folder in it), whose failed responses of the round's "
            "retained questions are the failures (diagevo docs how-to/verl).",
        ),
    ] = None,
    allow_repeats: Annotated[
        bool,
        typer.Option(
            "--allow-repeats",
            help="With --from-verl: read a dump whose failures repeat an earlier round's (the same question, place "
            "and response), refused as a copy otherwise: a genuine dump whose short answers repeat it.",
        ),
    ] = False,
    llm_url: Annotated[
        str | None, typer.Option("--llm-url", help="OpenAI-compatible base URL of the diagnostician.")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Diagnostician model name.")] = None,
    embedder: EmbedderOpt = None,
    db: DbOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    embed_model: EmbedModelOpt = None,
    index: IndexOpt = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1, help="Requests in flight.")] = None,
    config: ConfigOpt = None,
    diagnostician: DiagnosticianOpt = "llm",
) -> None:
    cfg = _diagnosis_config(
        config, llm_url=llm_url, model=model, embedder=embedder, embed_model=embed_model, concurrency=concurrency
    )
    _check_arguments(cfg, diagnostician, failures_file, from_verl)
    heuristic = diagnostician == "heuristic"
    emb = embedder_for(cfg)  # the objects diagevo.diagnose builds from the same names; a missing extra refused here
    with open_store(db) as store:
        rnd = _open_round(store, run, open_round)
        failures = _failures(store, rnd, failures_file, from_verl, allow_repeats)
        dx = diagnostician_for(diagnostician, cfg, emb)
        # once, before anything is appended: an endpoint that is down fails the command, not
        # every failure of the round one by one
        unlisted = check_endpoints(cfg, dx)
        if unlisted:  # some providers list none: said, not refused
            err_console.print(text(f"note: the diagnostician's server lists no models: {cfg.model} is not checked"))
        vindex = vector_index(store, run, emb, index)

        # a transient bar on stderr per diagnosis phase, fed by the pipeline's progress callback
        with Progress(*bar_columns(None), console=err_console, transient=True, disable=json_out) as bar, resumable():
            progress = RichBars(bar, PHASES, None)
            summary = diagnose_round(
                rnd, diagnostician=dx, embedder=emb, cfg=cfg, index=vindex, failures=failures, progress=progress
            )
    if json_out:
        emit_json({**summary.to_json(), "diagnostician": diagnostician, "model": dx.model_name})
        return
    if heuristic:
        err_console.print(text(f"note: {HEURISTIC_NOTE}"))
    if summary.unopened:
        err_console.print(text(UNOPENED_NOTE.format(run=run, round=rnd.t)))
    console.print(_summary_table(summary, heuristic))


def _failures(
    store: Recorder, rnd: Any, failures_file: Path | None, from_verl: Path | None, allow_repeats: bool
) -> list[Failure]:
    """The failures to diagnose: the FAILURES.jsonl file's, or those of verl's dump."""
    if from_verl is not None:
        return rollout_failures(store, rnd.run, from_verl, t=rnd.t, allow_repeats=allow_repeats)

    assert failures_file is not None  # _check_arguments: one of the two
    return read_failures(failures_file, set(rnd.memory().causes))


def read_failures(path: Path, known_cause_ids: set[str]) -> list[Failure]:
    """FAILURES.jsonl, every line a :class:`~diagevo.catalog.failure.Failure` naming its question and
    pseudo-label; the first problem is ``line N: ...``."""
    out: list[Failure] = []
    seen: dict[str, int] = {}
    for n, _, item in read_lines(file_lines(path), Failure):
        missing = item.unnamed()
        if missing:
            raise bad(f"line {n}", f"{missing[0]} is missing")
        if item.failure_id in seen:
            raise CLIError(
                f"line {n}: failure_id {quoted(item.failure_id)} already appears on line {seen[item.failure_id]}"
            )
        seen[item.failure_id] = n
        unknown = [c for c in item.known_causes if c not in known_cause_ids]
        if unknown:
            raise CLIError(f"line {n}: known_causes names {quoted(unknown[0])}, which is not a cause of this run")
        if len(set(item.known_causes)) != len(item.known_causes):
            raise CLIError(f"line {n}: known_causes repeats a cause")
        out.append(item)
    if not out:
        raise CLIError(f"{path} holds no failures")
    return out


def _check_arguments(cfg: Any, diagnostician: str, failures_file: Path | None, from_verl: Path | None) -> None:
    """Refuse what the command line gets wrong before the database is opened."""
    if diagnostician not in ("llm", "heuristic"):
        raise CLIError(
            f"--diagnostician {diagnostician[:40]!r}: use 'llm' (the paper's) or 'heuristic' (offline rules)"
        )
    if diagnostician != "heuristic" and not cfg.llm_url:
        raise CLIError(
            "no diagnostician endpoint: pass --llm-url (or set diagnosis.llm_url in --config), "
            "or --diagnostician heuristic to try things offline"
        )
    if (failures_file is None) == (from_verl is None):
        raise CLIError(
            "name the failures: a FAILURES.jsonl file, or verl's rollout dump with --from-verl DIR (not both)"
        )
    if failures_file is None:
        return

    input_file(failures_file, "a JSONL file")


def _open_round(store: Recorder, run: str, open_round: int | None) -> Any:
    """The round protocol's handle on ``open_round`` of ``run`` (M_{t-1} read once), by default
    the one the run has open (a run has one at most: naming it adds nothing); refused when the
    run is unknown, has no round open, or the round given is not the one after its last commit."""
    runs = store.runs()
    if run not in runs:
        raise CLIError(f"no run {run!r} in the database{did_you_mean(run, runs)}")
    if open_round is None:
        return Round(store, run, current_round(store, run))
    last = round_state(store, run).last_committed
    if open_round != last + 1:
        raise CLIError(f"round {open_round} is not open in run {run!r}: its last committed round is {last}")
    return Round(store, run, open_round)


def reindex(
    db: DbOpt = None,
    run: RunOpt = None,
    embedder: EmbedderOpt = None,
    embed_model: EmbedModelOpt = None,
    index: IndexOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
) -> None:
    require_use("the vector index (memory reindex)", "memory reindex")
    cfg = _diagnosis_config(config, embedder=embedder, embed_model=embed_model)
    emb = embedder_for(cfg)
    path = index or default_index_path(resolve_db_url(db))
    with open_store(db) as store:
        done = rebuild(store, resolve_run(store, run), path, emb)
    if json:
        emit_json(done.to_dict())
    else:
        said = f"{done.rows} rows ({done.model}) in {done.path}, checkpoint at seq {done.checkpoint}"
        console.print(text(f"reindexed run {done.run}: {said}"))
