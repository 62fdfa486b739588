"""What a round step decided: ``Round.promote``, ``Round.commit``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diagevo.results import Json, Result


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
