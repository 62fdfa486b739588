"""``diagevo memory stats`` and ``diagevo memory plot``: a run's figures per round (and per GRPO
step), as a table, a file, a follow, or the paper's Figure 3b."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from diagevo.cli.common import CLIError, DbOpt, JsonOpt, RunOpt, WideOpt, console, emit_json
from diagevo.cli.follow import FollowOpt, UntilOpt, follow_rows
from diagevo.cli.safe import plain, text
from diagevo.cli.store import open_store
from diagevo.cli.tables import print_fitted
from diagevo.files.written import TABLE_SUFFIXES, write_replacing, write_rows
from diagevo.log import Recorder
from diagevo.results import JsonRow
from diagevo.results.stats import PendingRow
from diagevo.text.words import plural
from diagevo.views import queries
from diagevo.views.follow import follow_stats, follow_steps
from diagevo.views.stats import COLUMNS, COUNTED_COLUMNS, LABEL_FIGURES, is_family_detail

STATS_COLUMNS = {
    "round": "t",
    "active": "active",
    "mastered": "mastered",
    "nodes": "nodes",
    "F": "F_t",
    "epsilon_next": "ε_t+1",
    "retained": "kept",
    "failures": "fail",
    "new_causes": "new",
    "attributions": "attr",
    "promotions": "prom",
    "reactivations": "react",
    "merges": "merge",
    "failed_diagnoses": "dx fail",
    "heldout_acc": "held-out",
    "pseudo_label_acc": "shared lab",
    "retained_label_acc": "kept lab",
    "wrong_reward_share": "wrong+",
    "ckpt_mb": "ckpt MB",
    "disk_mb": "disk MB",
}
# what a narrow terminal keeps, most important first: the round, its scores (held-out accuracy,
# every metric by name, the benchmarks, the label figures), the schedule and the memory, then what
# the round did (the counted columns, in their order); per-family figures (acc/FAMILY and the label
# figures by skill) last
_KEPT_FIRST = (
    "round",
    "heldout_acc",
    "*",
    *LABEL_FIGURES,
    "F",
    "epsilon_next",
    "active",
    "mastered",
    "nodes",
    *COUNTED_COLUMNS,
    "disk_mb",
    "ckpt_mb",
)


_LEGEND = {
    "kept": "retained questions",
    "new": "new causes",
    "attr": "attributions",
    "prom": "promotions",
    "react": "reactivations",
    "dx fail": "failures whose diagnosis failed",
    "ckpt MB": "checkpoints written in the round",
    "disk MB": "of those, still on disk",
    "kept lab": "retained questions whose pseudo-label is right",
    "wrong+": "positive rewards on wrong answers",
}
"""What the abbreviated headers of ``memory stats`` mean (said under the table for those shown)."""


def stats_columns(rows: Sequence[JsonRow], metrics: Sequence[str]) -> tuple[list[str], list[str], list[int]]:
    """The columns of the ``memory stats`` table in their order, their headers, and their indices
    in the order a narrow terminal keeps them (:data:`_KEPT_FIRST`)."""
    named = [m for m in metrics if m not in STATS_COLUMNS]  # held-out accuracy and the label figures: named above
    cols = [c for c in STATS_COLUMNS if rows and any(c in r for r in rows)] + named
    heads = [STATS_COLUMNS.get(c, c) for c in cols]  # a metric under its own name, as --json has it
    rank = {c: i for i, c in enumerate(_KEPT_FIRST)}

    def importance(i: int) -> tuple[int, int]:
        c = cols[i]
        if c in rank:
            return rank[c], i
        return (len(rank), i) if is_family_detail(c) else (rank["*"], i)

    return cols, heads, sorted(range(len(cols)), key=importance)


def stats(
    db: DbOpt = None,
    run: RunOpt = None,
    wide: WideOpt = False,
    follow: FollowOpt = False,
    until_round: UntilOpt = None,
    steps: Annotated[
        bool,
        typer.Option(
            "--steps",
            help="One row per GRPO step instead (train.step: reward, reward_std, kl, entropy, clip ratio, "
            "completion length, learning rate, grad norm, as TRL names them), challenger and solver apart.",
        ),
    ] = False,
    json: JsonOpt = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Also write the rows to this file (.csv, or .parquet where polars is installed)."
        ),
    ] = None,
) -> None:
    if steps:
        if out is not None:
            raise CLIError("--steps goes without -o (memory stats --steps --json has the rows)")
        _step_stats(db, run, json, wide, follow, until_round)
        return

    if out is not None and out.suffix.lower() not in TABLE_SUFFIXES:
        raise CLIError(f"{out}: write the rows as a .csv or .parquet file (not {out.suffix or 'no suffix'})")
    if until_round is not None and not follow:
        raise CLIError("--until-round goes with --follow")
    if follow:
        if out is not None:
            raise CLIError("give --follow or -o, not both")

        def rounds(store: Recorder, run_id: str) -> Iterator[JsonRow]:
            return (row.to_json() for row in follow_stats(store, run_id, until_round))

        follow_rows(db, run, ": a line per committed round", json, rounds, _round_line)
        return
    with open_store(db, readonly=True) as store:
        result = queries.stats(store, run)
    run_id, rows = result.run, [r.to_json() for r in result.rounds]  # the table's columns are by name
    if out is not None:
        write_rows(out, [*COLUMNS, *result.metrics], rows)
    if json:
        emit_json(result.to_dict())
        return
    if not rows:
        console.print(text(f"run {run_id} has no committed round yet", _pending(result.uncommitted)), soft_wrap=True)
    else:
        cols, heads, keep = stats_columns(rows, result.metrics)
        cells = [[_cell(r.get(c)) for c in cols] for r in rows]
        print_fitted(console, heads, cells, title=text(f"run {run_id}"), wide=wide, legend=_LEGEND, priority=keep)
    if out is not None:
        console.print(text(f"wrote {out} ({plural(len(rows), 'round')})"))


_STEP_HEADS = {
    "global_step": "step",
    "reward_std": "reward sd",
    "clip_ratio/region_mean": "clip",
    "completions/mean_length": "length",
    "learning_rate": "lr",
    "grad_norm": "grad",
}


def _step_cells(row: JsonRow, fields: Sequence[str]) -> list[str]:
    return [str(row["round"]), plain(str(row["role"])), str(row["global_step"])] + [
        f"{v:.4g}" if isinstance(v := row.get(f), float) else _cell(v) for f in fields
    ]


def _step_stats(
    db: str | None, run: str | None, as_json: bool, wide: bool, follow: bool, until_round: int | None
) -> None:
    """``memory stats --steps``: the run's GRPO steps; with --follow, each as its phase logs it."""
    if follow:
        steps = partial(follow_steps, until_round=until_round)
        follow_rows(db, run, ": a line per GRPO step", as_json, steps, _step_line)
        return
    with open_store(db, readonly=True) as store:
        data = queries.steps(store, run)
    if as_json:
        emit_json(data.to_dict())
        return
    if not data.steps:
        console.print(text(f"run {data.run} logged no GRPO step (the hf backend logs them)"), soft_wrap=True)
        return
    fields = data.fields if wide else [f for f in queries.STEP_FIELDS if f in data.fields]
    heads = ["t", "role", "step", *[_STEP_HEADS.get(f, f) for f in fields]]
    cells = [_step_cells(r.to_json(), fields) for r in data.steps]
    print_fitted(console, heads, cells, title=text(f"run {data.run}: GRPO steps"), wide=wide)


def _step_line(row: JsonRow) -> Text:
    shown = [f for f in queries.STEP_FIELDS if f in row]
    names = ["t", "role", "step", *[_STEP_HEADS.get(f, f) for f in shown]]
    return text("  ".join(f"{h}={c}" for h, c in zip(names, _step_cells(row, shown), strict=True)))


def _round_line(row: JsonRow) -> Text:
    cols, heads, _ = stats_columns([row], [k for k in row if k not in COLUMNS])
    return text("  ".join(f"{h}={_cell(row.get(c))}" for c, h in zip(cols, heads, strict=True)))


def _pending(uncommitted: Sequence[PendingRow]) -> str:
    """``; recorded so far: round 0 bench/gsm8k=0.250``: the scores of rounds not committed."""
    parts = [f"round {m.round} " + " ".join(f"{k}={_cell(v)}" for k, v in m.figures.items()) for m in uncommitted]
    return f"; recorded so far: {'; '.join(parts)}" if parts else ""


def _cell(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else "-" if v is None else str(v)


def plot(
    db: DbOpt = None,
    run: RunOpt = None,
    json: JsonOpt = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Also write the figure (.svg) or the series (.csv) to this file.")
    ] = None,
) -> None:
    suffix = out.suffix.lower() if out is not None else ""
    if out is not None and suffix not in (".svg", ".csv"):
        raise CLIError(f"{out}: write a .svg figure (no PNG: a browser converts the SVG) or the series as .csv")
    with open_store(db, readonly=True) as store:
        result = queries.lifecycle(store, run)
    run_id = result.run
    rows: list[dict[str, Any]] = [asdict(r) for r in result.series]  # the memory's columns: numbers
    if not rows:
        if out is not None:
            raise CLIError(f"run {run_id} has no committed round yet: nothing to plot, {out} not written")
        if json:
            emit_json({"run": run_id, "series": []})
        else:
            console.print(text(f"run {run_id} has no committed round yet: nothing to plot"))
        return
    if out is not None and suffix == ".csv":
        write_rows(out, list(rows[0]), rows)
    elif out is not None:
        from diagevo.report.figures import lifecycle

        write_replacing(out, lifecycle(result.series, title=f"Memory lifecycle, run {run_id}"))
    if json:
        emit_json(result.to_dict())
        return
    top = max(1, *(r.active + r.mastered for r in result.series))
    # a row is "round NNN " + bar + " act NNNN mas NNNN nod NNN ε 0.000": the bar takes what is left
    width = max(10, min(50, console.width - 10 - 36))
    console.print(
        text(("█", "yellow"), " active  ", ("▒", "green"), f" mastered   (run {run_id}; bar: causes, at most {top})"),
        soft_wrap=True,
    )
    for r in result.series:
        a = round(width * r.active / top)
        m = round(width * r.mastered / top)
        console.print(
            text(
                f"round {r.round:>3} ",
                ("█" * a, "yellow"),
                ("▒" * m, "green"),
                " " * (width - a - m),
                f" act {r.active:>4} mas {r.mastered:>4} nod {r.nodes:>3} ε {r.epsilon_next:.3f}",
            )
        )
    console.print(text(("act: active causes  mas: mastered  nod: skill nodes  ε: ε_t+1", "dim")))
    if out is not None:
        console.print(text(f"wrote {out}"))
