"""Everything the report shows, read from the run's log alone, as plain rows.

One pass over the log collects the round summaries, the bookkeeping (timing, evaluations, the
checkpoint choice) and the question texts; the per-round statistics are the run's
(:func:`diagevo.views.stats.round_stats`, what ``memory stats`` prints), the causes' stories
come from :func:`diagevo.views.stories.cause_stories`, the memory of every committed round
from :func:`diagevo.views.memory.commit_memories` (snapshot-backed), and what ``diagevo runs``
says of the run (its open round among it) from :func:`diagevo.views.runs.summarise`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from diagevo.catalog import (
    CATALOG,
    CheckpointSelected,
    EvalRecorded,
    Event,
    FailureRecorded,
    QuestionGenerated,
    RoundCommitted,
    RunStarted,
    TrainStep,
)
from diagevo.curriculum.stats import question_stats
from diagevo.log import EventReader, Recorder
from diagevo.memory.fold import InvariantError, Row
from diagevo.memory.state import Memory
from diagevo.results.stats import RoundRow
from diagevo.views.admission import Admission, admission
from diagevo.views.memory import commit_memories
from diagevo.views.queries import step_row
from diagevo.views.runs import RunSummary, summarise
from diagevo.views.stats import (
    COLUMNS,
    LABEL_FIGURES,
    BenchmarkScore,
    evaluation,
    filled,
    is_family_detail,
    metric_columns,
    number,
    round_stats,
)
from diagevo.views.stories import Story, cause_stories, story_events
from diagevo.views.withdrawn import Withdrawn

# the round's phases as the paper's Table 6 names its components
PHASES = {
    "challenger": "Challenger policy optimization",
    "generate": "Curriculum candidate generation",
    "construct": "Candidate generation, pseudo-labels and filtering",
    "solver": "Solver policy optimization",
    "diagnose": "Diagnosis and memory maintenance",
    "evaluate": "Held-out evaluation",
}


_SHOWN_TEXTS = (QuestionGenerated, FailureRecorded)
_ALWAYS = ("heldout_acc", "pseudo_label_acc")  # metric columns the report's figures read
# and, where any round has them (a world that knows the truth), the label figures: Fig. 3c's too


@dataclass(frozen=True, slots=True)
class PhaseTime:
    round: int
    phase: str
    seconds: float


@dataclass(frozen=True, slots=True)
class FamilyAccuracy:
    """The loop's held-out accuracy of a skill family (``acc/FAMILY``) at a round."""

    family: str
    round: int
    accuracy: float


@dataclass(frozen=True, slots=True)
class QuestionStats:
    """Length and diversity of a round's questions of a mode (``all``: every mode)."""

    round: int
    mode: str
    n: int
    mean_words: float
    distinct_2: float


@dataclass(frozen=True, slots=True)
class Selection:
    """The checkpoint ``eval --select`` chose: its event and the round it names."""

    round: int
    event: CheckpointSelected


@dataclass
class RunData:
    """A run as the report draws it."""

    run: str
    config: dict[str, Any]
    seed: int
    last_seq: int
    recorded_at: str
    rounds: list[RoundRow]  # a row per committed round: views.stats.filled, every metric by name
    timing: list[PhaseTime]
    benchmarks: list[BenchmarkScore]  # by benchmark, then round
    heldout_detail: list[FamilyAccuracy]
    questions: list[QuestionStats]
    about: RunSummary  # what `diagevo runs` says of the run: its trainer, tags, notes, fork
    memories: dict[int, Memory] = field(default_factory=dict)  # M_t of every committed round
    stories: dict[str, Story] = field(default_factory=dict)
    selected: Selection | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)  # round, role, step, global_step, TRL's fields

    @property
    def metrics(self) -> list[str]:
        """The metric columns of ``rounds`` beyond held-out and pseudo-label accuracy and the label
        figures: a trainer's ``--metric``, ``bench/NAME``, by name."""
        shown = {*COLUMNS, *_ALWAYS, *LABEL_FIGURES}
        return [c for c in self.rounds[0].figures if c not in shown] if self.rounds else []

    @property
    def committed(self) -> list[int]:
        return sorted(self.memories)


@dataclass
class _Scanned:
    """What one pass over a run's events collects for the report: the events themselves (the
    texts the report shows read back), each round's phase times and held-out scores, benchmark
    scores, the questions by round and mode, the config, the selected checkpoint, GRPO steps."""

    rows: list[Row] = field(default_factory=list)
    timing: list[PhaseTime] = field(default_factory=list)
    heldout: dict[int, dict[str, float]] = field(default_factory=dict)
    bench: list[BenchmarkScore] = field(default_factory=list)
    texts: dict[int, dict[str, list[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    config: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    last_seq: int = 0
    selected: Selection | None = None
    step_rows: list[dict[str, Any]] = field(default_factory=list)

    def take(self, t: int, event: Event) -> None:
        match event:
            case RunStarted(config=config, seed=seed):
                self.config, self.seed = dict(config), int(seed)
            case RoundCommitted():
                timing = getattr(event, "timing", None) or {}  # the phases' seconds its summary carries
                self.timing += [PhaseTime(t, str(p), float(s)) for p, s in timing.items() if number(s) is not None]
            case QuestionGenerated(mode=mode, text=text):
                self.texts[t][mode].append(text or "")
            case EvalRecorded():
                said = evaluation(t, event)
                if isinstance(said, BenchmarkScore):
                    self.bench.append(said)
                elif said is not None:
                    self.heldout[t] = said
            case CheckpointSelected():
                self.selected = Selection(t, event)
            case TrainStep():
                self.step_rows.append(step_row(t, event))


_SCANNED = frozenset((RunStarted, RoundCommitted, QuestionGenerated, EvalRecorded, CheckpointSelected, TrainStep))


def _scan(store: EventReader, run: str, admitted: Admission) -> _Scanned:
    """The run's rows the rules admit (:mod:`diagevo.views.admission`), scanned once."""
    found = _Scanned()
    # the texts the report shows (questions, failures) are read back; the rest stays lean
    shown = {e.seq: e for e in store.rows(run, types=_SHOWN_TEXTS, texts=True)}
    withdrawn = Withdrawn.of(store, run)  # a withdrawn batch's questions were never recorded
    for row in admitted.admitted(store.rows(run)):
        row = shown.get(row.seq, row)
        found.rows.append(row)
        found.last_seq = row.seq
        if CATALOG[row.type] in _SCANNED and not withdrawn.holds(row):  # the others are told by the stories alone
            found.take(row.round, row.event)
    if not found.rows:
        raise InvariantError(f"run {run!r} has no events")
    return found


def load_run(store: Recorder, run: str) -> RunData:
    """Read ``run`` from ``store`` (see the module docstring)."""
    found = _scan(store, run, admission(store, run))  # the memory folded through its end: its refusals left out
    recorded_at = next(store.read(run, after_seq=found.last_seq - 1)).recorded_at
    stats = round_stats(store, run)
    # every metric by name (held-out and pseudo-label accuracy always, null where not recorded;
    # the label figures where a round has them); the per-family accuracies are the heat map's
    # (heldout_detail), the label figures by skill stay in memory stats --json
    present = metric_columns(stats)
    labels = [m for m in LABEL_FIGURES if m in present]
    named = [m for m in present if not is_family_detail(m) and m not in (*_ALWAYS, *LABEL_FIGURES)]
    rounds = filled(stats, [*_ALWAYS, *labels, *named])
    memories = {m.committed: m for m in commit_memories(store, run)}  # one pass over the snapshots
    return RunData(
        run=run,
        config=found.config,
        seed=found.seed,
        last_seq=found.last_seq,
        recorded_at=recorded_at,
        rounds=rounds,
        timing=found.timing,
        benchmarks=_benchmarks(found.bench),
        heldout_detail=_heldout_detail(found.heldout),
        questions=_questions(found.texts),
        memories=memories,
        stories=cause_stories(story_events(found.rows)),
        selected=found.selected,
        about=summarise(store, run),
        steps=found.step_rows,
    )


def _benchmarks(bench: list[BenchmarkScore]) -> list[BenchmarkScore]:
    """Benchmark scores by round; an evaluation repeated with other settings: the latest counts."""
    latest = {(b.round, b.benchmark): b for b in bench}
    return sorted(latest.values(), key=lambda b: (b.benchmark, b.round))


def _heldout_detail(heldout: dict[int, dict[str, float]]) -> list[FamilyAccuracy]:
    """Held-out accuracy per family (``acc/FAMILY``) and round: the heat map's cells."""
    return [
        FamilyAccuracy(key.removeprefix("acc/"), t, v)
        for t, m in sorted(heldout.items())
        for key, v in m.items()
        if key.startswith("acc/")
    ]


def _questions(texts: dict[int, dict[str, list[str]]]) -> list[QuestionStats]:
    """Question length and diversity per round, by mode and over all modes."""
    rows = []
    for t in sorted(texts):
        by_mode = texts[t]
        modes = [(mode, by_mode[mode]) for mode in ("free", "targeted", "stitched") if by_mode.get(mode)]
        for mode, asked in [*modes, ("all", [q for m in by_mode.values() for q in m])]:
            s = question_stats(asked)
            rows.append(QuestionStats(t, mode, int(s["n"]), s["mean_words"], s["distinct_2"]))
    return rows
