"""Runs side by side and forks: ``memory diff``, ``memory fork``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from diagevo.results import JsonRow, Result


@dataclass(frozen=True)
class RunDiff:
    """``memory diff --json``: two runs' memories compared, causes matched by the event that
    created them (after a fork one id may name two causes). ``t`` is the round asked (``None``:
    each run's last committed round)."""

    runs: tuple[str, str]
    t: int | None
    schedule: Mapping[str, JsonRow]  # run -> F_t, ε_{t+1}, k, and the memory's sizes
    causes_differing: Sequence[JsonRow]
    causes_only_in: Mapping[str, Sequence[str]]
    same_id_differs: Sequence[JsonRow]
    nodes_only_in: Mapping[str, Sequence[str]]
    same_node_id_differs: Sequence[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": list(self.runs),
            "round": self.t,
            "matched_by": "creating event",
            "schedule": {run: dict(row) for run, row in self.schedule.items()},
            "causes_differing": [dict(r) for r in self.causes_differing],
            "causes_only_in": {run: list(ids) for run, ids in self.causes_only_in.items()},
            "same_id_differs": [dict(r) for r in self.same_id_differs],
            "nodes_only_in": {run: list(ids) for run, ids in self.nodes_only_in.items()},
            "same_node_id_differs": list(self.same_node_id_differs),
        }


@dataclass(frozen=True)
class Fork(Result):
    """What ``fork_run`` made (``memory fork --json``): the run and committed round it copies,
    that commit's hash and seq (the provenance ``run.forked`` records), the new run, how many
    events it starts with, and whether config changes were recorded for it."""

    source_run: str
    source_round: int
    source_hash: str
    source_seq: int
    run: str
    events: int
    configured: bool
