"""A run's rounds as rows: ``memory stats``, ``memory plot``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from diagevo.results import Json, JsonRow, Result


@dataclass(frozen=True)
class LifecycleRow:
    """The memory after a committed round: its Active and Mastered causes, nodes, F_t and ε_{t+1}."""

    round: int
    active: int
    mastered: int
    nodes: int
    F: float
    epsilon_next: float


@dataclass(frozen=True)
class RoundRow(LifecycleRow):
    """A committed round as ``memory stats`` shows it: the memory after it (its
    :class:`LifecycleRow`), what the round counted, and ``figures``, the run's own columns by name
    (its metrics, the label figures, checkpoint MB: data, not fields), in the order shown."""

    questions: int = 0
    retained: int = 0
    failures: int = 0
    new_causes: int = 0
    attributions: int = 0
    promotions: int = 0
    reactivations: int = 0
    merges: int = 0
    failed_diagnoses: int = 0
    figures: JsonRow = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: JsonRow) -> RoundRow:
        """A row of the statistics view: its fixed columns as fields, the rest as figures."""
        fixed: dict[str, Any] = {k: v for k, v in row.items() if k in _FIXED}  # numbers, as the view counts them
        return cls(**fixed, figures={k: v for k, v in row.items() if k not in _FIXED})

    def to_json(self) -> dict[str, Json]:
        """The row as ``memory stats --json`` prints it: the fixed columns, then the figures."""
        return {**{k: getattr(self, k) for k in _FIXED}, **self.figures}

    def value(self, column: str) -> Json:
        """A column chosen by name (a chart's, a table's): a fixed column's field, else the figure
        of that name, None where the round has none."""
        return getattr(self, column) if column in _FIXED_SET else self.figures.get(column)

    @property
    def columns(self) -> list[str]:
        """Its columns in order: the fixed ones, then its figures'."""
        return [*_FIXED, *self.figures]

    def number(self, column: str) -> float | None:
        """:meth:`value` where it is a number (a figure of another kind, or none: None)."""
        v = self.value(column)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def picked(self, names: Sequence[str]) -> RoundRow:
        """The row with these figures, in this order (None where it has none of a name)."""
        return replace(self, figures={n: self.figures.get(n) for n in names})

    def with_figures(self, more: Mapping[str, Json]) -> RoundRow:
        """The row with ``more`` figures after its own."""
        return replace(self, figures={**self.figures, **more})


_FIXED = tuple(f.name for f in fields(RoundRow) if f.name != "figures")
_FIXED_SET = frozenset(_FIXED)


@dataclass(frozen=True)
class PendingRow:
    """The figures recorded for a round not committed (yet), such as round-0 scores of ``eval --run``."""

    round: int
    figures: JsonRow

    def to_json(self) -> dict[str, Json]:
        return {"round": self.round, **self.figures}


@dataclass(frozen=True)
class RunStats(Result):
    """``memory stats --json``: one row per committed round, the metric columns, and the
    figures of rounds not committed (yet)."""

    run: str
    rounds: Sequence[RoundRow]
    metrics: Sequence[str]
    uncommitted: Sequence[PendingRow]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "rounds": [r.to_json() for r in self.rounds],
            "metrics": list(self.metrics),
            "uncommitted": [u.to_json() for u in self.uncommitted],
        }


@dataclass(frozen=True)
class Lifecycle(Result):
    """``memory plot --json``: the memory's lifecycle, a row per committed round."""

    run: str
    series: Sequence[LifecycleRow]


@dataclass(frozen=True)
class StepRow:
    """A GRPO step the run logged (``train.step``): its round, role, step in the phase and global
    step, and ``figures``, TRL's fields by name as TRL logged them (data, not fields)."""

    round: int
    role: str
    step: int
    global_step: int
    figures: JsonRow = field(default_factory=dict)

    def to_json(self) -> dict[str, Json]:
        """The row as ``memory stats --steps --json`` prints it."""
        return {
            "round": self.round,
            "role": self.role,
            "step": self.step,
            "global_step": self.global_step,
            **self.figures,
        }


@dataclass(frozen=True)
class GrpoSteps(Result):
    """``memory stats --steps --json``: every GRPO step the run logged (``train.step``), in log
    order, and the TRL fields present."""

    run: str
    steps: Sequence[StepRow]
    fields: Sequence[str]

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "steps": [r.to_json() for r in self.steps], "fields": list(self.fields)}
