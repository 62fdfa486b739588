"""The run's figures with matplotlib (Agg): the paper's Fig. 3 (accuracy, memory lifecycle,
pseudo-label accuracy), Fig. 4 (question length and 2-gram diversity by mode), the schedule
(F_t, ε) and the time per phase (Table 6).

Every series is told apart without colour too: by marker and line style, bars by hatching, and
the legends show both. Figures render to SVG text (for the HTML report, text kept as text) or
to PNG/SVG files (``memory plot -o``). matplotlib is imported inside the functions only.

Names from the log (benchmarks, skill families, timing phases, the run id in a title) are drawn
as text: through :func:`literal`, never parsed as mathtext.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from diagevo.errors import BadInput
from diagevo.untrusted import shorten, visible

# one style per series, distinguishable in grey scale: (colour, marker, line style)
STYLES = [
    ("#1f4e79", "o", "-"),
    ("#c55a11", "s", "--"),
    ("#548235", "^", "-."),
    ("#7030a0", "D", ":"),
    ("#bf8f00", "v", (0, (5, 1, 1, 1))),
    ("#2e75b6", "P", (0, (3, 1, 1, 1, 1, 1))),
    ("#843c0c", "X", (0, (1, 1))),
]
MODE_STYLE = {"free": STYLES[0], "targeted": STYLES[1], "stitched": STYLES[2], "all": ("#404040", "*", ":")}
ACTIVE = {"color": "#c55a11", "hatch": "", "edgecolor": "#3a1a05"}
MASTERED = {"color": "#a9d18e", "hatch": "///", "edgecolor": "#2f4f1f"}
PHASE_HATCHES = ["", "///", "...", "xx", "\\\\\\", "++", "oo", "--"]


LABEL_CHARS = 60


def literal(name: object, limit: int = LABEL_CHARS) -> str:
    """An untrusted name as matplotlib draws it literally: control and bidi characters shown as
    escapes, at most ``limit`` characters, and every ``$`` escaped (two of them would start
    mathtext, and ``$\\frac{$`` does not parse)."""
    return visible(shorten(str(name), limit, middle=True)).replace("$", r"\$")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.fonttype": "none",  # SVG text stays text: small, searchable, crisp
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "legend.frameon": False,
            "hatch.linewidth": 0.8,
        }
    )
    return plt


def _rounds_axis(ax: Any, rounds: Sequence[int]) -> None:
    ax.set_xlabel("round")
    if rounds:
        ax.set_xticks(list(rounds))
        ax.set_xlim(min(rounds) - 0.6, max(rounds) + 0.6)


def _legend_below(fig: Any, handles: Sequence[Any], fontsize: float = 8) -> None:
    """The legend under the plot, outside every axes, so it never covers a bar, a line, a marker
    or a value, whatever the data (constrained layout makes room for it)."""
    if handles:
        fig.legend(
            handles,
            [h.get_label() for h in handles],
            loc="outside lower center",
            ncols=min(len(handles), 3),
            fontsize=fontsize,
        )


def _unit_axis(ax: Any) -> None:
    """A 0-1 axis with room at both ends: a score of 0 (or 1) shows its whole marker, not half of
    one hidden on the axis line."""
    ax.set_ylim(-0.05, 1.05)
    ax.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])


def _line(ax: Any, x: Sequence[Any], y: Sequence[Any], label: str, style: tuple[str, str, Any], **kw: Any) -> None:
    color, marker, ls = style
    ax.plot(x, y, color=color, marker=marker, linestyle=ls, linewidth=1.6, markersize=5, label=label, **kw)


def lifecycle(rounds: pl.DataFrame, title: str = "Memory lifecycle") -> Any:
    """Fig. 3b: Active and Mastered causes per round (stacked bars, the Mastered part hatched)
    and skill nodes (a line with square markers)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    x = rounds["round"].to_list()
    active, mastered = rounds["active"].to_list(), rounds["mastered"].to_list()
    ax.bar(x, active, width=0.62, label="Active causes (solid)", linewidth=0.8, **ACTIVE)
    ax.bar(x, mastered, width=0.62, bottom=active, label="Mastered causes (hatched ///)", linewidth=0.8, **MASTERED)
    _line(ax, x, rounds["nodes"].to_list(), "skill nodes (line, ■ markers)", ("#1f1f1f", "s", "-"))
    for xi, a, m in zip(x, active, mastered, strict=True):
        ax.annotate(f"{a}+{m}", (xi, a + m), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
    ax.set_ylabel("count")
    ax.set_title(literal(title, 120), loc="left", fontsize=10, pad=8)
    _rounds_axis(ax, x)
    _legend_below(fig, ax.get_legend_handles_labels()[0])
    # room above the tallest bar for its "a+m" label, so no label reaches the title
    top = max([a + m for a, m in zip(active, mastered, strict=True)] + rounds["nodes"].to_list() + [1])
    ax.set_ylim(0, top * 1.25 + 1)
    return fig


def accuracy(rounds: pl.DataFrame, benchmarks: pl.DataFrame) -> Any:
    """Fig. 3a: held-out accuracy per round and every benchmark score recorded for the run."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    xs: set[int] = set()
    series = 0
    if "heldout_acc" in rounds.columns:
        held = rounds.filter(pl.col("heldout_acc").is_not_null())
        if held.height:
            _line(ax, held["round"].to_list(), held["heldout_acc"].to_list(), "held-out accuracy", STYLES[0])
            xs.update(held["round"].to_list())
            series += 1
    if benchmarks.height:
        for name in benchmarks["benchmark"].unique(maintain_order=True).to_list():
            b = benchmarks.filter(pl.col("benchmark") == name).sort("round")
            style = STYLES[(series) % len(STYLES)]
            _line(ax, b["round"].to_list(), b["accuracy"].to_list(), f"{literal(name)} (pass@1)", style)
            xs.update(b["round"].to_list())
            if b["mean_at_k"].is_not_null().any():
                k = b["k"].drop_nulls()[0]
                _line(
                    ax, b["round"].to_list(), b["mean_at_k"].to_list(), f"{literal(name)} (mean@{k})", style, alpha=0.55
                )
            series += 1
    ax.set_ylabel("accuracy")
    _unit_axis(ax)
    ax.set_title("Accuracy per round", loc="left", fontsize=10)
    _rounds_axis(ax, sorted(xs))
    _legend_below(fig, ax.get_legend_handles_labels()[0])
    return fig


def metrics(rounds: pl.DataFrame, names: Sequence[str], title: str = "Metrics recorded per round") -> Any:
    """A curve per metric the run recorded by name (a trainer's ``round commit --metric``), on
    one axis scaled to them."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    xs: set[int] = set()
    for j, name in enumerate(names):
        m = rounds.filter(pl.col(name).is_not_null()).sort("round")
        _line(ax, m["round"].to_list(), m[name].to_list(), literal(name), STYLES[j % len(STYLES)])
        xs.update(m["round"].to_list())
    ax.set_ylabel("value")
    ax.set_title(literal(title, 120), loc="left", fontsize=10)
    _rounds_axis(ax, sorted(xs))
    _legend_below(fig, ax.get_legend_handles_labels()[0])
    ax.margins(y=0.12)
    return fig


def steps(frame: pl.DataFrame, fields: Sequence[str]) -> Any:
    """A panel per GRPO signal (TRL's names), a curve per role over its global step."""
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    cols = 4
    nrows = max(1, -(-len(fields) // cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(12.8, 2.6 * nrows), layout="constrained", squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(fields):
            ax.set_visible(False)
            continue
        name = fields[k]
        for j, role in enumerate(("challenger", "solver")):
            part = frame.filter((pl.col("role") == role) & pl.col(name).is_not_null()).sort("global_step")
            if part.height:
                _line(ax, part["global_step"].to_list(), part[name].to_list(), role, STYLES[j])
        ax.set_title(literal(name), loc="left", fontsize=9)
        ax.set_xlabel("global step", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        ax.tick_params(labelsize=7)
    _legend_below(fig, axes.flat[0].get_legend_handles_labels()[0])
    return fig


MARKER_NAMES = {"o": "●", "s": "■", "^": "▲", "D": "◆", "v": "▼", "P": "✚", "X": "✖"}


def marker_name(i: int) -> str:
    """The marker of the ``i``-th series (:data:`STYLES`), as a character for a legend in text."""
    return MARKER_NAMES.get(STYLES[i % len(STYLES)][1], "")


def overlay(
    series: Mapping[str, pl.DataFrame], column: str, title: str, ylabel: str, unit: bool = False, counts: bool = False
) -> Any:
    """One column of several runs' per-round statistics on shared axes: a line per run, its
    colour, marker and line style (:data:`STYLES`) by the run's place in ``series``. Each run's
    points sit a little to the side of the round (its offset named in the legend), so runs with
    equal values stay visible side by side. ``counts``: whole numbers from 0."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    xs: set[int] = set()
    n = len(series)
    for j, (run, df) in enumerate(series.items()):
        s = df.filter(pl.col(column).is_not_null()).sort("round")
        shift = (j - (n - 1) / 2) * min(0.08, 0.5 / max(n, 1))
        rounds = s["round"].to_list()
        _line(ax, [t + shift for t in rounds], s[column].to_list(), f"run {literal(run)}", STYLES[j % len(STYLES)])
        xs.update(rounds)
    ax.set_ylabel(literal(ylabel))
    if unit:
        _unit_axis(ax)
    elif counts:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        top = max(1.0, ax.get_ylim()[1]) * 1.15
        ax.set_ylim(bottom=-0.06 * top, top=top)  # a count of 0 shows its whole marker
    else:
        ax.margins(y=0.12)
    ax.set_title(literal(title, 120), loc="left", fontsize=10)
    _rounds_axis(ax, sorted(xs))
    _legend_below(fig, ax.get_legend_handles_labels()[0])
    return fig


def schedule(rounds: pl.DataFrame) -> Any:
    """F_t (bars, left axis) and ε_{t+1} (dashed line with triangles, right axis) per round."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
    x = rounds["round"].to_list()
    ax.bar(
        x,
        rounds["F"].to_list(),
        width=0.55,
        color="#bdd7ee",
        edgecolor="#1f4e79",
        hatch="..",
        label="F_t (bars, left axis)",
    )
    ax.set_ylabel("F_t: failures over Active causes")
    right = ax.twinx()
    right.grid(False)
    _line(right, x, rounds["epsilon_next"].to_list(), "ε_t+1 (dashed, ▲, right axis)", ("#c00000", "^", "--"))
    _unit_axis(right)
    right.set_ylabel("ε_t+1: share of free exploration")
    right.spines["right"].set_visible(True)
    _rounds_axis(ax, x)
    ax.set_title("Schedule (Eq. 1)", loc="left", fontsize=10)
    _legend_below(fig, ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0])
    ax.margins(y=0.12)
    return fig


def pseudo_labels(rounds: pl.DataFrame) -> Any:
    """Fig. 3c: pseudo-label accuracy per round."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.0), layout="constrained")
    r = rounds.filter(pl.col("pseudo_label_acc").is_not_null())
    _line(ax, r["round"].to_list(), r["pseudo_label_acc"].to_list(), "pseudo-label accuracy", STYLES[2])
    _unit_axis(ax)
    ax.set_ylabel("accuracy of majority-vote labels")
    _rounds_axis(ax, r["round"].to_list())
    ax.set_title("Pseudo-label accuracy", loc="left", fontsize=10)
    _legend_below(fig, ax.get_legend_handles_labels()[0])
    return fig


def question_properties(stats: pl.DataFrame) -> Any:
    """Fig. 4: mean question length in words and pooled 2-gram diversity per round, by mode."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.8, 3.4), layout="constrained")
    modes = [m for m in ("free", "targeted", "stitched", "all") if m in set(stats["mode"].to_list())]
    for mode in modes:
        s = stats.filter(pl.col("mode") == mode).sort("round")
        label = "all modes" if mode == "all" else mode
        _line(left, s["round"].to_list(), s["mean_words"].to_list(), label, MODE_STYLE[mode])
        _line(right, s["round"].to_list(), (s["distinct_2"] * 100).to_list(), label, MODE_STYLE[mode])
    rounds = sorted(set(stats["round"].to_list()))
    for ax, title, ylabel in ((left, "Question length", "words"), (right, "2-gram diversity", "distinct 2-grams (%)")):
        ax.set_title(title, loc="left", fontsize=10)
        ax.set_ylabel(ylabel)
        _rounds_axis(ax, rounds)
    _legend_below(fig, left.get_legend_handles_labels()[0])
    return fig


def timing(seconds: pl.DataFrame, names: Mapping[str, str]) -> Any:
    """Seconds per phase and round as stacked bars, one hatch per phase (Table 6)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
    present = set(seconds["phase"].to_list())
    phases = [p for p in names if p in present] + sorted(present - set(names))  # in the round's order
    rounds = sorted(set(seconds["round"].to_list()))
    bottom = [0.0] * len(rounds)
    for j, phase in enumerate(phases):
        per = dict(seconds.filter(pl.col("phase") == phase).select("round", "seconds").iter_rows())
        values = [float(per.get(t, 0.0)) for t in rounds]
        color = STYLES[j % len(STYLES)][0]
        ax.bar(
            rounds,
            values,
            bottom=bottom,
            width=0.62,
            color=color,
            alpha=0.75,
            edgecolor="#202020",
            hatch=PHASE_HATCHES[j % len(PHASE_HATCHES)],
            linewidth=0.6,
            label=literal(names.get(phase, phase)),
        )
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("seconds")
    _rounds_axis(ax, rounds)
    ax.set_title("Time per phase", loc="left", fontsize=10)
    handles = ax.get_legend_handles_labels()[0]
    fig.legend(handles, [h.get_label() for h in handles], loc="outside right upper", fontsize=7)  # beside the bars
    return fig


def heatmap(values: pl.DataFrame, title: str) -> Any:
    """A metric per (row label, round), values printed in the cells (readable without colour)."""
    plt = _pyplot()
    labels = values["label"].unique(maintain_order=True).to_list()
    names = [literal(x) for x in labels]
    rounds = sorted(set(values["round"].to_list()))
    grid = [[None] * len(rounds) for _ in labels]
    for label, rnd, v in values.select("label", "round", "value").iter_rows():
        grid[labels.index(label)][rounds.index(rnd)] = v
    fig, ax = plt.subplots(
        figsize=(1.6 + 0.62 * len(rounds) + 0.06 * max(len(x) for x in names), 0.9 + 0.26 * len(labels)),
        layout="constrained",
    )
    import numpy as np

    data = np.array([[np.nan if v is None else v for v in row] for row in grid], dtype=float)
    ax.imshow(data, cmap="YlGn", vmin=0.0, vmax=1.0, aspect="auto")
    ax.grid(False)
    ax.set_xticks(range(len(rounds)), [str(t) for t in rounds])
    ax.set_yticks(range(len(labels)), names, fontsize=8)
    ax.set_xlabel("round")
    for i in range(len(labels)):
        for j in range(len(rounds)):
            if not np.isnan(data[i, j]):
                ax.text(
                    j,
                    i,
                    f"{data[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="black" if data[i, j] < 0.75 else "white",
                )
    ax.set_title(literal(title, 120), loc="left", fontsize=10)
    return fig


@contextmanager
def _quiet() -> Iterator[None]:
    """Names from the log drawn without a warning on stderr: a script the font lacks is drawn as
    boxes, a legend too wide for constrained layout is drawn where it falls."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
        warnings.filterwarnings("ignore", message="constrained_layout not applied", category=UserWarning)
        yield


def to_svg(fig: Any) -> str:
    """The figure as an inline ``<svg>`` element (no XML prologue), then closed."""
    buf = io.StringIO()
    with _quiet():
        fig.savefig(buf, format="svg", metadata={"Date": None})
    _pyplot().close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    start, end = text.find("<metadata>"), text.find("</metadata>")
    if start != -1 and end != -1:  # RDF naming matplotlib: links nobody needs offline
        text = text[:start] + text[end + len("</metadata>") :]
    return text


def save(fig: Any, path: Path) -> None:
    """Write ``fig`` as PNG (150 dpi) or SVG, by the file's suffix."""
    suffix = path.suffix.lower()
    if suffix not in (".png", ".svg"):
        raise BadInput(f"{path}: write a .png or .svg file")
    from diagevo.files import replaced

    try:
        with replaced(path, binary=True) as fh, _quiet():
            fig.savefig(fh, format=suffix[1:], dpi=150, metadata={"Date": None} if suffix == ".svg" else None)
    finally:
        _pyplot().close(fig)
