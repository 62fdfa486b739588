"""A run's rounds as rows: ``memory stats``, ``memory plot``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from diagevo.results import JsonRow, Result


@dataclass(frozen=True)
class RunStats(Result):
    """``memory stats --json``: one row per committed round (memory sizes, what the round did,
    every metric by name), the metric columns, and metrics of rounds not committed (yet), such as
    round-0 scores of ``eval --run``."""

    run: str
    rounds: Sequence[JsonRow]
    metrics: Sequence[str]
    uncommitted: Sequence[JsonRow]


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
class Lifecycle(Result):
    """``memory plot --json``: the memory's lifecycle, a row per committed round."""

    run: str
    series: Sequence[LifecycleRow]


@dataclass(frozen=True)
class GrpoSteps(Result):
    """``memory stats --steps --json``: every GRPO step the run logged (``train.step``), in log
    order (round, role, step, global step, TRL's fields), and the TRL fields present."""

    run: str
    steps: Sequence[JsonRow]
    fields: Sequence[str]
