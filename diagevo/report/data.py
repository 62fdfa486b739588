"""Everything the report shows, read from the run's log alone, as polars frames.

One pass over the log collects the round summaries, the bookkeeping (timing, evaluations, the
checkpoint choice) and the question texts; the per-round statistics are the run's
(:func:`diagevo.views.stats.round_stats`, what ``memory stats`` prints), the causes' stories
come from :func:`diagevo.views.stories.cause_stories`, and the memory of every committed round
from :func:`diagevo.views.memory.load_memory` (snapshot-backed).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from diagevo.catalog import (
    CheckpointSelected,
    EvalRecorded,
    FailureRecorded,
    QuestionGenerated,
    RoundCommitted,
    RunStarted,
    TrainStep,
)
from diagevo.curriculum.stats import question_stats
from diagevo.log import Recorder
from diagevo.memory.fold import InvariantError
from diagevo.memory.state import Memory
from diagevo.views.memory import load_memory
from diagevo.views.queries import step_row
from diagevo.views.runs import summarise
from diagevo.views.stats import COLUMNS, is_family_detail, metric_columns, round_stats
from diagevo.views.stats import frame as stats_frame
from diagevo.views.stories import cause_stories

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


@dataclass
class RunData:
    """A run as the report draws it."""

    run: str
    config: dict[str, Any]
    seed: int
    last_seq: int
    recorded_at: str
    rounds: pl.DataFrame  # one row per committed round: views.stats.frame, every metric by name
    timing: pl.DataFrame  # round, phase, seconds
    benchmarks: pl.DataFrame  # round, benchmark, n, accuracy, k, mean_at_k, model
    heldout_detail: pl.DataFrame  # label, round, value: the loop's per-family held-out accuracy
    questions: pl.DataFrame  # round, mode, n, mean_words, distinct_2
    memories: dict[int, Memory] = field(default_factory=dict)  # M_t of every committed round
    stories: dict[str, dict[str, Any]] = field(default_factory=dict)
    selected: dict[str, Any] | None = None
    open_round: int | None = None
    trainer: str | None = None  # what run.started names (None: an older log)
    tags: list[str] = field(default_factory=list)  # what `diagevo runs` says of the run
    notes: list[str] = field(default_factory=list)
    forked_from: dict[str, Any] | None = None
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)  # round, role, step, global_step, TRL's fields

    @property
    def metrics(self) -> list[str]:
        """The metric columns of ``rounds`` beyond held-out and pseudo-label accuracy: a trainer's
        ``--metric``, ``bench/NAME``, by name."""
        return [c for c in self.rounds.columns if c not in COLUMNS and c not in _ALWAYS]

    @property
    def committed(self) -> list[int]:
        return sorted(self.memories)


def _frame(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, strict=False) if rows else pl.DataFrame(schema=schema)


@dataclass
class _Scanned:
    """What one pass over a run's events collects for the report: the events themselves (the
    texts the report shows read back), each round's summary and held-out scores, benchmark
    scores, the questions by round and mode, the config, the selected checkpoint, GRPO steps."""

    rows: list[tuple[int, int, str, dict[str, Any]]] = field(default_factory=list)
    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)
    heldout: dict[int, dict[str, Any]] = field(default_factory=dict)
    bench: list[dict[str, Any]] = field(default_factory=list)
    texts: dict[int, dict[str, list[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    config: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    last_seq: int = 0
    selected: dict[str, Any] | None = None
    trainer: str | None = None
    step_rows: list[dict[str, Any]] = field(default_factory=list)


def _scan(store: Recorder, run: str) -> _Scanned:
    found = _Scanned()
    # the texts the report shows (questions, failures) are read back; the rest stays lean
    shown = {e.seq: e.data for e in store.read(run, types=_SHOWN_TEXTS, texts=True)}
    for seq, rnd, etype, data in store.rows(run):
        data = shown.get(seq, data)
        found.rows.append((seq, rnd, etype, data))
        found.last_seq = seq
        if etype == RunStarted.name:
            started = RunStarted.from_stored(data)
            found.config, found.seed = dict(started.config), int(started.seed)
            found.trainer = started.trainer if isinstance(started.trainer, str) else None
        elif etype == RoundCommitted.name:
            found.summaries[rnd] = data
        elif etype == QuestionGenerated.name:
            found.texts[rnd][data["mode"]].append(data.get("text") or "")
        elif etype == EvalRecorded.name and "benchmark" in data:
            found.bench.append(
                {"round": rnd, **{k: data.get(k) for k in ("benchmark", "n", "accuracy", "k", "mean_at_k", "model")}}
            )
        elif etype == EvalRecorded.name and "measure" not in data:  # not a sim-dynamics measure
            found.heldout[rnd] = data
        elif etype == CheckpointSelected.name:
            found.selected = {"round": rnd, **data}
        elif etype == TrainStep.name:
            found.step_rows.append(step_row(rnd, data))
    if not found.rows:
        raise InvariantError(f"run {run!r} has no events")
    return found


def load_run(store: Recorder, run: str) -> RunData:
    """Read ``run`` from ``store`` (see the module docstring)."""
    found = _scan(store, run)
    recorded_at = next(store.read(run, after_seq=found.last_seq - 1)).recorded_at
    stats = round_stats(store, run)
    # every metric by name (held-out and pseudo-label accuracy always, null where not recorded);
    # the per-family accuracies are the heat map's (heldout_detail)
    named = [m for m in metric_columns(stats) if not is_family_detail(m) and m not in _ALWAYS]
    rounds = stats_frame(stats, [*_ALWAYS, *named])
    memories = {t: load_memory(store, run, t) for t in rounds["round"].to_list()}
    latest = load_memory(store, run)
    about = summarise(store, run)
    return RunData(
        run=run,
        trainer=found.trainer,
        config=found.config,
        seed=found.seed,
        last_seq=found.last_seq,
        recorded_at=recorded_at,
        rounds=rounds,
        timing=_timing(found.summaries),
        benchmarks=_benchmarks(found.bench),
        heldout_detail=_heldout_detail(found.heldout),
        questions=_questions(found.texts),
        memories=memories,
        stories=cause_stories(found.rows),
        selected=found.selected,
        open_round=latest.open_round,
        tags=about.tags,
        notes=about.notes,
        forked_from=about.forked_from,
        steps=pl.DataFrame(found.step_rows, strict=False) if found.step_rows else pl.DataFrame(),
    )


def _timing(summaries: dict[int, dict[str, Any]]) -> pl.DataFrame:
    """Seconds of each phase of each committed round."""
    return _frame(
        [
            {"round": t, "phase": phase, "seconds": float(sec)}
            for t, s in sorted(summaries.items())
            for phase, sec in (s.get("timing") or {}).items()
            if isinstance(sec, (int, float))
        ],
        {"round": pl.Int64, "phase": pl.Utf8, "seconds": pl.Float64},
    )


def _benchmarks(bench: list[dict[str, Any]]) -> pl.DataFrame:
    """Benchmark scores by round; an evaluation repeated with other settings: the latest counts."""
    benchmarks = _frame(
        bench,
        {
            "round": pl.Int64,
            "benchmark": pl.Utf8,
            "n": pl.Int64,
            "accuracy": pl.Float64,
            "k": pl.Int64,
            "mean_at_k": pl.Float64,
            "model": pl.Utf8,
        },
    )
    if not benchmarks.height:
        return benchmarks
    latest = benchmarks.unique(subset=["round", "benchmark"], keep="last", maintain_order=True)
    return latest.sort("benchmark", "round")


def _heldout_detail(heldout: dict[int, dict[str, Any]]) -> pl.DataFrame:
    """Held-out accuracy per family (``acc/FAMILY``) and round: the heat map's cells."""
    return _frame(
        [
            {"label": key.removeprefix("acc/"), "round": t, "value": float(v)}
            for t, m in sorted(heldout.items())
            for key, v in m.items()
            if key.startswith("acc/") and isinstance(v, (int, float))
        ],
        {"label": pl.Utf8, "round": pl.Int64, "value": pl.Float64},
    )


def _questions(texts: dict[int, dict[str, list[str]]]) -> pl.DataFrame:
    """Question length and diversity per round, by mode and over all modes."""
    qrows = []
    for t in sorted(texts):
        by_mode = texts[t]
        for mode in ("free", "targeted", "stitched"):
            if by_mode.get(mode):
                qrows.append({"round": t, "mode": mode, **_qstats(by_mode[mode])})
        qrows.append({"round": t, "mode": "all", **_qstats([q for m in by_mode.values() for q in m])})
    return _frame(
        qrows, {"round": pl.Int64, "mode": pl.Utf8, "n": pl.Int64, "mean_words": pl.Float64, "distinct_2": pl.Float64}
    )


def _qstats(texts: list[str]) -> dict[str, Any]:
    s = question_stats(texts)
    return {"n": int(s["n"]), "mean_words": s["mean_words"], "distinct_2": s["distinct_2"]}
