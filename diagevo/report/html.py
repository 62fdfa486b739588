"""The run report as one self-contained HTML file: inline CSS, inline SVG charts, a few lines of
inline JavaScript (the round picker of the skill-node tree, the cause filter); nothing is
fetched, so it opens offline from a file.

Every text from the log is escaped, its control characters and bidi overrides are shown as
escapes as the terminal shows them (:func:`diagevo.untrusted.visible`: ESC as ``\\x1b``, RLO
as ``\\u202e``), and a text with any character beyond ASCII is set in its own ``<bdi>``
(bidirectional isolation): right-to-left words in a label, a description or an id reorder
nothing outside it. Attributes and the page title, where no element can go, get the escapes.
The configuration is shown without credentials (:func:`diagevo.redaction.redact_config`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from html import escape
from typing import Any

import polars as pl

from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.redaction import redact_config
from diagevo.report import figures
from diagevo.report.data import PHASES, RunData
from diagevo.untrusted import visible
from diagevo.views.queries import STEP_FIELDS
from diagevo.views.runs import OLDER_LOG, OUR_TRAINER
from diagevo.words import plural

EXCERPT = 600  # characters of a trajectory shown in a story

CSS = """
:root { --fg:#1d2329; --muted:#5f6b76; --line:#d8dee4; --bg:#fff; --soft:#f5f7f9; --active:#f4b183; --mastered:#c5e0b4; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); margin: 0; }
header { padding: 20px 32px 12px; border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header h1 code { font-size: 0.9em; }
header p { margin: 0; color: var(--muted); }
header p.note { overflow-wrap: anywhere; }
nav { position: sticky; top: 0; background: #fffffff0; border-bottom: 1px solid var(--line); padding: 6px 32px; z-index: 2; }
nav a { margin-right: 14px; color: #1f4e79; text-decoration: none; font-size: 13px; }
main { padding: 8px 32px 48px; }
section { margin-top: 28px; }
h2 { font-size: 17px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 14px; margin-bottom: 6px; }
.note { color: var(--muted); font-size: 13px; margin: 4px 0 10px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; }
.card { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.card b { display: block; font-size: 20px; }
.card span { color: var(--muted); font-size: 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 16px; margin-bottom: 12px; }
.charts .wide { grid-column: 1 / -1; }
figure.chart { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 8px; background: #fff; }
figure.chart svg { width: 100%; height: auto; display: block; }
figure.chart figcaption { color: var(--muted); font-size: 12px; margin-top: 4px; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: var(--soft); vertical-align: bottom; }
td.l, th.l { text-align: left; }
.scroll { overflow-x: auto; max-width: 100%; }
td.cell { text-align: center; min-width: 42px; font-variant-numeric: tabular-nums; }
td.A { background: var(--active); }
td.M { background: repeating-linear-gradient(135deg, var(--mastered) 0 5px, #e2efd9 5px 9px); }
.mark { font-size: 11px; }
details.story { margin: 0; }
details.story summary { cursor: pointer; color: #1f4e79; }
details.story ol { margin: 6px 0 8px; padding-left: 20px; }
details.story li { margin-bottom: 6px; }
blockquote { margin: 4px 0; padding: 4px 8px; background: var(--soft); border-left: 3px solid var(--line); white-space: pre-wrap; font-size: 12.5px; }
pre { background: var(--soft); border: 1px solid var(--line); padding: 10px; overflow-x: auto; font-size: 12.5px; }
code { font-size: 12.5px; }
ul.tree { list-style: none; padding-left: 0; }
ul.tree > li { margin: 8px 0; }
ul.tree ul { list-style: none; padding-left: 18px; margin: 2px 0; }
.state-A { background: var(--active); padding: 0 4px; border-radius: 3px; }
.state-M { background: var(--mastered); padding: 0 4px; border-radius: 3px; }
input[type=search], select { font: inherit; padding: 3px 6px; }
bdi { unicode-bidi: isolate; }
"""  # noqa: E501

SCRIPT = """
(function () {
  const pick = document.getElementById('tree-round');
  if (pick) {
    const show = () => { for (const t of document.querySelectorAll('div.tree')) t.hidden = t.dataset.round !== pick.value; };
    pick.addEventListener('change', show);
    show();
  }
  const filter = document.getElementById('cause-filter');
  if (filter) {
    filter.addEventListener('input', () => {
      const q = filter.value.toLowerCase();
      for (const row of document.querySelectorAll('#causes tbody tr')) row.hidden = q !== '' && !row.textContent.toLowerCase().includes(q);
    });
  }
})();
"""  # noqa: E501

MARKS = {"created": "★", "promoted": "▲", "reactivated": "↻", "node_merged": "⇄"}


Command = Callable[..., str]
"""``command("memory", "why", cause_id)``: a diagevo command for this database and run, as the
user would type it (each argument one word, quoted where it must be)."""


def _e(value: Any) -> str:
    """Text of an element: escaped, and isolated in a ``<bdi>`` when it is not plain ASCII."""
    text = escape(visible("" if value is None else str(value), newlines=True))
    return text if text.isascii() else f"<bdi>{text}</bdi>"


def _a(value: Any) -> str:
    """Text of an attribute (or the title): escaped, control and bidi characters shown as escapes."""
    return escape(visible("" if value is None else str(value)))


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(df: pl.DataFrame, headers: Mapping[str, str] | None = None, left: Iterable[str] = (), digits: int = 3) -> str:
    """A polars frame as an HTML table; ``headers`` renames columns, ``left`` aligns them left."""
    headers = headers or {}
    left = set(left)
    # a header wraps at its spaces ("failed_diagnoses" would not), so wide tables fit the page
    head = "".join(
        f'<th class="{"l" if c in left else ""}" title="{_a(c)}">{_e(headers.get(c, c.replace("_", " ")))}</th>'
        for c in df.columns
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"l" if c in left else ""}">{_e(_fmt(v, digits))}</td>'
            for c, v in zip(df.columns, row, strict=True)
        )
        + "</tr>"
        for row in df.iter_rows()
    )
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _chart(name: str, svg: str, caption: str, wide: bool = False) -> str:
    cls = "chart wide" if wide else "chart"
    return f'<figure class="{cls}" data-chart="{_a(name)}">{svg}<figcaption>{_e(caption)}</figcaption></figure>'


def _excerpt(text: str | None) -> str:
    text = (text or "").strip()
    return text if len(text) <= EXCERPT else text[:EXCERPT].rstrip() + " …"


def _failure(f: Mapping[str, Any] | None, full: bool) -> str:
    """A failure in a story: its question (id, mode, text), and with ``full`` the diagnosis and
    the trajectories."""
    if not f:
        return ""
    q = f.get("question") or {}
    where = f"failure <code>{_e(f.get('failure_id'))}</code>"
    if q:
        where += f" on question <code>{_e(q.get('question_id'))}</code> ({_e(q.get('mode'))})"
    if not full:
        return where
    parts = [where]
    if q.get("text"):
        parts.append(f"<blockquote>{_e(q['text'])}</blockquote>")
    d = f.get("diagnosis") or {}
    if d.get("error_cause"):
        parts.append(f"diagnosis ({_e(d.get('model') or '?')}): <i>{_e(d['error_cause'])}</i>")
    elif d.get("matched_cause"):
        parts.append(f"diagnosis ({_e(d.get('model') or '?')}): matches <code>{_e(d['matched_cause'])}</code>")
    if f.get("response"):
        parts.append(f"failing trajectory:<blockquote>{_e(_excerpt(f['response']))}</blockquote>")
    if f.get("reference"):
        parts.append(
            f"reference agreeing with the pseudo-label:<blockquote>{_e(_excerpt(f['reference']))}</blockquote>"
        )
    return "<br>".join(parts)


def _similarity(entry: Mapping[str, Any]) -> str:
    s = entry.get("similarity")
    return f", similarity {s:.3f}" if isinstance(s, (int, float)) else ""


def story_html(story: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    """A cause's timeline (the ``memory why`` story) as an ordered list."""
    items = []
    for entry in story["timeline"]:
        kind, rnd = entry["kind"], f"round {entry['round']}"
        if kind == "created":
            node = entry["node"]
            text = (
                f"<b>{rnd}: created</b> under <code>{_e(node)}</code> {_e(labels.get(node, ''))}, from "
                f"{_failure(entry.get('failure'), True)}"
            )
        elif kind == "attributed":
            text = (
                f"{rnd}: {_failure(entry.get('failure'), False)} attributed via {_e(entry['via'])}{_similarity(entry)}"
            )
        elif kind == "promoted":
            text = (
                f"<b>{rnd}: promoted to Mastered</b>: mean p1 {entry['acc']:.3f} over {entry['n_candidates']} "
                "targeted candidates"
            )
        elif kind == "reactivated":
            text = (
                f"<b>{rnd}: reactivated</b> via {_e(entry.get('via') or '?')}{_similarity(entry)} by "
                f"{_failure(entry.get('failure'), True)}"
            )
        else:
            text = (
                f"<b>{rnd}: node merged</b>: <code>{_e(entry['absorbed'])}</code> into "
                f"<code>{_e(entry['survivor'])}</code> "
                f"as “{_e(entry['label'])}”{_similarity(entry)}"
            )
        items.append(f"<li>{text}</li>")
    return f"<ol>{''.join(items)}</ol>"


def causes_html(data: RunData, command: Command) -> str:
    """One row per cause: its node, its state and frequency at each committed round, the
    round's events as marks, and its story behind a click."""
    rounds = data.committed
    last = data.memories[rounds[-1]] if rounds else None
    labels = {n.id: n.label for m in data.memories.values() for n in m.nodes.values()}
    marks: dict[str, dict[int, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for cid, story in data.stories.items():
        for entry in story["timeline"]:
            marks[cid][entry["round"]][entry["kind"]] += 1
    head = "".join(f"<th>{t}</th>" for t in rounds)
    rows = []
    for cid, story in data.stories.items():
        cells = []
        for t in rounds:
            cause = data.memories[t].causes.get(cid)
            m = marks[cid].get(t, Counter())
            sym = "".join(MARKS[k] * min(n, 2) for k, n in m.items() if k in MARKS)
            title = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in m.items())
            if cause is None:
                cells.append(f'<td class="cell" title="{_a(title)}">·<span class="mark">{sym}</span></td>')
            else:
                st = "A" if cause.active else "M"
                cells.append(
                    f'<td class="cell {st}" title="{_a(title)}">{st}&nbsp;{cause.frequency}<span '
                    f'class="mark">{sym}</span></td>'
                )
        node = last.causes[cid].node if last is not None and cid in last.causes else story["node"]
        details = (
            f'<details class="story"><summary>{_e(story["description"])}</summary>{story_html(story, labels)}'
            f'<div class="note">audit: <code>{_e(command("memory", "why", cid))}</code></div></details>'
        )
        rows.append(
            f'<tr id="cause-{_a(cid)}"><td class="l"><code>{_e(cid)}</code></td><td class="l">{_e(node)} '
            f"{_e(labels.get(node, ''))}</td>"
            f'{"".join(cells)}<td class="l">{details}</td></tr>'
        )
    legend = (
        "cell: state at the round's commit — <b>A</b> Active (solid), <b>M</b> Mastered (striped) — and frequency f; "
        "marks: ★ created, ▲ promoted, ↻ reactivated, ⇄ node merged; · not yet created. Click a description for its "
        "story."
    )
    return (
        f'<p class="note">{legend}</p><p><input type="search" id="cause-filter" placeholder="filter causes (id, node, '
        'words)" size="40"></p>'
        f'<div class="scroll"><table><thead><tr><th class="l">cause</th><th class="l">node</th>{head}<th '
        'class="l">description (click for the story)</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def tree_html(memories: Mapping[int, Memory]) -> str:
    """The skill-node tree of every committed round; a picker shows one at a time."""
    if not memories:
        return '<p class="note">no committed round yet.</p>'
    options = "".join(
        f'<option value="{t}"{" selected" if t == max(memories) else ""}>round {t}</option>' for t in sorted(memories)
    )
    trees = []
    for t, mem in sorted(memories.items()):
        s = schedule(mem)
        nodes = []
        for node in mem.nodes_in_order():
            causes = sorted(mem.members(node.id), key=lambda c: (not c.active, -c.frequency, c.id))
            items = "".join(
                f'<li><span class="state-{"A" if c.active else "M"}">{"Active" if c.active else "Mastered"}</span> '
                f'<a href="#cause-{_a(c.id)}"><code>{_e(c.id)}</code></a> f={c.frequency}'
                f"{f' p={s.p[c.id]:.3f}' if c.id in s.p else ''} — {_e(c.description)}</li>"
                for c in causes
            )
            nodes.append(
                f"<li><b><code>{_e(node.id)}</code> {_e(node.label)}</b> "
                f"({plural(len(causes), 'cause')})<ul>{items}</ul></li>"
            )
        summary = (
            f"M_{t}: F_{t} = {s.F}, F_1 = {'not yet fixed' if s.F1 is None else s.F1}, ε_{t + 1} = {s.epsilon:.4f}; "
            f"{len(mem.active())} Active, "
            f"{len(mem.mastered())} Mastered, {plural(len(mem.nodes), 'node')}"
        )
        trees.append(
            f'<div class="tree" data-round="{t}"><p class="note">{_e(summary)}</p><ul '
            f'class="tree">{"".join(nodes)}</ul></div>'
        )
    return f'<p><label>round <select id="tree-round">{options}</select></label></p>{"".join(trees)}'


def timing_table(timing: pl.DataFrame) -> str:
    """Seconds per phase summed over rounds and their share of the total, as the paper's Table 6."""
    order = {phase: i for i, phase in enumerate(PHASES)}
    per = (
        timing.group_by("phase")
        .agg(pl.col("seconds").sum())
        .with_columns(pl.col("phase").replace_strict(order, default=len(order)).alias("order"))
        .sort("order", "phase")
    )
    total = per["seconds"].sum() or 1.0
    per = per.with_columns(
        pl.col("phase").replace_strict(PHASES, default=pl.col("phase")).alias("component"),
        (pl.col("seconds") / total * 100).alias("share (%)"),
    ).select("component", "phase", "seconds", "share (%)")
    return table(per, left=("component", "phase"), digits=1)


def _about(data: RunData) -> str:
    """Where the run was forked from, its tags and its notes (``diagevo runs tag`` / ``note``)."""
    parts = []
    if data.forked_from:
        parts.append(
            f"<p>forked from <code>{_e(data.forked_from.get('run'))}</code> at round "
            f"{_e(data.forked_from.get('round'))}</p>"
        )
    if data.tags:
        parts.append("<p>tags: " + ", ".join(f"<code>{_e(t)}</code>" for t in data.tags) + "</p>")
    parts.extend(f'<p class="note">note: {_e(n)}</p>' for n in data.notes)
    return "".join(parts)


def render(data: RunData, db_url: str, command: Command) -> str:
    """The whole report. ``command(*args)`` spells a diagevo command for this database and run."""
    rounds = data.rounds
    r = rounds.tail(1).to_dicts()[0] if rounds.height else {}
    cards = [
        ("committed rounds", len(data.committed)),
        ("held-out accuracy", _fmt(r.get("heldout_acc"))),
        ("Active causes", r.get("active", 0)),
        ("Mastered causes", r.get("mastered", 0)),
        ("skill nodes", r.get("nodes", 0)),
        ("F_t", r.get("F", 0)),
        ("ε next round", _fmt(r.get("epsilon_next"))),
        ("causes in all", len(data.stories)),
    ]
    if data.selected:
        cards.append(("selected checkpoint", f"round {data.selected['round']}"))
    sections: list[tuple[str, str, str]] = []  # (id, title, body)
    sections.append(
        (
            "summary",
            "Summary",
            '<div class="cards">'
            + "".join(f'<div class="card"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for k, v in cards)
            + "</div>",
        )
    )
    if rounds.height:
        charts = [
            _chart(
                "accuracy",
                figures.to_svg(figures.accuracy(rounds, data.benchmarks)),
                "Fig. 3a: held-out accuracy and benchmark scores per round",
            )
        ]
        named = [m for m in data.metrics if not m.startswith("bench/")]  # benchmarks: in Fig. 3a
        if named:
            charts.append(
                _chart(
                    "metrics",
                    figures.to_svg(figures.metrics(rounds, named)),
                    "every other metric the run recorded, by name (round commit --metric)",
                )
            )
        if rounds["pseudo_label_acc"].is_not_null().any():
            charts.append(
                _chart(
                    "pseudo-labels",
                    figures.to_svg(figures.pseudo_labels(rounds)),
                    "Fig. 3c: accuracy of the majority-vote pseudo-labels",
                )
            )
        body = f'<div class="charts">{"".join(charts)}</div>'
        if data.benchmarks.height:
            body += "<h3>Benchmark scores (diagevo eval --run)</h3>" + table(
                data.benchmarks.select("round", "benchmark", "n", "accuracy", "k", "mean_at_k", "model"),
                left=("benchmark", "model"),
            )
        if data.selected:
            sel = data.selected
            scores = ", ".join(
                f"round {t}: {v:.3f}" for t, v in sorted(sel.get("scores", {}).items(), key=lambda kv: int(kv[0]))
            )
            body += (
                f'<p class="note">checkpoint selected on {_e(sel.get("benchmark"))}: round {sel["round"]} '
                f"({_e(scores)})</p>"
            )
        if data.heldout_detail.height:
            fig = figures.heatmap(data.heldout_detail, "Held-out accuracy by skill family")
            chart = _chart(
                "heldout-families",
                figures.to_svg(fig),
                "held-out accuracy of each family (the value is printed in each cell)",
            )
            body += f'<div class="charts">{chart}</div>'
        sections.append(("accuracy", "Accuracy", body))
        charts = [
            _chart(
                "lifecycle",
                figures.to_svg(figures.lifecycle(rounds)),
                "Fig. 3b: Active and Mastered causes and skill nodes at each commit",
            ),
            _chart("schedule", figures.to_svg(figures.schedule(rounds)), "F_t and ε_t+1 (Eq. 1) at each commit"),
        ]
        sections.append(("memory", "Memory lifecycle and schedule", f'<div class="charts">{"".join(charts)}</div>'))
    if data.steps.height:
        fields = [f for f in STEP_FIELDS if f in data.steps.columns]
        chart = _chart(
            "steps",
            figures.to_svg(figures.steps(data.steps, fields)),
            "each GRPO step's signals as TRL logs them (train.step), challenger and solver apart; x: the role's "
            "step over all rounds",
            wide=True,
        )
        sections.append(("steps", "GRPO steps", f'<div class="charts">{chart}</div>'))
    if data.questions.height:
        fig = figures.question_properties(data.questions)
        caption = (
            "Fig. 4: mean length in words and pooled 2-gram diversity of the questions generated each round, by mode"
        )
        body = f'<div class="charts">{_chart("questions", figures.to_svg(fig), caption, wide=True)}</div>'
        body += table(
            data.questions.with_columns((pl.col("distinct_2") * 100).alias("distinct-2 (%)")).select(
                "round", "mode", "n", "mean_words", "distinct-2 (%)"
            ),
            left=("mode",),
            digits=1,
        )
        sections.append(("questions", "Generated questions", body))
    sections.append(
        ("causes", "Error causes", causes_html(data, command) if data.stories else '<p class="note">no cause yet.</p>')
    )
    sections.append(("tree", "Skill-node tree", tree_html(data.memories)))
    if rounds.height:
        headers = {
            "epsilon_next": "ε_t+1",
            "F": "F_t",
            "heldout_acc": "held-out acc",
            "pseudo_label_acc": "label acc",
            "failed_diagnoses": "failed diag.",
            "attributions": "attrib.",
            "promotions": "prom.",
            "reactivations": "react.",
        }  # the full names in each header's title
        # a column per metric by name; the benchmarks have their table under Accuracy
        shown = rounds.select([c for c in rounds.columns if not c.startswith("bench/")])
        sections.append(("rounds", "Rounds", table(shown, headers)))
    if data.timing.height:
        chart = _chart("timing", figures.to_svg(figures.timing(data.timing, PHASES)), "seconds per phase and round")
        body = f'<div class="charts">{chart}<div>{timing_table(data.timing)}</div></div>'
        sections.append(("timing", "Time per phase (Table 6)", body))
    config = json.dumps(redact_config(data.config), indent=2, sort_keys=True)  # non-ASCII written as JSON escapes
    sections.append(
        (
            "config",
            "Configuration",
            (
                '<p class="note">as stored in run.started (secrets redacted); seed '
                f"{data.seed}</p><details><summary>show</summary><pre>{_e(config)}</pre></details>"
            ),
        )
    )
    t = data.committed[-1] if data.committed else 0
    # the cause with the most eventful story (promotions, reactivations, merges) as the example
    some_cause = max(
        data.stories, key=lambda c: sum(e["kind"] != "attributed" for e in data.stories[c]["timeline"]), default="C1"
    )
    audits: list[tuple[str, tuple[str, ...]]] = [
        ("rebuild a round's memory from the log", ("memory", "replay", "--round", str(t))),
        ("one row per round", ("memory", "stats")),
        ("a cause's story", ("memory", "why", some_cause)),
        ("every reactivation", ("memory", "events", "--type", "cause.reactivated")),
        ("hash chain, invariants, snapshots", ("memory", "verify")),
        ("the log as JSONL", ("memory", "export", "-o", "log.jsonl")),
    ]
    if (data.config.get("train") or {}).get("backend") == "hf":
        audits.append(("benchmark the checkpoints", ("eval", "--bench", "math500=PATH", "--select", "VAL_FILE")))
    sections.append(
        (
            "audit",
            "Audit further",
            "<table><tbody>"
            + "".join(
                f'<tr><td class="l">{_e(w)}</td><td class="l"><code>{_e(command(*c))}</code></td></tr>'
                for w, c in audits
            )
            + "</tbody></table>",
        )
    )
    nav = "".join(f'<a href="#{sid}">{_e(title)}</a>' for sid, title, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{_e(title)}</h2>{html}</section>' for sid, title, html in sections)
    backend = (data.config.get("train") or {}).get("backend")
    trainer = data.trainer or OLDER_LOG
    driver = f"{trainer} (backend {backend})" if trainer == OUR_TRAINER and backend else trainer
    open_note = f"; round {data.open_round} is in progress" if data.open_round else ""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>diagevo run {_a(data.run)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>diagevo run <code>{_e(data.run)}</code></h1>"
        f"<p>{plural(len(data.committed), 'committed round')}{_e(open_note)} · trainer {_e(driver)} · seed "
        f"{data.seed} · "
        f"log {_e(db_url)} up to seq {data.last_seq} ({_e(data.recorded_at)})</p>{_about(data)}</header>"
        f"<nav>{nav}</nav><main>{body}</main><script>{SCRIPT}</script></body></html>"
    )
