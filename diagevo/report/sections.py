"""The run report as typed view data: its header and its sections in page order, each what its
template (``templates/sections/<id>.html``) lays out, every text still plain text and every
number already formatted. :func:`run_page` reads a :class:`~diagevo.report.data.RunData`.

The configuration is shown without credentials (:func:`diagevo.text.redaction.redact_config`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from diagevo.catalog import CauseReactivated
from diagevo.report import figures
from diagevo.report.causes import CauseTable, Tree, causes, tree
from diagevo.report.data import PHASES, BenchmarkScore, PhaseTime, QuestionStats, RunData
from diagevo.report.page import Chart, Table, cell, chart, table, text
from diagevo.results.stats import RoundRow
from diagevo.text.redaction import redact_config
from diagevo.text.words import plural
from diagevo.views.queries import STEP_FIELDS
from diagevo.views.runs import OUR_TRAINER, ForkedFrom, RunSummary

Command = Callable[..., str]
"""``command("memory", "why", cause_id)``: a diagevo command for this database and run, as the
user would type it (each argument one word, quoted where it must be)."""


@dataclass(frozen=True, slots=True)
class Header:
    """The page's head: the run, where its log is, and what ``diagevo runs`` says of it."""

    run: str
    committed: str  # "3 committed rounds"
    open_note: str  # "; round 4 is in progress", or ""
    driver: str  # the trainer (and backend)
    seed: int
    db_url: str
    last_seq: int
    recorded_at: str
    forked_from: ForkedFrom | None = None
    tags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    diagevo: str = ""  # "opened by 0.1.1; rounds committed by 0.1.1, 0.1.2" ("": an older diagevo's log)


@dataclass(frozen=True, slots=True)
class Card:
    value: str
    label: str


@dataclass(frozen=True, slots=True)
class Selected:
    """The checkpoint ``eval --select`` chose: on which benchmark, which round, every round's score."""

    benchmark: str
    round: int
    scores: str


@dataclass(frozen=True, slots=True)
class Accuracy:
    charts: list[Chart]
    benchmarks: Table | None
    selected: Selected | None
    families: Chart | None  # held-out accuracy by skill family


@dataclass(frozen=True, slots=True)
class ChartTable:
    """A figure and the table of what it draws (the questions, the time per phase)."""

    chart: Chart
    table: Table


@dataclass(frozen=True, slots=True)
class ConfigView:
    seed: int
    text: str  # the redacted config as indented JSON


@dataclass(frozen=True, slots=True)
class AuditCommand:
    what: str
    command: str


@dataclass(frozen=True, slots=True)
class ReportSection:
    """A section of the page: its anchor, its heading, and what its partial lays out
    (``sections/<id>.html``; a section of charts alone, ``sections/charts.html``)."""

    id: str
    title: str
    view: list[Card] | Accuracy | list[Chart] | ChartTable | CauseTable | Tree | Table | ConfigView | list[AuditCommand]

    @property
    def partial(self) -> str:
        charts = isinstance(self.view, list) and all(isinstance(v, Chart) for v in self.view)
        return f"sections/{'charts' if charts and self.view else self.id}.html"


@dataclass(frozen=True, slots=True)
class RunPage:
    header: Header
    sections: list[ReportSection]


def run_page(data: RunData, db_url: str, command: Command) -> RunPage:
    """The run report's view data. ``command(*args)`` spells a diagevo command for this
    database and run."""
    rounds = data.rounds
    sections = [ReportSection("summary", "Summary", summary(data))]
    if rounds:
        scores = accuracy(data)
        if scores.charts or scores.benchmarks or scores.selected or scores.families:  # a trainer may record none
            sections.append(ReportSection("accuracy", "Accuracy", scores))
        sections.append(ReportSection("memory", "Memory lifecycle and schedule", memory(rounds)))
    if data.steps:
        sections.append(ReportSection("steps", "GRPO steps", steps(data.steps)))
    if data.questions:
        sections.append(ReportSection("questions", "Generated questions", questions(data.questions)))
    sections.append(ReportSection("causes", "Error causes", causes(data, command)))
    sections.append(ReportSection("tree", "Skill-node tree", tree(data.memories)))
    if rounds:
        sections.append(ReportSection("rounds", "Rounds", rounds_table(rounds)))
    if data.timing:
        sections.append(ReportSection("timing", "Time per phase (Table 6)", timing(data.timing)))
    # the config as stored in run.started, secrets redacted; non-ASCII written as JSON escapes
    config = json.dumps(redact_config(data.config), indent=2, sort_keys=True)
    sections.append(ReportSection("config", "Configuration", ConfigView(data.seed, config)))
    sections.append(ReportSection("audit", "Audit further", audits(data, command)))
    return RunPage(header(data, db_url), sections)


def header(data: RunData, db_url: str) -> Header:
    backend = (data.config.get("train") or {}).get("backend")
    trainer = data.about.trainer
    return Header(
        run=data.run,
        committed=plural(len(data.committed), "committed round"),
        open_note=f"; round {data.about.open_round} is in progress" if data.about.open_round else "",
        driver=f"{trainer} (backend {backend})" if trainer == OUR_TRAINER and backend else trainer,
        seed=data.seed,
        db_url=db_url,
        last_seq=data.last_seq,
        recorded_at=data.recorded_at,
        forked_from=data.about.forked_from,
        tags=list(data.about.tags),
        notes=list(data.about.notes),
        diagevo=written_by(data.about),
    )


def written_by(about: RunSummary) -> str:
    """The diagevo versions that opened the run and committed its rounds, where recorded, each
    version once (a hundred rounds make one line; ``runs --json`` has them by round)."""
    said = [f"opened by {about.diagevo}"] if about.diagevo else []
    committed = dict.fromkeys(about.round_diagevo[t] for t in sorted(about.round_diagevo))
    return "; ".join(said + ([f"rounds committed by {', '.join(committed)}"] if committed else []))


def summary(data: RunData) -> list[Card]:
    """The cards of the last committed round."""
    r = data.rounds[-1] if data.rounds else None
    cards = [
        ("committed rounds", len(data.committed)),
        ("held-out accuracy", cell(r.value("heldout_acc") if r else None)),
        ("Active causes", r.active if r else 0),
        ("Mastered causes", r.mastered if r else 0),
        ("skill nodes", r.nodes if r else 0),
        ("F_t", r.F if r else 0),
        ("ε next round", cell(r.epsilon_next if r else None)),
        ("causes in all", len(data.stories)),
    ]
    if data.selected:
        cards.append(("selected checkpoint", f"round {data.selected.round}"))
    return [Card(text(value), label) for label, value in cards]


def accuracy(data: RunData) -> Accuracy:
    """Fig. 3a, every other metric by name, Fig. 3c, the benchmark scores, the checkpoint choice
    and held-out accuracy by skill family: each where the run recorded what it plots (a trainer
    that records no metric has none, and no empty panel)."""
    rounds = data.rounds
    charts = []
    held = any(r.value("heldout_acc") is not None for r in rounds)
    if held or data.benchmarks:
        charts.append(
            chart(
                "accuracy",
                figures.accuracy(rounds, data.benchmarks),
                "Fig. 3a: held-out accuracy and benchmark scores per round",
            )
        )
    named = [m for m in data.metrics if not m.startswith("bench/")]  # benchmarks: in Fig. 3a
    if named:
        charts.append(
            chart(
                "metrics",
                figures.metrics(rounds, named),
                "every other metric the run recorded, by name (the metrics a round's commit recorded)",
            )
        )
    labels = [c for c, _, _ in figures.LABEL_LINES if any(r.value(c) is not None for r in rounds)]
    if labels or any(r.value("pseudo_label_acc") is not None for r in rounds):
        caption = "Fig. 3c: accuracy of the majority-vote pseudo-labels on the shared questions"
        if labels:  # where the world knows the truth
            caption += (
                "; of the questions the solver trained on, the share whose pseudo-label is right and the share "
                "of its positive rewards given to wrong answers"
            )
        charts.append(chart("pseudo-labels", figures.pseudo_labels(rounds), caption))
    benchmarks = None
    if data.benchmarks:
        columns = [f.name for f in fields(BenchmarkScore)]
        benchmarks = table(columns, map(asdict, data.benchmarks), left=("benchmark", "model"))
    families = None
    if data.heldout_detail:
        families = chart(
            "heldout-families",
            figures.heatmap(data.heldout_detail, "Held-out accuracy by skill family"),
            "held-out accuracy of each family (the value is printed in each cell)",
        )
    return Accuracy(charts, benchmarks, selected(data), families)


def selected(data: RunData) -> Selected | None:
    sel = data.selected
    if sel is None:
        return None
    scores = ", ".join(f"round {t}: {v:.3f}" for t, v in sorted(sel.event.scores.items(), key=lambda kv: int(kv[0])))
    return Selected(text(sel.event.benchmark), sel.round, scores)


def memory(rounds: Sequence[RoundRow]) -> list[Chart]:
    return [
        chart(
            "lifecycle",
            figures.lifecycle(rounds),
            "Fig. 3b: Active and Mastered causes and skill nodes at each commit",
        ),
        chart("schedule", figures.schedule(rounds), "F_t and ε_t+1 (Eq. 1) at each commit"),
    ]


def steps(rows: Sequence[dict[str, Any]]) -> list[Chart]:
    shown = [f for f in STEP_FIELDS if any(f in r for r in rows)]
    caption = (
        "each GRPO step's signals as TRL logs them (train.step), challenger and solver apart; x: the role's "
        "step over all rounds"
    )
    return [chart("steps", figures.steps(rows, shown), caption, wide=True)]


def questions(stats: Sequence[QuestionStats]) -> ChartTable:
    caption = "Fig. 4: mean length in words and pooled 2-gram diversity of the questions generated each round, by mode"
    rows = [{**asdict(s), "distinct-2 (%)": s.distinct_2 * 100} for s in stats]
    return ChartTable(
        chart("questions", figures.question_properties(stats), caption, wide=True),
        table(("round", "mode", "n", "mean_words", "distinct-2 (%)"), rows, left=("mode",), digits=1),
    )


# the Rounds table's short headers (the full names in each header's title)
ROUND_HEADERS = {
    "epsilon_next": "ε_t+1",
    "F": "F_t",
    "heldout_acc": "held-out acc",
    "pseudo_label_acc": "shared label acc",
    "failed_diagnoses": "failed diag.",
    "attributions": "attrib.",
    "promotions": "prom.",
    "reactivations": "react.",
}


def rounds_table(rounds: Sequence[RoundRow]) -> Table:
    """A row per committed round, a column per metric by name; the benchmarks have their table
    under Accuracy."""
    columns = [c for c in rounds[0].columns if not c.startswith("bench/")]
    return table(columns, [r.to_json() for r in rounds], ROUND_HEADERS)


def timing(seconds: Sequence[PhaseTime]) -> ChartTable:
    """Seconds per phase and round, and summed over rounds with their share of the total, as the
    paper's Table 6."""
    per: dict[str, float] = {}
    for s in seconds:
        per[s.phase] = per.get(s.phase, 0.0) + s.seconds
    order = {phase: i for i, phase in enumerate(PHASES)}
    total = sum(per.values()) or 1.0
    rows = [
        {"component": PHASES.get(phase, phase), "phase": phase, "seconds": sec, "share (%)": sec / total * 100}
        for phase, sec in sorted(per.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    ]
    shares = table(("component", "phase", "seconds", "share (%)"), rows, left=("component", "phase"), digits=1)
    return ChartTable(chart("timing", figures.timing(seconds, PHASES), "seconds per phase and round"), shares)


def audits(data: RunData, command: Command) -> list[AuditCommand]:
    """The diagevo commands that check what the page shows, for this database and run."""
    t = data.committed[-1] if data.committed else 0
    # the cause with the most eventful story (promotions, reactivations, merges) as the example
    some_cause = max(
        data.stories, key=lambda c: len(data.stories[c].timeline) - data.stories[c].attributions(), default="C1"
    )
    rows: list[tuple[str, tuple[str, ...]]] = [
        ("rebuild a round's memory from the log", ("memory", "replay", "--round", str(t))),
        ("one row per round", ("memory", "stats")),
        ("a cause's story", ("memory", "why", some_cause)),
        ("every reactivation", ("memory", "events", "--type", CauseReactivated.name)),
        ("hash chain, invariants, snapshots", ("memory", "verify")),
        ("the log as JSONL", ("memory", "export", "-o", "log.jsonl")),
    ]
    if (data.config.get("train") or {}).get("backend") == "hf":
        rows.append(("benchmark the checkpoints", ("eval", "--bench", "math500=PATH", "--select", "VAL_FILE")))
    return [AuditCommand(what, command(*args)) for what, args in rows]
