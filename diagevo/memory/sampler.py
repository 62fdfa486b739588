"""Turn a schedule into generation requests (Eq. 2 and cross-state stitching, Sec. 2.1)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from diagevo.memory.schedule import Schedule
from diagevo.memory.state import Cause, Memory

GenerationMode = Literal["free", "targeted", "stitched"]
Generation = Literal["mixed", "free", "targeted", "fixed"]
Stitching = Literal["same_node", "none", "random_pair"]


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """What the challenger is asked for: free exploration, one Active cause (with its node's
    label), or an Active cause stitched with a Mastered one."""

    mode: GenerationMode
    active_cause: str | None = None
    active_text: str | None = None
    mastered_cause: str | None = None
    mastered_text: str | None = None
    node: str | None = None
    node_label: str | None = None


FREE = GenerationRequest(mode="free")


def _free_probability(schedule: Schedule, generation: Generation, fixed_free_ratio: float) -> float:
    if schedule.F == 0:
        return 1.0  # nothing to target (round 1, or every cause mastered)
    return {
        "mixed": schedule.epsilon,
        "free": 1.0,
        "targeted": 0.0,
        "fixed": fixed_free_ratio,
    }[generation]


def _stitch_partner(memory: Memory, cause: Cause, stitching: Stitching, rng: random.Random) -> Cause | None:
    if stitching == "none":
        return None
    if stitching == "same_node":
        pool = [c for c in memory.causes.values() if c.node == cause.node and not c.active]
    else:  # random_pair: a Mastered cause from anywhere in the memory
        pool = [c for c in memory.causes.values() if not c.active]
    pool.sort(key=lambda c: c.id)
    return rng.choice(pool) if pool else None


def sample_requests(
    memory: Memory,
    schedule: Schedule,
    n: int,
    rng: random.Random,
    *,
    generation: Generation = "mixed",
    fixed_free_ratio: float = 0.5,
    stitching: Stitching = "same_node",
) -> list[GenerationRequest]:
    """Draw ``n`` requests: free with probability ε (or the ablation's), else a cause drawn by
    p(e) = f(e)/F, stitched with a uniformly drawn Mastered partner when one exists."""
    p_free = _free_probability(schedule, generation, fixed_free_ratio)
    ids = sorted(schedule.p)
    weights = [schedule.p[i] for i in ids]
    out: list[GenerationRequest] = []
    for _ in range(n):
        if rng.random() < p_free or not ids:
            out.append(FREE)
            continue
        cause = memory.causes[rng.choices(ids, weights)[0]]
        label = memory.nodes[cause.node].label
        partner = _stitch_partner(memory, cause, stitching, rng)
        out.append(
            GenerationRequest(
                mode="stitched" if partner else "targeted",
                active_cause=cause.id,
                active_text=cause.description,
                mastered_cause=partner.id if partner else None,
                mastered_text=partner.description if partner else None,
                node=cause.node,
                node_label=label,
            )
        )
    return out
