"""The typed results of the public API: what a read command or a round step returns.

Each result has attributes for a Python caller and ``to_dict()`` for JSON: ``to_dict()`` gives
exactly what the matching ``--json`` command prints (its keys in that order: a JSON document, typed
as such), so the CLI formats these values and computes nothing of its own. The rows whose columns
depend on the run (a metric per name, a cause's timeline of events) stay JSON values
(:data:`Json`): their columns are data, not fields.

The families, in order: M_t as data (``memory replay``, ``memory show``); a run's rounds as rows
(``memory stats``, ``memory plot``); one cause's story (``memory why``); runs side by side and
forks (``memory diff``, ``memory fork``); what a round step decided (``Round.promote``,
``Round.commit``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeAlias

Json: TypeAlias = "str | int | float | bool | None | Sequence[Json] | Mapping[str, Json]"
"""A JSON value: what a row of a run-dependent table holds (read-only containers, so that a
``dict[str, float]`` is one)."""

JsonRow: TypeAlias = "Mapping[str, Json]"


class Result:
    """A result whose ``to_dict()`` is its fields, in order, as JSON (a dataclass's)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class CauseRow:
    """One cause of a memory: its node, description, state (``active``/``mastered``) and f(e)."""

    cause_id: str
    node: str
    description: str
    state: str
    frequency: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.cause_id,
            "node": self.node,
            "description": self.description,
            "state": self.state,
            "frequency": self.frequency,
        }


@dataclass(frozen=True)
class NodeRow:
    """One skill node: its label and the ids of its causes."""

    node_id: str
    label: str
    causes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.node_id, "label": self.label, "causes": list(self.causes)}


@dataclass(frozen=True)
class MemoryView:
    """M_t as data (``memory replay --json``): its causes and nodes, F_t, F_1, k, and the
    schedule it leaves for the next round (ε_{t+1}, p_{t+1}(e) by cause id)."""

    run: str
    t: int
    F: int
    F1: int | None
    k: float
    epsilon_next: float
    p_next: Mapping[str, float]
    causes: tuple[CauseRow, ...]
    nodes: tuple[NodeRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "round": self.t,
            "F": self.F,
            "F1": self.F1,
            "k": self.k,
            "epsilon_next": self.epsilon_next,
            "p_next": dict(self.p_next),
            "causes": [c.to_dict() for c in self.causes],
            "nodes": [n.to_dict() for n in self.nodes],
        }


@dataclass(frozen=True)
class CurrentMemory(MemoryView):
    """The memory after the run's last event (``memory show --json``): a :class:`MemoryView`
    and the round still open, if any."""

    open_round: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "open_round": self.open_round}


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
class Lifecycle(Result):
    """``memory plot --json``: per committed round, Active, Mastered, nodes, F_t and ε_{t+1}."""

    run: str
    series: Sequence[JsonRow]


@dataclass(frozen=True)
class GrpoSteps(Result):
    """``memory stats --steps --json``: every GRPO step the run logged (``train.step``), in log
    order (round, role, step, global step, TRL's fields), and the TRL fields present."""

    run: str
    steps: Sequence[JsonRow]
    fields: Sequence[str]


@dataclass(frozen=True)
class CauseStory:
    """``memory why --json``: one cause's description and node and its timeline (creation,
    attributions with their failures, promotions, reactivations, merges) in log order;
    ``attributions`` counts them all, ``more_attributions`` those left out of ``timeline``."""

    run: str
    cause_id: str
    story: JsonRow  # the cause's fields as the log holds them, ``timeline`` included
    attributions: int
    more_attributions: int

    @property
    def timeline(self) -> list[JsonRow]:
        entries = self.story.get("timeline")
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            **self.story,
            "attributions": self.attributions,
            "more_attributions": self.more_attributions,
        }


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


@dataclass(frozen=True)
class Promotion(Result):
    """One decision of Eq. 5-6: a cause promoted to Mastered, its accuracy ``acc`` over
    ``n_candidates`` questions (a reactivation is decided by a failure, in the diagnosis)."""

    cause_id: str
    acc: float
    n_candidates: int


@dataclass(frozen=True)
class Committed:
    """What ``Round.commit`` recorded in ``round.committed``: the round's counts (as ``memory
    stats`` counts them), how many ranks recorded metrics, F_t and ε_{t+1}, and the trainer's
    own ``summary``."""

    t: int
    counts: Mapping[str, int]
    F: int
    epsilon_next: float
    ranks: int | None = None
    summary: Mapping[str, Json] = field(default_factory=dict)

    @property
    def questions(self) -> int:
        return self.counts.get("questions", 0)

    @property
    def retained(self) -> int:
        return self.counts.get("retained", 0)

    @property
    def failures(self) -> int:
        return self.counts.get("failures", 0)

    def to_dict(self) -> dict[str, Any]:
        """The ``round.committed`` event's data, in its order."""
        out: dict[str, Any] = dict(self.counts)
        if self.ranks is not None:
            out["ranks"] = self.ranks
        out.update(F=self.F, epsilon_next=self.epsilon_next, **self.summary)
        return out
