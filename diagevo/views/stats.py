"""The per-round statistics of a run, defined once: :class:`RoundStats`.

One row per committed round: the memory's sizes and schedule at its commit (Active, Mastered,
nodes, F_t, ε_{t+1}), what the round did (each event type's count under the column the catalog
names: questions, retained, failures, new causes, attributions, promotions, reactivations,
merges, failed diagnoses), every metric the run recorded for it by name (``eval.recorded``:
held-out accuracy, a trainer's ``--metric``; ``bench/NAME`` for benchmark scores) and the
held-out figures of its commit summary.

``memory stats``, the report, the training table and the round's commit summary all read these
rows. The accumulator moves on event by event, so its state is saved as a view (``stats``) and
a read folds only the log after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from diagevo.catalog import CATALOG, BatchWithdrawn, EvalRecorded, RoundCommitted
from diagevo.catalog.event import FIGURE_BOUND
from diagevo.log import Recorder, ViewState
from diagevo.log.recorder import StoredEvent
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.results.stats import RoundRow
from diagevo.views.memory import commit_memories, taken_rows

VIEW = "stats"

MEMORY_COLUMNS = ("round", "active", "mastered", "nodes", "F", "epsilon_next")
COUNTED_COLUMNS = (
    "questions",
    "retained",
    "failures",
    "new_causes",
    "attributions",
    "promotions",
    "reactivations",
    "merges",
    "failed_diagnoses",
)  # the catalog's counted columns (each type names its own), in the order tables show them
COLUMNS = (*MEMORY_COLUMNS, *COUNTED_COLUMNS)
"""The fixed columns of a row, in order; metric columns follow them."""

# numeric fields of a commit summary that are the round's figures (older logs carry held-out
# accuracy there rather than in eval.recorded)
_SUMMARY_METRICS = ("heldout", "pseudo_label_acc", "val_acc")

LABEL_FIGURES = ("retained_label_acc", "wrong_reward_share")
"""The round's overall label figures where the world knows the truth (:mod:`diagevo.train.labels`):
retained questions whose pseudo-label is right, and positive rewards given to wrong answers."""


@dataclass(frozen=True, slots=True)
class BenchmarkScore:
    """A benchmark score of a round's checkpoint (``eval --run``); a field the log lacks: None."""

    round: int
    benchmark: str
    n: int | None
    accuracy: float | None
    k: int | None
    mean_at_k: float | None
    model: str | None


def evaluation(t: int, ev: EvalRecorded) -> BenchmarkScore | dict[str, float] | None:
    """What an ``eval.recorded`` of round ``t`` says: a benchmark score of the round's checkpoint
    (``eval --run``), the round's figures by name (the loop's held-out accuracy, a trainer's
    ``--metric``), or None for the simulator's dynamics measures (the report's own)."""
    if ev.benchmark is not None:
        n, acc, k, at_k = (number(v) for v in (ev.n, ev.accuracy, ev.k, ev.mean_at_k))
        return BenchmarkScore(t, ev.benchmark, n, acc, k, at_k, ev.model)
    if ev.measure is not None:
        return None
    return {k: float(v) for k, v in (ev.metrics or {}).items() if number(v) is not None}


def commit_figures(ev: RoundCommitted) -> dict[str, float]:
    """The round's figures its commit holds (held-out accuracy, in older logs): declared, or in
    the trainer's ``summary``."""
    figures: dict[str, Any] = {"heldout_acc": ev.heldout_acc, "pseudo_label_acc": ev.pseudo_label_acc}
    figures.update(val_acc=ev.val_acc, **(ev.summary or {}))
    out = {k: float(v) for k, v in figures.items() if number(v) is not None and k.startswith(_SUMMARY_METRICS)}
    labels = {
        "retained_label_acc": (ev.retained_label_acc, ev.retained_label_acc_by_skill),
        "wrong_reward_share": (ev.wrong_reward_share, ev.wrong_reward_share_by_skill),
    }
    for name, (overall, by_skill) in labels.items():
        if (value := number(overall)) is not None:
            out[name] = float(value)
        out.update({f"{name}/{k}": float(v) for k, v in (by_skill or {}).items() if number(v) is not None})
    return out


def count_rounds(rows: Iterable[StoredEvent]) -> dict[int, dict[str, int]]:
    """Per round, the counted columns of these rows (each column present, 0 where none)."""
    acc = RoundStats()
    for row in rows:
        acc.add(row)
    return acc.counts


def _metric_name(name: str) -> str:
    return f"metric/{name}" if name in COLUMNS else name


@dataclass
class RoundStats:
    """The rows of :mod:`diagevo.views.stats`, accumulated from a run's events in seq order."""

    seq: int = 0  # the last event added
    counts: dict[int, dict[str, int]] = field(default_factory=dict)
    sizes: dict[int, dict[str, Any]] = field(default_factory=dict)  # committed round -> memory columns
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)

    def add(self, row: StoredEvent) -> None:
        seq, rnd, etype = row.seq, row.round, row.type
        self.seq = seq
        counts = self.counts.setdefault(rnd, dict.fromkeys(COUNTED_COLUMNS, 0))
        cls = CATALOG[etype]  # the event itself is built where its column depends on it, and for these two
        if cls.counted is not None and (cls.counted_if is None or getattr(row.event, cls.counted_if)):
            counts[cls.counted] += 1
        if cls is BatchWithdrawn:  # what the batch had counted is the round's no more
            for column, n in cast(BatchWithdrawn, row.event).counts.items():
                if column in counts:
                    counts[column] -= n
        if cls is EvalRecorded:
            said = evaluation(rnd, cast(EvalRecorded, row.event))
            metrics = self.metrics.setdefault(rnd, {})
            if isinstance(said, BenchmarkScore):  # a score of the round's checkpoint: the latest counts
                if said.accuracy is not None:
                    metrics[f"bench/{said.benchmark}"] = float(said.accuracy)
            elif said is not None:
                metrics.update({_metric_name(k): v for k, v in said.items()})
        elif cls is RoundCommitted:  # its summary's figures, where no eval.recorded gave them
            metrics = self.metrics.setdefault(rnd, {})
            for k, v in commit_figures(cast(RoundCommitted, row.event)).items():
                metrics.setdefault(_metric_name(k), v)

    def commit(self, mem: Memory) -> None:
        """The memory columns of a committed memory's row: its sizes and schedule."""
        s = schedule(mem)
        self.sizes[mem.committed] = {
            "round": mem.committed,
            "active": len(mem.active()),
            "mastered": len(mem.mastered()),
            "nodes": len(mem.nodes),
            "F": s.F,
            "epsilon_next": s.epsilon,
        }

    def commits_added(self, store: Recorder, run: str) -> RoundStats:
        """The memory columns of the run's commits after the last one held, up to the last event
        added (from the snapshots): what follows the events' rows."""
        for mem in commit_memories(store, run, after_round=max(self.sizes, default=0)):
            if mem.last_seq > self.seq:
                break
            self.commit(mem)
        return self

    def rows(self) -> list[RoundRow]:
        """One row per committed round: its fixed columns, then its metrics by name (the named
        ones, then ``bench/NAME``)."""
        out = []
        for rnd in sorted(self.sizes):
            counts = self.counts.get(rnd, dict.fromkeys(COUNTED_COLUMNS, 0))
            metrics = self.metrics.get(rnd, {})
            bench = sorted(k for k in metrics if k.startswith("bench/"))
            named = sorted(k for k in metrics if not k.startswith("bench/"))
            out.append(RoundRow(**self.sizes[rnd], **counts, figures={k: metrics[k] for k in (*named, *bench)}))
        return out

    def uncommitted_metrics(self) -> dict[int, dict[str, float]]:
        """The metrics recorded for rounds not committed (yet): round-0 scores of ``eval --run``,
        the open round's."""
        return {rnd: dict(m) for rnd, m in sorted(self.metrics.items()) if rnd not in self.sizes and m}

    def to_json(self) -> dict[str, Any]:
        return {
            "counts": {str(r): c for r, c in self.counts.items()},
            "sizes": {str(r): s for r, s in self.sizes.items()},
            "metrics": {str(r): m for r, m in self.metrics.items()},
        }

    @classmethod
    def from_state(cls, saved: ViewState) -> RoundStats:
        s = saved.state
        return cls(
            seq=saved.seq,
            counts={int(r): dict(c) for r, c in s.get("counts", {}).items()},
            sizes={int(r): dict(v) for r, v in s.get("sizes", {}).items()},
            metrics={int(r): dict(m) for r, m in s.get("metrics", {}).items()},
        )


def metric_columns(rows: Iterable[RoundRow]) -> list[str]:
    """The metric columns of these rows, by name, in the order the rows have them (the named
    metrics, then ``bench/NAME``): every figure's name."""
    seen: dict[str, None] = {}
    for r in rows:
        seen.update(dict.fromkeys(r.figures))
    named = [k for k in seen if not k.startswith("bench/")]
    return [*sorted(named), *sorted(k for k in seen if k.startswith("bench/"))]


def filled(rows: Sequence[RoundRow], metrics: Sequence[str] | None = None) -> list[RoundRow]:
    """The rows with the same figures, in order (None where a round has none); ``metrics``
    picks and orders them (default: all of the rows')."""
    names = metric_columns(rows) if metrics is None else metrics
    return [r.picked(names) for r in rows]


_DETAIL = ("acc/", *(f"{name}/" for name in LABEL_FIGURES))


def is_family_detail(name: str) -> bool:
    """A per-skill-family figure: a held-out accuracy (``acc/FAMILY``), detail behind
    ``heldout_acc``, or a label figure of a skill (``retained_label_acc/SKILL``,
    ``wrong_reward_share/SKILL``), detail behind the overall one."""
    return name.startswith(_DETAIL)


def number(value: Any) -> Any:
    """A figure from the log, or None: a missing or other value (a boolean is no number), or one
    that is not finite or beyond :data:`~diagevo.catalog.event.FIGURE_BOUND` (shown as absent,
    as a missing one)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return value if -FIGURE_BOUND <= value <= FIGURE_BOUND else None  # NaN compares false: none


def accumulate(store: Recorder, run: str, *, cached: bool = True, upto_seq: int | None = None) -> RoundStats:
    """The run's statistics up to its last event (or ``upto_seq``): from the saved state
    (``cached``), moved on with the log after it and the memory of the commits after it (from
    the snapshots). Only the rows the fold takes are counted (:func:`~diagevo.views.memory.taken_rows`):
    a row it refuses, which every reader of the memory passes over, is no question, failure or
    attribution of the round either, and is named."""
    saved = store.view_states(VIEW, run, latest=True) if cached else []
    acc = RoundStats.from_state(saved[0]) if saved else RoundStats()
    for row in taken_rows(store, run, max(acc.sizes, default=0), upto_seq):
        if row.seq > acc.seq:  # the rows from the last commit counted are folded again, not counted
            acc.add(row)
    return acc.commits_added(store, run)


def round_stats(store: Recorder, run: str, *, cached: bool = True) -> list[RoundRow]:
    """One row per committed round of ``run`` (see the module docstring)."""
    return accumulate(store, run, cached=cached).rows()


def refresh_stats(store: Recorder, run: str) -> None:
    """Save the statistics at the run's last event (a cache, like the snapshots: the caller turns
    a StoreError into a warning). A committed round's counts and memory never change, since the
    log only grows; a later event of an earlier round (a benchmark score) is added after it."""
    last, last_hash = store.head(run)
    saved = store.view_states(VIEW, run, latest=True)
    if saved and saved[0].seq >= last:
        return
    acc = accumulate(store, run, upto_seq=last)  # not beyond the hash it is saved under
    store.put_view_states([ViewState(VIEW, run, 0, last, last_hash, acc.to_json())])
