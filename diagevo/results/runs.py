"""Runs side by side and forks: ``memory diff``, ``memory fork``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from diagevo.results import Result


@dataclass(frozen=True)
class ScheduleRow:
    """A run's schedule at the round compared (F_t, ε_{t+1}, k), its memory's sizes, and the
    round's held-out accuracy and label figures where its commit has them (None: not measured;
    ``pseudo_label_acc`` is the paper's Figure 3(c) on the shared questions)."""

    round: int
    F: float
    epsilon_next: float
    k: float
    causes: int
    active: int
    mastered: int
    nodes: int
    heldout_acc: float | None = None
    pseudo_label_acc: float | None = None
    retained_label_acc: float | None = None


@dataclass(frozen=True)
class CauseSide:
    """A matched cause as one run holds it: its id there, state, frequency and node."""

    cause_id: str
    state: str
    frequency: int
    node: str | None


@dataclass(frozen=True)
class CauseDiffers:
    """A cause matched in both runs whose state or frequency differ: each run's side, in the
    order of :attr:`RunDiff.runs` (``cause_id`` is ``A/B`` where the ids differ)."""

    cause_id: str
    sides: tuple[CauseSide, CauseSide]
    description: str


@dataclass(frozen=True)
class SameIdDiffers:
    """One id naming a different cause in each run (created after the fork): each description,
    in the order of :attr:`RunDiff.runs`."""

    cause_id: str
    descriptions: tuple[str, str]


@dataclass(frozen=True)
class RunDiff:
    """``memory diff --json``: two runs' memories compared, causes matched by the event that
    created them (after a fork one id may name two causes). ``t`` is the round asked (``None``:
    each run's last committed round)."""

    runs: tuple[str, str]
    t: int | None
    schedule: tuple[ScheduleRow, ScheduleRow]  # in the order of runs
    causes_differing: Sequence[CauseDiffers]
    causes_only_in: Mapping[str, Sequence[str]]
    same_id_differs: Sequence[SameIdDiffers]
    nodes_only_in: Mapping[str, Sequence[str]]
    same_node_id_differs: Sequence[str]

    def to_dict(self) -> dict[str, Any]:
        """The JSON ``memory diff --json`` prints: each run's part under its name."""
        a, b = self.runs
        return {
            "runs": list(self.runs),
            "round": self.t,
            "matched_by": "creating event",
            "schedule": {run: asdict(row) for run, row in zip(self.runs, self.schedule, strict=True)},
            "causes_differing": [
                {"cause_id": c.cause_id, a: asdict(c.sides[0]), b: asdict(c.sides[1]), "description": c.description}
                for c in self.causes_differing
            ],
            "causes_only_in": {run: list(ids) for run, ids in self.causes_only_in.items()},
            "same_id_differs": [
                {"cause_id": c.cause_id, a: c.descriptions[0], b: c.descriptions[1]} for c in self.same_id_differs
            ],
            "nodes_only_in": {run: list(ids) for run, ids in self.nodes_only_in.items()},
            "same_node_id_differs": list(self.same_node_id_differs),
        }


def passed_line(run: str, seq: int, why: str) -> str:
    """The one line every command says of a row of ``run`` it passed over: one the rules refuse
    (the run's admission, :mod:`diagevo.views.admission`), or one a copy of the run left behind."""
    return f"run {run!r}, seq {seq}: passed over: {why}"


@dataclass(frozen=True)
class LeftBehind:
    """A row of the source that a copy of it (a fork, a what-if) left behind although its readers
    take it: the copy's class or the what-if's re-decided memory refuses it (its seq, and why)."""

    seq: int
    why: str


@dataclass(frozen=True)
class Fork(Result):
    """What ``fork_run`` made (``memory fork --json``): the run and committed round it copies,
    that commit's hash and seq (the provenance ``run.forked`` records), the new run, how many
    events it starts with, whether config changes were recorded for it, and the source's rows
    the copy left behind beyond those the rules refuse (the source's admission names those)."""

    source_run: str
    source_round: int
    source_hash: str
    source_seq: int
    run: str
    events: int
    configured: bool
    left_behind: tuple[LeftBehind, ...] = ()
