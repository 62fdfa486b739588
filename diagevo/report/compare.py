"""Runs compared in one offline HTML file (``diagevo report --run A --run B ...``): each run's
per-round statistics (:func:`diagevo.views.stats.round_stats`, what ``memory stats`` prints)
overlaid on shared axes, one colour, marker and line style per run: held-out accuracy and every
metric recorded by name, F_t, ε_{t+1}, Active and Mastered causes.

Run ids and metric names are untrusted: escaped in the HTML, drawn literally in the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from diagevo.log import EventStore
from diagevo.report import figures
from diagevo.report.html import CSS, _a, _chart, _e, table
from diagevo.views.stats import frame, is_family_detail, metric_columns, round_stats
from diagevo.words import plural

# the series every comparison shows after the metrics: (column, title, y label, a 0-1 axis)
MEMORY_SERIES = (
    ("F", "F_t: failures over Active causes", "F_t", False),
    ("epsilon_next", "ε_t+1: share of free exploration (Eq. 1)", "ε_t+1", True),
    ("active", "Active causes", "count", False),
    ("mastered", "Mastered causes", "count", False),
)


COUNTS = ("F", "active", "mastered")


@dataclass
class Compared:
    """The runs of a comparison, in the order given, and their per-round statistics."""

    runs: list[str]
    rounds: dict[str, pl.DataFrame]  # run -> views.stats.frame (every metric column of any run)
    metrics: list[str]  # the metric columns, held-out accuracy first

    def series(self) -> list[tuple[str, str, str, bool]]:
        """(column, title, y label, 0-1 axis) of every overlaid figure, in order."""
        scores = [
            (m, m if m != "heldout_acc" else "held-out accuracy", "value", m == "heldout_acc" or m.startswith("bench/"))
            for m in self.metrics
        ]
        return [*scores, *MEMORY_SERIES]


def load_runs(store: EventStore, runs: Sequence[str]) -> Compared:
    """The per-round statistics of each run (each must exist: the caller resolves them)."""
    stats = {run: round_stats(store, run) for run in runs}
    names: dict[str, None] = {}
    for rows in stats.values():
        names.update(dict.fromkeys(m for m in metric_columns(rows) if not is_family_detail(m)))
    metrics = sorted(names, key=lambda m: (m != "heldout_acc", m.startswith("bench/"), m))
    return Compared(list(runs), {run: frame(rows, metrics) for run, rows in stats.items()}, metrics)


def _last(df: pl.DataFrame, column: str) -> Any:
    """The column's value at the last round that has one."""
    values = df.filter(pl.col(column).is_not_null())[column]
    return values[-1] if values.len() else None


def render_comparison(data: Compared, db_url: str, command: Callable[[str], str]) -> str:
    """The comparison page. ``command(run)`` spells the single-run report command of a run."""
    charts = []
    for column, title, ylabel, unit in data.series():
        if not any(df[column].is_not_null().any() for df in data.rounds.values()):
            continue
        fig = figures.overlay(
            data.rounds, column, title, ylabel, unit=unit, counts=column in COUNTS
        )  # every run: its colour kept
        charts.append(
            _chart(
                f"compare-{column}",
                figures.to_svg(fig),
                (
                    f"{title}, per round, one line per run (each run's points set slightly apart so equal values stay "
                    "visible)"
                ),
            )
        )
    summary_rows = []
    for run in data.runs:
        df = data.rounds[run]
        row: dict[str, Any] = {"run": run, "committed rounds": df.height}
        row.update({c: _last(df, c) for c in ("active", "mastered", "F", "epsilon_next")})
        row.update({m: _last(df, m) for m in data.metrics})
        summary_rows.append(row)
    schema = {
        "run": pl.Utf8,
        "committed rounds": pl.Int64,
        **{c: pl.Int64 for c in ("active", "mastered", "F")},
        "epsilon_next": pl.Float64,
        **{m: pl.Float64 for m in data.metrics},
    }
    summary = table(
        pl.DataFrame(summary_rows, schema=schema, strict=False), {"epsilon_next": "ε_t+1", "F": "F_t"}, left=("run",)
    )
    legend = "".join(
        f'<li><span class="swatch" style="background:{figures.STYLES[i % len(figures.STYLES)][0]}"></span>'
        f"{_e(figures.marker_name(i))} <code>{_e(run)}</code> · <code>{_e(command(run))}</code></li>"
        for i, run in enumerate(data.runs)
    )
    body = (
        f'<section id="runs"><h2>Runs</h2><ul class="runs">{legend}</ul>'
        '<p class="note">the last committed round\'s values (each metric at the last round that recorded '
        f"it)</p>{summary}</section>"
        f'<section id="curves"><h2>Curves</h2><div class="charts">{"".join(charts)}</div></section>'
    )
    ids = ", ".join(data.runs)
    css = CSS + (
        ".swatch { display:inline-block; width:12px; height:12px; margin-right:6px; border:1px solid #555; "
        "}\nul.runs { list-style:none; padding-left:0; }\n"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>diagevo runs {_a(ids)}</title><style>{css}</style></head><body>"
        f"<header><h1>diagevo: {plural(len(data.runs), 'run')} compared</h1>"
        f"<p>{_e(ids)} · log {_e(db_url)} · per round, as <code>diagevo memory stats</code> prints it</p></header>"
        f"<main>{body}</main></body></html>"
    )


__all__ = ["Compared", "load_runs", "render_comparison"]
