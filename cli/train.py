"""``diagevo train`` and ``diagevo ablate``: the co-evolution loop with Rich progress."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.progress import Progress
from rich.table import Table

from diagevo.cli.common import CLIError, DbOpt, Interrupted, JsonOpt, acting_on, console, emit_json, program, spell
from diagevo.cli.fixes import detail, spell_fix
from diagevo.cli.progress import bar_columns, progress_for
from diagevo.cli.safe import plain, text
from diagevo.cli.store import db_args, open_store, say_passed
from diagevo.cli.tables import print_fitted
from diagevo.errors import BadInput
from diagevo.errors.installation import shipped
from diagevo.log.paths import run_dir
from diagevo.results.runs import passed_line
from diagevo.text.redaction import redact_config
from diagevo.text.untrusted import shell_join
from diagevo.text.urls import redact_url, resolve_db_url
from diagevo.text.words import plural
from diagevo.train import run as training
from diagevo.train.ablate import CONFIGURED, MINI_ARMS, VARIANTS, WORLDS, run_ablation
from diagevo.train.config import load_config
from diagevo.train.folders import RunFolders, checkpoint_root
from diagevo.train.hf.args import plan
from diagevo.train.preflight import preflight


def default_config() -> Path | None:
    """``configs/sim.toml``, so that ``diagevo train`` with no ``--config`` trains the same in every
    installation (None: it is not there, and the built-in defaults apply)."""
    return shipped("configs/sim.toml")


PHASE_NAMES = {
    "rounds": "rounds",
    "embedder": "loading the embedding model",
    "challenger": "challenger GRPO",
    "generate": "Q^cur generation",
    "construct": "votes & filter",
    "solver": "solver GRPO",
    "extract": "diagnosis: extraction",
    "maintain": "diagnosis: memory",
    "consolidate": "diagnosis: merges",
    "outage": "diagnostician not answering, seconds waited",
}


ROUND_HEADS = ["t", "kept", "fail", "new", "prom", "react", "merge", "F_t", "ε_t+1", "acc", "shared lab", "s"]
ROUND_KEPT_FIRST = ["t", "acc", "F_t", "ε_t+1", "kept", "new", "fail", "prom", "react", "shared lab", "s", "merge"]
"""The columns a narrow terminal keeps, most important first (the others are named under it)."""
ROUND_LEGEND = {
    "kept": "retained/candidates",
    "fail": "failed trajectories",
    "new": "new causes",
    "prom": "promotions",
    "react": "reactivations",
    "acc": "held-out accuracy",
    "shared lab": "pseudo-label accuracy on the shared questions (Fig. 3c)",
    "kept lab": "retained questions whose pseudo-label is right",
    "wrong+": "positive rewards on wrong answers",
}
LABEL_HEADS = {"retained_label_acc": "kept lab", "wrong_reward_share": "wrong+"}
"""The label figures' columns, after ``shared lab`` (and after it in importance), where any round
has them: a world that knows no truth (the hf backend on a world of real models) has none, and
its table none of these columns."""


def print_round_table(reports: list[Any]) -> None:
    """After each round: what it retained, diagnosed and changed, and the held-out metrics; the
    columns that do not fit the terminal are left out whole and named, never cut to ``8…``."""
    labels = [k for k in LABEL_HEADS if any(_number(r.stats.value(k)) is not None for r in reports)]
    at = ROUND_HEADS.index("shared lab") + 1
    heads = [*ROUND_HEADS[:at], *(LABEL_HEADS[k] for k in labels), *ROUND_HEADS[at:]]
    rows = []
    for r in reports:
        s = r.stats  # the round's row of `memory stats`
        row = [
            str(r.round),
            f"{s.retained}/{s.questions}",
            str(s.failures),
            str(s.new_causes),
            str(s.promotions),
            str(s.reactivations),
            str(s.merges),
            str(s.F),
            f"{s.epsilon_next:.3f}",
            _metric(r.metrics, "heldout_acc"),
            _metric(r.metrics, "pseudo_label_acc"),
            f"{sum(r.seconds.values()):.1f}",
        ]
        rows.append([*row[:at], *(_metric(s.figures, k) for k in labels), *row[at:]])
    at = ROUND_KEPT_FIRST.index("shared lab") + 1
    kept_first = [*ROUND_KEPT_FIRST[:at], *(LABEL_HEADS[k] for k in labels), *ROUND_KEPT_FIRST[at:]]
    print_fitted(
        console,
        heads,
        rows,
        title="rounds",
        legend=ROUND_LEGEND,
        priority=[heads.index(h) for h in kept_first],
        see_all="memory stats --wide has them all",
    )


def _number(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value else None


def _metric(metrics: Mapping[str, Any], key: str) -> str:
    """A round's metric, or a dash where the backend has none (the hf backend knows no true
    answers, so no pseudo-label accuracy)."""
    value = _number(metrics.get(key))
    return "–" if value is None else f"{value:.3f}"


def preflight_verdicts(cfg: Any, db_url: str) -> dict[str, dict[str, str]]:
    """What ``train`` would check before starting, each check's status and detail (and fix)."""
    out: dict[str, dict[str, str]] = {}
    for c in preflight(cfg, checkpoint_root(cfg, db_url, move=False)):
        out[c.name] = {"status": c.status, "detail": detail(c)}
        if c.fix is not None:
            out[c.name]["fix"] = spell_fix(c.fix)
    return out


def show_plan(cfg: Any, path: Path | None, db_url: str, as_json: bool) -> None:
    """``train --dry-run``: what a run would do, read from the config alone."""
    run = training.default_run_id(cfg)
    root = checkpoint_root(cfg, db_url, move=False)  # a dry run moves nothing

    data = plan(
        cfg,
        config_path=str(path) if path else None,
        run=cfg.train.run,
        checkpoints=run_dir(root, run),
        db=redact_url(db_url),
    )
    data = redact_config(data)  # the diagnostician's and the vLLM server's URLs, a key: printed without credentials
    data["run"] = run
    data["preflight"] = preflight_verdicts(cfg, db_url)
    if as_json:
        emit_json(data)
        return
    table = Table(title="plan (nothing loaded)", title_justify="left", box=box.SIMPLE_HEAD, show_header=False)
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in data.items():
        if isinstance(value, dict):
            for sub, v in value.items():
                shown = " ".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else str(v)
                table.add_row(text(f"{key}.{sub}"), text(shown))
        else:
            table.add_row(text(key), text(str(value)))
    console.print(table)


ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML config (default: configs/sim.toml).")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override a field: section.field=value.")]
OutDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--out-dir",
        help="Folder of the run folders of checkpoints (train.out_dir; default: the database's folder, "
        "DB.diagevo/runs/). A resume looks only here, whatever the run's stored config says.",
    ),
]
ReportToOpt = Annotated[
    str | None,
    typer.Option(
        "--report-to",
        help="Experiment tracker (train.report_to): tensorboard, wandb, trackio, mlflow or none. TRL's "
        "per-step rows go there, and diagevo mirrors each GRPO step's signals and each round's figures under "
        "the run id (TensorBoard: files beside the database).",
    ),
]


def train(
    config: ConfigOpt = None,
    rounds: Annotated[int | None, typer.Option("--rounds", min=1, help="Train up to this round (at least 1).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", min=0, help="Seed of every random stream (train.seed).")] = None,
    run: Annotated[str | None, typer.Option("--run", help="Run id (default: derived from seed and time).")] = None,
    db: DbOpt = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run from its log and last checkpoint.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
    set_: SetOpt = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Print the plan (models, engines, batches, launch command, paths); load nothing."
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="With --dry-run: the plan as JSON.")] = False,
    report_to: ReportToOpt = None,
    out_dir: OutDirOpt = None,
) -> None:
    if json_out and not dry_run:  # a run's figures as JSON: memory stats --json once it ran
        raise CLIError("--json goes with --dry-run (after a run: diagevo memory stats --json)")
    # --rounds says where to stop, not how a round runs (stored as train.rounds, the target,
    # which no round reads): a run trained to round 1 and resumed to 3 has the rounds of one trained to 3
    user_sets = [*(set_ or []), *([f"train.report_to={json.dumps(report_to)}"] if report_to is not None else [])]
    overrides = list(user_sets)
    overrides += [f"train.seed={seed}"] if seed is not None else []
    overrides += [f"train.run={json.dumps(run)}"] if run is not None else []  # a TOML basic string
    # where this machine keeps checkpoints: the command's own, never taken from a resumed run's log
    overrides += [f"train.out_dir={json.dumps(str(out_dir))}"] if out_dir is not None else []
    path = config or default_config()
    cfg = load_config(path, overrides)
    explicit_db = db or cfg.db
    db_url = resolve_db_url(explicit_db)
    acting_on(db_url)
    if dry_run:
        show_plan(cfg, path, db_url, json_out)
        return
    cfg = cfg.model_copy(update={"db": db_url})
    # the preflight, once: here before the database is created, so a refused train leaves nothing (exit 2);
    # a resumed run's config is read from its log, and checked there by the library
    if not resume:
        training.ready(cfg, RunFolders.of(cfg, db_url, move=False))  # a refusal moves nothing
    _train_rounds(cfg, TrainRequest(resume, rounds, quiet, user_sets, explicit_db, db_url, cfg.train.out_dir))


@dataclass(frozen=True)
class TrainRequest:
    """What the command line asked of a run besides its config: how far, whether it continues a
    run, whether bars are drawn, the ``--set`` overrides the log records, and the database as named."""

    resume: bool
    rounds: int | None
    quiet: bool
    overrides: list[str]
    explicit_db: str | None
    db_url: str
    out_dir: Path | None = None  # train.out_dir of the command: where the checkpoints go and are looked for


@dataclass
class RunOutcome:
    """What the command prints once the rounds are done: each round's report, the last round
    trained, a cause worth auditing, and whether the log outlives the process."""

    run_id: str
    reports: list[Any] = field(default_factory=list)
    cause: str | None = None
    persistent: bool = True


def _train_rounds(cfg: Any, request: TrainRequest) -> None:
    """Train on this rank (rank 0 leads, the others follow under accelerate launch), then print
    the rounds and the commands that read them."""
    with training.this_rank(cfg) as role:
        if role is None:
            return
        cfg, leader = role
        with open_store(cfg.db, create=True) as store:
            run_id = training.run_id_for(store, cfg, request.resume)
            cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update={"run": run_id})})
            outcome = RunOutcome(run_id)

            def on_round(report: Any) -> None:
                outcome.reports.append(report)
                if not request.quiet:
                    print_round_table([report])

            def run_rounds(progress: Any) -> None:
                options = training.TrainOptions(
                    resume=request.resume,
                    rounds=request.rounds,
                    progress=progress,
                    on_round=on_round,
                    lead=leader,
                    overrides=tuple(request.overrides),
                    checked=not request.resume,  # a new run's config was checked above; a resumed one's, in there
                )
                training.train(cfg, store, options)

            _with_progress(run_rounds, request, run_id)
            if request.resume and (note := training.resume_note(store, cfg, run_id)) is not None:
                say_passed(passed_line(run_id, note.seq, note.why))
            outcome.cause = training.cause_to_audit(store, run_id)
            outcome.persistent = store.persistent
    _print_outcome(outcome, request)


def _with_progress(run_rounds: Any, request: TrainRequest, run_id: str) -> None:
    """Run the rounds with bars (or, with --quiet, none), keeping the round in progress so that
    Ctrl-C says where it stopped and the command that continues."""
    in_round = {"round": 0}
    try:
        # bars on a terminal; piped or into a log file, a plain line on stderr every 10 s
        bars = progress_for(console, names=PHASE_NAMES, reset_on="rounds", rate=True, enabled=not request.quiet)
        with bars as bar:

            def show(phase: str, done: int, total: int | None) -> None:
                if phase == "rounds":
                    in_round["round"] = done + 1
                bar(phase, done, total)

            run_rounds(show)
    except KeyboardInterrupt:
        where = f"in round {in_round['round']}" if in_round["round"] else "before the first round"
        out_dir = ["--out-dir", str(request.out_dir)] if request.out_dir is not None else []
        again = spell("train", "--resume", "--run", run_id, *out_dir, db=request.db_url)
        raise Interrupted(f"interrupted {where}: continue with `{again}`") from None


def _print_outcome(outcome: RunOutcome, request: TrainRequest) -> None:
    """The rounds trained, where the log is, and the commands that read the run."""
    if outcome.reports:
        print_round_table(outcome.reports)
    else:
        console.print("nothing to do: every round is committed")
    console.print()
    console.print(
        text("log: ", (redact_url(request.db_url), "bold"), "  run: ", (outcome.run_id, "bold")), soft_wrap=True
    )  # no password
    last = max((r.round for r in outcome.reports), default=None)
    if last is None:
        return
    if not outcome.persistent:
        console.print("(the log was in this process's memory and is gone: give --db sqlite:///FILE to keep it)")
        return
    dbs, note = db_args(request.explicit_db, request.db_url)
    console.print("try:")
    for cmd in (["replay", "--round", str(last)], ["stats"], *([["why", outcome.cause]] if outcome.cause else [])):
        line = shell_join([program(), "memory", *cmd, *dbs, "--run", outcome.run_id])
        console.print(text(f"  {line}"), soft_wrap=True)
    if note:
        console.print(text(f"  ({note})"), soft_wrap=True)


def ablate(
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Seeds 0 to N-1.")] = 3,
    only_seeds: Annotated[
        list[int] | None,
        typer.Option(
            "--seed", min=0, help="Only these seeds (an ablation run in parts, each part's cells in one log)."
        ),
    ] = None,
    rounds: Annotated[int, typer.Option("--rounds")] = 7,
    config: Annotated[Path | None, typer.Option("--config", "-c")] = None,
    out: Annotated[Path, typer.Option("--out", help="SQLite file for the ablation runs.")] = Path("runs/ablate.db"),
    variants: Annotated[list[str] | None, typer.Option("--variant", help="Only these variants.")] = None,
    worlds: Annotated[list[str] | None, typer.Option("--world", help="Only these world settings.")] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", min=1, help="Cells trained at once, each in its own process (default: 1).")
    ] = 1,
    json: JsonOpt = False,
    set_: SetOpt = None,
) -> None:
    path = config or default_config()
    sim = load_config(path, list(set_ or [])).train.backend == "sim"  # a bad config is refused before anything
    picked_v = variants or list(VARIANTS if sim else MINI_ARMS)
    picked_w = worlds or (list(WORLDS) if sim else [CONFIGURED])
    for name in picked_v:
        if name not in VARIANTS:
            raise BadInput(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    for name in picked_w:
        if name not in WORLDS and name != CONFIGURED:
            raise BadInput(f"unknown world setting {name!r}; choose from {', '.join([*WORLDS, CONFIGURED])}")
    out.parent.mkdir(parents=True, exist_ok=True)  # validated: now the ablation's directory
    picked_s = sorted(set(only_seeds)) if only_seeds else list(range(seeds))
    total = len(picked_v) * len(picked_w) * len(picked_s)

    with Progress(
        *bar_columns(40),
        console=console,
        disable=json,
    ) as progress:
        task = progress.add_task("ablation runs", total=total)

        def tick(name: str, done: int, _total: int | None) -> None:
            progress.update(task, completed=done, description=plain(name))

        results = run_ablation(
            path, list(set_ or []), f"sqlite:///{out}", picked_s, rounds, picked_v, picked_w, tick, jobs=jobs
        )
    if json:
        emit_json(results)
        return
    for world, rows in results.items():
        table = Table(
            title=text(f"held-out accuracy, world: {world} ({seed_words(picked_s)}, {plural(rounds, 'round')})")
        )
        for c in ("variant", "at val-best round", "last round", "val-best rounds", "oracle (best held-out)"):
            table.add_column(c, justify="right")
        for r in rows:
            table.add_row(
                text(r["variant"]),
                f"{r['selected_mean']:.3f} ± {r['selected_std']:.3f}",
                f"{r['final_mean']:.3f} ± {r['final_std']:.3f}",
                ",".join(map(str, r["selected_rounds"])),
                f"{r['oracle_mean']:.3f}",
            )
        console.print(table)
        if any(r.get("dynamics") for r in rows):  # the simulator's alone
            console.print(dynamics_table(world, rows, len(picked_s)))


# per-round measures shown by `diagevo ablate` (key, column title, format)
DYNAMICS_COLUMNS = (
    ("question_words", "words", "{:.0f}"),
    ("parts_per_question", "parts", "{:.2f}"),
    ("bigram_diversity", "2-gram %", "{:.1f}"),
    ("skill_coverage", "skill cov.", "{:.2f}"),
    ("bleu_repetition", "BLEU r_rep", "{:.3f}"),
    ("train_label_acc", "train labels", "{:.2f}"),
    ("shared_label_acc", "label acc", "{:.2f}"),
    ("solver_care", "care", "{:.2f}"),
    ("active", "Active", "{:.0f}"),
    ("mastered", "Mastered", "{:.0f}"),
    ("promotions", "prom.", "{:.1f}"),
    ("reactivated_same_round", "react. same rd", "{:.1f}"),
)


def seed_words(seeds: list[int]) -> str:
    """'3 seeds' for seeds 0-2, 'seeds 3, 4' for a part of an ablation."""
    return plural(len(seeds), "seed") if seeds == list(range(len(seeds))) else "seeds " + ", ".join(map(str, seeds))


def dynamics_table(world: str, rows: list[dict], seeds: int) -> Table:
    """Per-round measures (mean over seeds), one row per variant and round."""
    ref = rows[0].get("reference", "") if rows else ""
    table = Table(
        title=text(
            f"per round, mean of {plural(seeds, 'seed')}, world: {world}; label acc on the shared questions of {ref!r}"
        )
    )
    table.add_column("variant")
    table.add_column("round", justify="right")
    for _, title, _ in DYNAMICS_COLUMNS:
        table.add_column(title, justify="right")
    for r in rows:
        dyn = r.get("dynamics", {})
        n = max((len(v) for v in dyn.values()), default=0)
        for t in range(n):
            cells = [fmt.format(dyn[k][t]) if k in dyn else "" for k, _, fmt in DYNAMICS_COLUMNS]
            table.add_row(text(r["variant"] if t == 0 else ""), str(t + 1), *cells, end_section=t == n - 1)
    return table
