"""The run's figures as SVG text (:mod:`diagevo.report.svg`): the paper's Fig. 3 (accuracy,
memory lifecycle, pseudo-label accuracy and the label figures where the world knows the truth),
Fig. 4 (question length and 2-gram diversity by mode), the schedule (F_t, ε), the time per phase
(Table 6), held-out accuracy by skill family, the GRPO steps, and one statistic of several runs
overlaid.

Every series is told apart without colour too: by marker and line style, bars by hatching, and
the legends show both. A round's statistics are the rows of :mod:`diagevo.views.stats` (a column
per name); names from the log (benchmarks, metrics, skill families, phases, run ids) are drawn
as text by the SVG module, escaped there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from diagevo.report.svg import Axis, Bars, Line, Panel, Style, chart
from diagevo.report.svg import heatmap as heat
from diagevo.results.stats import LifecycleRow, RoundRow

if TYPE_CHECKING:
    from diagevo.report.data import BenchmarkScore, FamilyAccuracy, PhaseTime, QuestionStats

Rows = Sequence[Mapping[str, Any]]  # the GRPO steps' rows (TRL's fields by name)
Rounds = Sequence[RoundRow]

# one style per series, distinguishable in grey scale: colour, marker, dashes
STYLES = [
    Style("#1f4e79", "o"),
    Style("#c55a11", "s", "7 3.5"),
    Style("#548235", "^", "7 3 1.5 3"),
    Style("#7030a0", "D", "1.5 3"),
    Style("#bf8f00", "v", "10 2 2 2"),
    Style("#2e75b6", "P", "6 2 2 2 2 2"),
    Style("#843c0c", "X", "2 2"),
]
MODE_STYLE = {"free": STYLES[0], "targeted": STYLES[1], "stitched": STYLES[2], "all": Style("#404040", "*", "1.5 3")}
ACTIVE = Style("#c55a11", edge="#3a1a05")
MASTERED = Style("#a9d18e", hatch="/", edge="#2f4f1f")
PHASE_COLORS = ("#9dc3e6", "#f4b183", "#a9d18e", "#c9b3e0", "#ffd966", "#8fb4d9", "#d6a38a")
PHASE_HATCHES = ("", "/", ".", "x", "\\", "+", "o", "-")
MARKER_NAMES = {"o": "●", "s": "■", "^": "▲", "D": "◆", "v": "▼", "P": "✚", "X": "✖"}


def marker_name(i: int) -> str:
    """The marker of the ``i``-th series (:data:`STYLES`), as a character for a legend in text."""
    return MARKER_NAMES.get(STYLES[i % len(STYLES)].marker, "")


def _points(rows: Rows, column: str, x: str = "round") -> list[tuple[float, float]]:
    """(x, value) of the rows whose ``column`` holds a finite number (a trainer's step may log a
    NaN, or a text)."""
    return [(r[x], v) for r in rows if isinstance(v := r.get(column), (int, float)) and math.isfinite(v)]


def _by_round(rounds: Rounds, column: str) -> list[tuple[float, float]]:
    """(round, value) of the rounds whose ``column`` holds a finite number."""
    return [(r.round, v) for r in rounds if (v := r.number(column)) is not None and math.isfinite(v)]


def _rounds(rounds: Iterable[float]) -> Axis:
    """A round on each tick, with room for a bar's half at both ends."""
    ticks = sorted(set(rounds))
    return Axis("round", (ticks[0] - 0.6, ticks[-1] + 0.6) if ticks else None, ticks)


def _unit(label: str) -> Axis:
    """A 0-1 axis with room at both ends: a score of 0 (or 1) shows its whole marker."""
    return Axis(label, (-0.05, 1.05), (0.0, 0.2, 0.4, 0.6, 0.8, 1.0))


def _scaled(label: str, values: Sequence[float]) -> Axis:
    """Accuracy's 0-1 axis for values that all lie in [0, 1] (accuracies, rates, ε), where a
    change of under a point does not look steep; else an axis scaled to them."""
    return _unit(label) if all(0 <= v <= 1 for v in values) else Axis(label)


def _one(title: str, marks: Sequence[Line | Bars], y: Axis, height: float = 320, right: Axis | None = None) -> str:
    """A figure of one panel over the rounds its marks have."""
    xs = [x for m in marks for x in (m.x if isinstance(m, Bars) else [p[0] for p in m.points])]
    return chart([Panel(title, marks, _rounds(round(x) for x in xs), y, right)], height=height)


def lifecycle(rounds: Sequence[LifecycleRow], title: str = "Memory lifecycle") -> str:
    """Fig. 3b: Active and Mastered causes per round (stacked bars, the Mastered part hatched,
    ``a+m`` above each) and skill nodes (a line with square markers)."""
    x = [r.round for r in rounds]
    active, mastered = [r.active for r in rounds], [r.mastered for r in rounds]
    marks: list[Line | Bars] = [
        Bars("Active causes (solid)", x, active, ACTIVE),
        Bars(
            "Mastered causes (hatched ///)",
            x,
            mastered,
            MASTERED,
            bottoms=active,
            notes=[f"{a}+{m}" for a, m in zip(active, mastered, strict=True)],
        ),
        Line("skill nodes (line, ■ markers)", [(r.round, r.nodes) for r in rounds], Style("#1f1f1f", "s")),
    ]
    # room above the tallest bar for its "a+m", so no note reaches the title
    top = max([a + m for a, m in zip(active, mastered, strict=True)] + [r.nodes for r in rounds] + [1])
    return _one(title, marks, Axis("count", (0, top * 1.25 + 1)), height=340)


def accuracy(rounds: Rounds, benchmarks: Sequence[BenchmarkScore]) -> str:
    """Fig. 3a: held-out accuracy per round and every benchmark score recorded for the run."""
    held = _by_round(rounds, "heldout_acc")
    marks = [Line("held-out accuracy", held, STYLES[0])] if held else []
    for j, name in enumerate(dict.fromkeys(b.benchmark for b in benchmarks), start=len(marks)):
        scores = sorted((b for b in benchmarks if b.benchmark == name), key=lambda b: b.round)
        style = STYLES[j % len(STYLES)]
        marks.append(Line(f"{name} (pass@1)", [(b.round, b.accuracy) for b in scores if b.accuracy is not None], style))
        at_k = [(b.round, b.mean_at_k) for b in scores if b.mean_at_k is not None]
        if at_k:
            k = next((b.k for b in scores if b.k is not None), "k")
            marks.append(Line(f"{name} (mean@{k})", at_k, style, faint=True))
    return _one("Accuracy per round", marks, _unit("accuracy"))


def metrics(rounds: Rounds, names: Sequence[str], title: str = "Metrics recorded per round") -> str:
    """A curve per metric the run recorded by name (a trainer's ``round commit --metric``), on
    one axis (:func:`_scaled`)."""
    marks = [Line(name, _by_round(rounds, name), STYLES[j % len(STYLES)]) for j, name in enumerate(names)]
    return _one(title, marks, _scaled("value", [v for m in marks for _, v in m.points]))


def steps(rows: Rows, fields: Sequence[str]) -> str:
    """A panel per GRPO signal (TRL's names), a curve per role over its global step."""
    panels = []
    for name in fields:
        marks = [
            Line(role, sorted(_points([r for r in rows if r["role"] == role], name, "global_step")), STYLES[j])
            for j, role in enumerate(("challenger", "solver"))
        ]
        panels.append(Panel(name, [m for m in marks if m.points], Axis("global step", integer=True), Axis()))
    return chart(panels, width=1280, height=250, columns=4)


def overlay(series: Mapping[str, Rounds], column: str, title: str, ylabel: str, counts: bool = False) -> str:
    """One column of several runs' per-round statistics on shared axes: a line per run, its
    colour, marker and line style (:data:`STYLES`) by the run's place in ``series``. Each run's
    points sit a little to the side of the round, so runs with equal values stay visible side by
    side. ``counts``: whole numbers from 0; else the axis is :func:`_scaled`."""
    n = len(series)
    marks = []
    for j, (run, rows) in enumerate(series.items()):
        shift = (j - (n - 1) / 2) * min(0.08, 0.5 / max(n, 1))
        points = [(t + shift, v) for t, v in _by_round(rows, column)]
        marks.append(Line(f"run {run}", points, STYLES[j % len(STYLES)]))
    values = [v for m in marks for _, v in m.points]
    if counts:  # a count of 0 shows its whole marker
        top = max([1.0, *values]) * 1.2
        return _one(title, marks, Axis(ylabel, (-0.06 * top, top), integer=True))
    return _one(title, marks, _scaled(ylabel, values))


def schedule(rounds: Rounds) -> str:
    """F_t (bars, left axis) and ε_{t+1} (dashed line with triangles, right axis) per round."""
    f_t = Style("#bdd7ee", hatch=".", edge="#1f4e79")
    marks: list[Line | Bars] = [
        Bars("F_t (bars, left axis)", [r.round for r in rounds], [r.F for r in rounds], f_t, width=0.55),
        Line(
            "ε_t+1 (dashed, ▲, right axis)",
            _by_round(rounds, "epsilon_next"),
            Style("#c00000", "^", "7 3.5"),
            right=True,
        ),
    ]
    right = _unit("ε_t+1: share of free exploration")
    return _one("Schedule (Eq. 1)", marks, Axis("F_t: failures over Active causes"), right=right)


# the label figures where the world knows the truth (diagevo.train.labels): (column, legend, style)
LABEL_LINES = (
    ("retained_label_acc", "retained questions whose pseudo-label is right", STYLES[0]),
    ("wrong_reward_share", "positive rewards on wrong answers", STYLES[1]),
)


def pseudo_labels(rounds: Rounds) -> str:
    """Fig. 3c: pseudo-label accuracy per round, and the label figures of the questions the solver
    trained on where the run has them (the share of retained questions whose pseudo-label is
    right, the share of positive rewards given to wrong answers)."""
    labels = _by_round(rounds, "pseudo_label_acc")
    marks = [Line("pseudo-label accuracy on the shared questions", labels, STYLES[2])] if labels else []
    known = [Line(name, points, style) for column, name, style in LABEL_LINES if (points := _by_round(rounds, column))]
    marks += known
    return _one("Pseudo-label accuracy", marks, _unit("share" if known else "majority-vote label accuracy"), height=300)


def question_properties(stats: Sequence[QuestionStats]) -> str:
    """Fig. 4: mean question length in words and pooled 2-gram diversity per round, by mode."""
    modes = [m for m in MODE_STYLE if any(s.mode == m for s in stats)]
    x = _rounds(s.round for s in stats)

    def by_mode(value: str, scale: float) -> list[Line]:
        return [
            Line(
                "all modes" if m == "all" else m,
                [(s.round, getattr(s, value) * scale) for s in stats if s.mode == m],
                MODE_STYLE[m],
            )
            for m in modes
        ]

    panels = [
        Panel("Question length", by_mode("mean_words", 1), x, Axis("words")),
        Panel("2-gram diversity", by_mode("distinct_2", 100), x, Axis("distinct 2-grams (%)")),
    ]
    return chart(panels, width=1280, height=320, columns=2)


def timing(seconds: Sequence[PhaseTime], names: Mapping[str, str]) -> str:
    """Seconds per phase and round as stacked bars, one colour and hatching per phase (Table 6)."""
    present = {s.phase for s in seconds}
    phases = [p for p in names if p in present] + sorted(present - set(names))  # in the round's order
    rounds = sorted({s.round for s in seconds})
    bottom = [0.0] * len(rounds)
    marks = []
    for j, phase in enumerate(phases):
        per = {s.round: s.seconds for s in seconds if s.phase == phase}
        values = [per.get(t, 0.0) for t in rounds]
        style = Style(PHASE_COLORS[j % len(PHASE_COLORS)], hatch=PHASE_HATCHES[j % len(PHASE_HATCHES)])
        marks.append(Bars(names.get(phase, phase), rounds, values, style, bottoms=bottom))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    return _one("Time per phase", marks, Axis("seconds"))


def heatmap(values: Sequence[FamilyAccuracy], title: str) -> str:
    """A family's held-out accuracy per round, the value printed in each cell."""
    families = list(dict.fromkeys(v.family for v in values))
    rounds = sorted({v.round for v in values})
    cell = {(v.family, v.round): v.accuracy for v in values}
    grid = [[cell.get((f, t)) for t in rounds] for f in families]
    return heat(families, [str(t) for t in rounds], grid, title, "round")
