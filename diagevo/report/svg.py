"""Charts as SVG text, drawn by diagevo itself so the report needs no plotting package: panels of
lines (markers, dashes) and bars (stacked, hatched, a note above each), an optional second y axis
on the right, one legend under all panels; and the heat map.

Every text a chart shows (a title, a legend entry, a tick or axis label) goes through
:func:`_text` alone: shortened, its control and bidi characters shown as escapes
(:func:`diagevo.text.untrusted.visible`) and XML-escaped, so a name from a log is character data and
never markup. Attributes hold numbers and this module's own constants only.

No font is read: a text's width is estimated (:data:`EM`) and the layout leaves room for it. The
legend sits under the panels, outside every plot area, so it never covers a mark; limits taken
from the data leave a margin, so every marker lies whole inside its plot.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from diagevo.text.untrusted import shorten, visible

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
EM = 0.6  # a character's width in font sizes: an estimate that errs wide
LABEL_CHARS = 60  # a name in a legend or on a tick; a longer one loses its middle
INK, GRID = "#222222", "#e6e6e6"
TITLE, LABEL, TICK, NOTE = 14, 12, 11.5, 10.5  # font sizes: a panel is 640 wide, about 6.4 inches
MARK = 3.6  # a marker's radius
_NOT_XML = {0xFFFE: "\\ufffe", 0xFFFF: "\\uffff"}  # characters XML cannot hold that visible() keeps


@dataclass(frozen=True, slots=True)
class Style:
    """How a series looks, told apart without colour too: a marker (a key of :data:`MARKERS`, or
    ``o``), dashes (SVG's ``stroke-dasharray``), a bar's hatching (a key of :data:`HATCHES`)."""

    color: str
    marker: str = ""
    dash: str = ""
    hatch: str = ""
    edge: str = "#202020"


@dataclass(frozen=True, slots=True)
class Line:
    label: str
    points: Sequence[tuple[float, float]]
    style: Style
    faint: bool = False
    right: bool = False  # against the panel's right axis


@dataclass(frozen=True, slots=True)
class Bars:
    label: str
    x: Sequence[float]
    heights: Sequence[float]
    style: Style
    bottoms: Sequence[float] = ()  # each bar stacked on this (default 0)
    notes: Sequence[str] = ()  # a text above each bar
    width: float = 0.62

    def spans(self) -> list[tuple[float, float, float]]:
        """(x, bottom, top) of each bar."""
        bottoms = self.bottoms or [0.0] * len(self.heights)
        return [(x, b, b + h) for x, b, h in zip(self.x, bottoms, self.heights, strict=True)]


@dataclass(frozen=True, slots=True)
class Axis:
    label: str = ""
    limits: tuple[float, float] | None = None  # None: the data's, with a margin
    ticks: Sequence[float] | None = None  # None: about six round numbers
    integer: bool = False  # whole-number ticks


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    marks: Sequence[Line | Bars]
    x: Axis
    y: Axis
    right: Axis | None = None


_HALF_PLUS = ((-0.35, -1.0), (0.35, -1.0), (0.35, -0.35), (1.0, -0.35), (1.0, 0.35), (0.35, 0.35))
_PLUS = _HALF_PLUS + tuple((-x, -y) for x, y in _HALF_PLUS)  # symmetric under a half turn
# unit polygons of the markers, by matplotlib's names ("o" is a circle)
MARKERS = {
    "s": ((-0.85, -0.85), (0.85, -0.85), (0.85, 0.85), (-0.85, 0.85)),
    "^": ((0.0, -1.15), (1.0, 0.75), (-1.0, 0.75)),
    "v": ((0.0, 1.15), (1.0, -0.75), (-1.0, -0.75)),
    "D": ((0.0, -1.25), (0.9, 0.0), (0.0, 1.25), (-0.9, 0.0)),
    "P": _PLUS,
    "X": tuple(((x - y) * 0.8, (x + y) * 0.8) for x, y in _PLUS),  # the plus turned by 45°
    "*": tuple((r * math.sin(i * math.pi / 5), -r * math.cos(i * math.pi / 5)) for i, r in enumerate((1.35, 0.55) * 5)),
}
# an 8x8 tile of each hatching, by matplotlib's names
HATCHES = {
    "/": "M0,8L8,0M-2,2L2,-2M6,10L10,6",
    "\\": "M0,0L8,8M-2,6L2,10M6,-2L10,2",
    "x": "M0,8L8,0M0,0L8,8",
    "+": "M4,0V8M0,4H8",
    "-": "M0,4H8",
    ".": "M1.5,2h1M5.5,6h1",
    "o": "M6,4A2,2 0 1,1 2,4A2,2 0 1,1 6,4",
}


def shown(name: object, limit: int = LABEL_CHARS) -> str:
    """A name as a chart shows it: at most about ``limit`` characters, control and bidi
    characters as escapes."""
    return visible(shorten(str(name), limit, middle=True))


def _width(name: object, size: float, limit: int = LABEL_CHARS) -> float:
    return len(shown(name, limit)) * size * EM


def _text(
    x: float,
    y: float,
    name: object,
    size: float = LABEL,
    anchor: str = "start",
    fill: str = INK,
    limit: int = LABEL_CHARS,
    turned: bool = False,
) -> str:
    """A text of a chart (see the module docstring); ``turned``: read bottom to top."""
    body = escape(shown(name, limit), quote=False).translate(_NOT_XML)
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if turned else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}" fill="{fill}"{turn}>{body}</text>'
    )


def _marker(x: float, y: float, style: Style, r: float = MARK) -> str:
    paint = f'fill="{style.color}" stroke="{style.color}" stroke-width="0.6"'
    if style.marker not in MARKERS:
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:g}" {paint}/>'
    points = " ".join(f"{x + dx * r:.1f},{y + dy * r:.1f}" for dx, dy in MARKERS[style.marker])
    return f'<polygon points="{points}" {paint}/>'


def _path(points: Sequence[tuple[float, float]], style: Style) -> str:
    d = "M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dash = f' stroke-dasharray="{style.dash}"' if style.dash else ""
    return f'<path d="{d}" fill="none" stroke="{style.color}" stroke-width="2"{dash} stroke-linejoin="round"/>'


class _Patterns:
    """The hatchings a chart uses, each defined once, its id ``<#>N`` until :func:`_svg` names it."""

    def __init__(self) -> None:
        self.ids: dict[Style, str] = {}

    def fill(self, style: Style) -> str:
        if not style.hatch:
            return style.color
        return f"url(#{self.ids.setdefault(style, f'<#>{len(self.ids)}')})"

    def defs(self) -> str:
        tiles = "".join(
            f'<pattern id="{pid}" width="8" height="8" patternUnits="userSpaceOnUse">'
            f'<rect width="8" height="8" fill="{s.color}"/>'
            f'<path d="{HATCHES[s.hatch]}" stroke="{s.edge}" stroke-width="0.8" fill="none"/></pattern>'
            for s, pid in self.ids.items()
        )
        return f"<defs>{tiles}</defs>" if tiles else ""


def _svg(width: float, height: float, patterns: _Patterns, body: list[str]) -> str:
    """The chart's ``<svg>`` element. A hatching's id is named after the chart's content (the
    figures of one page share an id only where they are the same figure); its ``<#>`` cannot be
    in an escaped text, which holds no ``<``."""
    content = patterns.defs() + "".join(body)
    name = "h" + hashlib.sha1(content.encode()).hexdigest()[:10]
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}">'
        f'<rect width="100%" height="100%" fill="#ffffff"/>{content.replace("<#>", name + "-")}</svg>'
    )


def ticks(lo: float, hi: float, integer: bool = False) -> list[float]:
    """About six round numbers from ``lo`` to ``hi`` (whole ones with ``integer``)."""
    raw = (hi - lo) / 7 or 1.0
    scale = 10 ** math.floor(math.log10(raw))
    step = next(m * scale for m in ((1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)) if m * scale >= raw * 0.999)
    if integer:
        step = max(1.0, round(step))
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    return [round(i * step, 12) + 0.0 for i in range(first, last + 1)]  # + 0.0: no "-0"


def tick_labels(values: Sequence[float]) -> list[str]:
    """The ticks' numbers, each with the decimals the axis needs to tell its ticks apart."""
    for decimals in range(7):
        if all(abs(t * 10**decimals - round(t * 10**decimals)) < 1e-6 for t in values):
            return [f"{v:.{decimals}f}" for v in values]
    return [f"{v:.3g}" for v in values]


def _limits(axis: Axis, values: Sequence[float], from_zero: bool = False) -> tuple[float, float]:
    """The axis's limits: given, or the data's with 12% of their span as a margin at each end
    (from 0 for bars)."""
    if axis.limits is not None:
        return axis.limits
    lo, hi = min(values, default=0.0), max(values, default=1.0)
    if from_zero:
        lo = min(lo, 0.0)
    pad = (hi - lo) * 0.12 or abs(hi) * 0.1 or 0.5
    return (lo if from_zero and lo == 0 else lo - pad), hi + pad


@dataclass(frozen=True, slots=True)
class _Ticked:
    """An axis's limits, ticks and tick labels."""

    lo: float
    hi: float
    ticks: list[float]
    labels: list[str]

    @classmethod
    def of(cls, axis: Axis, values: Sequence[float], from_zero: bool = False) -> _Ticked:
        lo, hi = _limits(axis, values, from_zero)
        at = list(axis.ticks) if axis.ticks is not None else ticks(lo, hi, axis.integer)
        return cls(lo, hi, at, tick_labels(at))

    def room(self) -> float:
        return max((_width(s, TICK) for s in self.labels), default=0.0)

    def scale(self, start: float, end: float) -> Callable[[float], float]:
        """A value's place in the drawing, the axis running from ``start`` (lo) to ``end`` (hi)."""
        per = (end - start) / ((self.hi - self.lo) or 1.0)
        return lambda v: start + (v - self.lo) * per


def _panel(p: Panel, left: float, top: float, w: float, h: float, patterns: _Patterns) -> str:
    """A panel in the box (left, top, w, h): its title, plot area, grid, marks, axes."""
    lines = [m for m in p.marks if isinstance(m, Line)]
    bars = [m for m in p.marks if isinstance(m, Bars)]
    spans = [span for b in bars for span in b.spans()]
    ys = [y for m in lines if not m.right for _, y in m.points] + [v for _, lo, hi in spans for v in (lo, hi)]
    x = _Ticked.of(p.x, [x for m in lines for x, _ in m.points] + [x for x, _, _ in spans])
    y = _Ticked.of(p.y, ys, from_zero=bool(bars))
    r = _Ticked.of(p.right, [y for m in lines if m.right for _, y in m.points]) if p.right else None
    inset = (LABEL + 12 if p.y.label else 6) + y.room() + 10
    outset = 16.0 if r is None else r.room() + (LABEL + 20 if p.right and p.right.label else 16)
    ax, ay = left + inset, top + TITLE + 20
    aw, ah = w - inset - outset, h - (TITLE + 20) - TICK - (LABEL + 22 if p.x.label else 14)
    sx, sy = x.scale(ax, ax + aw), y.scale(ay + ah, ay)
    sr = r.scale(ay + ah, ay) if r is not None else sy
    out = [
        f'<g class="axes"><rect class="area" x="{ax:.1f}" y="{ay:.1f}" width="{aw:.1f}" height="{ah:.1f}" fill="none"/>'
    ]
    out += [f'<path d="M{sx(t):.1f},{ay:.1f}V{ay + ah:.1f}" stroke="{GRID}"/>' for t in x.ticks]
    out += [f'<path d="M{ax:.1f},{sy(t):.1f}H{ax + aw:.1f}" stroke="{GRID}"/>' for t in y.ticks]
    out += [_bars(b, sx, sy, patterns) for b in bars]
    out += [_line(m, sx, sr if m.right else sy) for m in lines]
    spines = f"M{ax:.1f},{ay:.1f}V{ay + ah:.1f}H{ax + aw:.1f}" + (f"V{ay:.1f}" if r is not None else "")
    out.append(f'<path d="{spines}" fill="none" stroke="{INK}" stroke-width="0.9"/>')
    below, beside = ay + ah + TICK + 6, TICK * 0.35  # a tick label's baseline under the axis, beside a tick
    for t, s in zip(x.ticks, x.labels, strict=True):
        out.append(f'<path d="M{sx(t):.1f},{ay + ah:.1f}v4" stroke="{INK}"/>{_text(sx(t), below, s, TICK, "middle")}')
    for t, s in zip(y.ticks, y.labels, strict=True):
        out.append(
            f'<path d="M{ax:.1f},{sy(t):.1f}h-4" stroke="{INK}"/>{_text(ax - 7, sy(t) + beside, s, TICK, "end")}'
        )
    for t, s in zip(r.ticks, r.labels, strict=True) if r is not None else ():
        out.append(
            f'<path d="M{ax + aw:.1f},{sr(t):.1f}h4" stroke="{INK}"/>{_text(ax + aw + 7, sr(t) + beside, s, TICK)}'
        )
    if p.right is not None and p.right.label:
        out.append(_text(left + w - 8, ay + ah / 2, p.right.label, LABEL, "middle", turned=True))
    if p.y.label:
        out.append(_text(left + LABEL + 4, ay + ah / 2, p.y.label, LABEL, "middle", turned=True))
    if p.x.label:
        out.append(_text(ax + aw / 2, below + LABEL + 6, p.x.label, LABEL, "middle"))
    out.append(_text(ax, top + TITLE + 6, p.title, TITLE, limit=120) + "</g>")
    return "".join(out)


def _bars(b: Bars, sx: Callable[[float], float], sy: Callable[[float], float], patterns: _Patterns) -> str:
    """The bars, then the note above each."""
    half = (sx(b.width) - sx(0)) / 2
    out = [f'<g class="series" fill="{patterns.fill(b.style)}" stroke="{b.style.edge}" stroke-width="0.8">']
    for x, lo, hi in b.spans():
        out.append(
            f'<rect x="{sx(x) - half:.1f}" y="{sy(hi):.1f}" width="{2 * half:.1f}" height="{sy(lo) - sy(hi):.1f}"/>'
        )
    out.append("</g>")
    out += [_text(sx(x), sy(hi) - 5, note, NOTE, "middle") for (x, _, hi), note in zip(b.spans(), b.notes)]
    return "".join(out)


def _line(m: Line, sx: Callable[[float], float], sy: Callable[[float], float]) -> str:
    points = [(sx(x), sy(y)) for x, y in m.points]
    faint = ' opacity="0.55"' if m.faint else ""
    markers = "".join(_marker(x, y, m.style) for x, y in points)
    return f'<g class="series"{faint}>{_path(points, m.style) if len(points) > 1 else ""}{markers}</g>'


def _legend(marks: Sequence[Line | Bars], width: float, top: float, patterns: _Patterns) -> tuple[str, float]:
    """Each series once (by label), in columns centred under the panels; the legend's height."""
    entries = list({m.label: m for m in marks}.values())
    if not entries:
        return "", 0.0
    column, row = 48 + max(_width(m.label, LABEL) for m in entries), LABEL + 10
    ncols = max(1, min(3, len(entries), int((width - 16) // column)))
    start = (width - ncols * column) / 2
    out = ['<g class="legend">']
    for i, m in enumerate(entries):
        x, y = start + (i % ncols) * column, top + 4 + (i // ncols) * row + row / 2  # y: the entry's middle
        if isinstance(m, Bars):
            paint = f'fill="{patterns.fill(m.style)}" stroke="{m.style.edge}" stroke-width="0.8"'
            out.append(f'<rect x="{x:.1f}" y="{y - 6:.1f}" width="26" height="12" {paint}/>')
        else:
            faint = ' opacity="0.55"' if m.faint else ""
            out.append(f"<g{faint}>{_path([(x, y), (x + 26, y)], m.style)}{_marker(x + 13, y, m.style)}</g>")
        out.append(_text(x + 34, y + LABEL * 0.35, m.label, LABEL))
    out.append("</g>")
    return "".join(out), -(-len(entries) // ncols) * row + 14


def chart(panels: Sequence[Panel], width: float = 640, height: float = 320, columns: int = 1) -> str:
    """The panels in ``columns`` columns (each row ``height`` high), their legend under them."""
    patterns = _Patterns()
    w = width / columns
    body = [_panel(p, (i % columns) * w, (i // columns) * height, w, height, patterns) for i, p in enumerate(panels)]
    top = -(-len(panels) // columns) * height
    legend, more = _legend([m for p in panels for m in p.marks], width, top, patterns)
    return _svg(width, top + more, patterns, [*body, legend])


# matplotlib's YlGn colour map in nine steps from 0 to 1; a value is written in white from the 7th
YLGN = ("#ffffe5", "#f7fcb9", "#d9f0a3", "#addd8e", "#78c679", "#41ab5d", "#238443", "#006837", "#004529")


def heatmap(
    rows: Sequence[str], columns: Sequence[str], cells: Sequence[Sequence[float | None]], title: str, xlabel: str
) -> str:
    """Values from 0 to 1 as coloured cells (YlGn), each printed in its cell so it reads without
    colour; rows named on the left, columns under the cells; no value: an empty cell."""
    cw, ch = 48.0, TICK + 12
    left = 16 + max((_width(r, TICK) for r in rows), default=0)
    top, bottom = TITLE + 22, TITLE + 22 + ch * len(rows)
    out = [_text(left, TITLE + 6, title, TITLE, limit=120)]
    for i, (name, values) in enumerate(zip(rows, cells, strict=True)):
        y = top + i * ch + ch / 2 + TICK * 0.35
        out.append(_text(left - 7, y, name, TICK, "end"))
        for j, v in enumerate(values):
            if v is not None:
                x, step = left + j * cw, round(min(max(v, 0.0), 1.0) * 8)
                out.append(
                    f'<rect x="{x:.1f}" y="{top + i * ch:.1f}" width="{cw:g}" height="{ch:g}" fill="{YLGN[step]}"/>'
                )
                out.append(_text(x + cw / 2, y, f"{v:.2f}", NOTE, "middle", "#ffffff" if step >= 6 else "#000000"))
    out += [_text(left + (j + 0.5) * cw, bottom + TICK + 6, name, TICK, "middle") for j, name in enumerate(columns)]
    out.append(_text(left + cw * len(columns) / 2, bottom + TICK + LABEL + 12, xlabel, LABEL, "middle"))
    width = max(left + cw * len(columns), left + _width(title, TITLE, 120)) + 16
    return _svg(width, bottom + TICK + LABEL + 22, _Patterns(), out)
