"""Runs compared in one offline HTML file (``diagevo report --run A --run B ...``): each run's
per-round statistics (:func:`diagevo.views.stats.round_stats`, what ``memory stats`` prints)
overlaid on shared axes, one colour, marker and line style per run: held-out accuracy, the label
figures where the world knows the truth and every metric recorded by name (per-skill detail
aside: ``memory stats --json`` has it), F_t, ε_{t+1}, Active and Mastered causes.

Run ids and metric names are untrusted: escaped by the template engine in the HTML
(``templates/compare.html``), drawn literally in the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from diagevo.log import Recorder
from diagevo.report import figures
from diagevo.report.page import Chart, Table, chart, table
from diagevo.results.stats import RoundRow
from diagevo.text.words import plural
from diagevo.views.stats import LABEL_FIGURES, filled, is_family_detail, metric_columns, round_stats

# the series every comparison shows after the metrics: (column, title, y label)
MEMORY_SERIES = (
    ("F", "F_t: failures over Active causes", "F_t"),
    ("epsilon_next", "ε_t+1: share of free exploration (Eq. 1)", "ε_t+1"),
    ("active", "Active causes", "count"),
    ("mastered", "Mastered causes", "count"),
)


COUNTS = ("F", "active", "mastered")

# the metrics every comparison shows first (where a run has them), and their figures' titles
FIRST = ("heldout_acc", "pseudo_label_acc", *LABEL_FIGURES)
METRIC_TITLES = {
    "heldout_acc": "held-out accuracy",
    "pseudo_label_acc": "pseudo_label_acc: pseudo-label accuracy on the shared questions (Fig. 3c)",
    "retained_label_acc": "retained_label_acc: retained questions whose pseudo-label is right",
    "wrong_reward_share": "wrong_reward_share: positive rewards on wrong answers",
}


@dataclass
class Compared:
    """The runs of a comparison, in the order given, and their per-round statistics."""

    runs: list[str]
    rounds: dict[str, list[RoundRow]]  # run -> views.stats.filled (every metric column of any run)
    metrics: list[str]  # the metric columns: held-out and pseudo-label accuracy, the label figures first

    def series(self) -> list[tuple[str, str, str]]:
        """(column, title, y label) of every overlaid figure, in order."""
        scores = [(m, METRIC_TITLES.get(m, m), "value") for m in self.metrics]
        return [*scores, *MEMORY_SERIES]


def load_runs(store: Recorder, runs: Sequence[str]) -> Compared:
    """The per-round statistics of each run (each must exist: the caller resolves them)."""
    stats = {run: round_stats(store, run) for run in runs}
    names: dict[str, None] = {}
    for rows in stats.values():
        names.update(dict.fromkeys(m for m in metric_columns(rows) if not is_family_detail(m)))
    order = {m: i for i, m in enumerate(FIRST)}
    metrics = sorted(names, key=lambda m: (order.get(m, len(order)), m.startswith("bench/"), m))
    return Compared(list(runs), {run: filled(rows, metrics) for run, rows in stats.items()}, metrics)


def _last(rows: list[RoundRow], column: str) -> Any:
    """The column's value at the last round that has one."""
    return next((v for r in reversed(rows) if (v := r.value(column)) is not None), None)


@dataclass(frozen=True, slots=True)
class RunLegend:
    """A run of the comparison: its colour and marker in every figure, and its report command."""

    run: str
    color: str
    marker: str
    command: str


@dataclass(frozen=True, slots=True)
class ComparisonPage:
    ids: str  # the runs, comma-separated
    count: str  # "2 runs"
    db_url: str
    runs: list[RunLegend]
    summary: Table  # each run's last values
    charts: list[Chart]


def comparison_page(data: Compared, db_url: str, command: Callable[[str], str]) -> ComparisonPage:
    """The comparison's view data. ``command(run)`` spells the single-run report command of a run."""
    legend = [
        RunLegend(run, figures.STYLES[i % len(figures.STYLES)].color, figures.marker_name(i), command(run))
        for i, run in enumerate(data.runs)
    ]
    return ComparisonPage(
        ", ".join(data.runs), plural(len(data.runs), "run"), db_url, legend, _summary(data), _charts(data)
    )


def _charts(data: Compared) -> list[Chart]:
    charts = []
    for column, title, ylabel in data.series():
        if all(_last(rows, column) is None for rows in data.rounds.values()):
            continue
        # every run, so each keeps its colour
        svg = figures.overlay(data.rounds, column, title, ylabel, counts=column in COUNTS)
        caption = (
            f"{title}, per round, one line per run (each run's points set slightly apart so equal values stay visible)"
        )
        charts.append(chart(f"compare-{column}", svg, caption))
    return charts


def _summary(data: Compared) -> Table:
    """A row per run: its last committed round's values, each metric at the last round that has it."""
    columns = ["run", "committed rounds", "active", "mastered", "F", "epsilon_next", *data.metrics]
    last = [
        {"run": run, "committed rounds": len(rows), **{c: _last(rows, c) for c in columns[2:]}}
        for run, rows in data.rounds.items()
    ]
    return table(columns, last, {"epsilon_next": "ε_t+1", "F": "F_t"}, left=("run",))


__all__ = ["Compared", "ComparisonPage", "comparison_page", "load_runs"]
