"""A run's rounds as rows: ``memory stats``, ``memory plot``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from diagevo.results import JsonRow


@dataclass(frozen=True)
class RunStats:
    """``memory stats --json``: one row per committed round (memory sizes, what the round did,
    every metric by name), the metric columns, and metrics of rounds not committed (yet), such as
    round-0 scores of ``eval --run``."""

    run: str
    rounds: Sequence[JsonRow]
    metrics: Sequence[str]
    uncommitted: Sequence[JsonRow]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "rounds": [dict(r) for r in self.rounds],
            "metrics": list(self.metrics),
            "uncommitted": [dict(r) for r in self.uncommitted],
        }


@dataclass(frozen=True)
class Lifecycle:
    """``memory plot --json``: per committed round, Active, Mastered, nodes, F_t and ε_{t+1}."""

    run: str
    series: Sequence[JsonRow]

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "series": [dict(r) for r in self.series]}


@dataclass(frozen=True)
class GrpoSteps:
    """``memory stats --steps --json``: every GRPO step the run logged (``train.step``), in log
    order (round, role, step, global step, TRL's fields), and the TRL fields present."""

    run: str
    steps: Sequence[JsonRow]
    fields: Sequence[str]

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "steps": [dict(r) for r in self.steps], "fields": list(self.fields)}
