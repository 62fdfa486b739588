"""The next round's schedule from a committed memory (Eq. 1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from diagevo.memory.state import Memory
from diagevo.text.calls import validated
from diagevo.text.parsing import config_power


@dataclass(frozen=True, slots=True)
class Schedule:
    """ε_{t+1} and p_{t+1}(e) computed from M_t.

    ``round`` is t+1, the round the schedule is for. ``p`` is empty when F_t = 0.
    """

    round: int
    F: int
    F1: int | None
    k: float
    epsilon: float
    p: dict[str, float] = field(default_factory=dict)


@validated
def schedule(memory: Memory) -> Schedule:
    """ε_{t+1} = F_1 / (F_1 + F_t / k), 1 when F_t = 0; p_{t+1}(e) = f_t(e) / F_t over Active causes
    (with ``memory.frequency_power`` q < 1, a departure: f_t(e)^q over their sum, so causes with
    fewer failures are drawn more often than their share of F_t)."""
    F = memory.F
    nxt = memory.committed + 1
    if F == 0:
        return Schedule(round=nxt, F=0, F1=memory.F1, k=memory.k, epsilon=1.0)
    # F1 is fixed at the first commit with F > 0; a mid-round memory may not have it yet, in
    # which case the current F is that reference.
    F1 = memory.F1 if memory.F1 is not None else F
    epsilon = F1 / (F1 + F / memory.k)
    q = config_power(memory.config)
    counted = {c.id: c.frequency for c in memory.causes.values() if c.active and c.frequency > 0}
    weights = counted if q == 1 else {cause: f**q for cause, f in counted.items()}
    total = sum(weights.values())
    p = {cause: w / total for cause, w in weights.items()}
    return Schedule(round=nxt, F=F, F1=F1, k=memory.k, epsilon=epsilon, p=p)
