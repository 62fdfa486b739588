"""The error-cause memory: pure state, fold, deciders, schedule and sampler (no I/O)."""

from diagevo.memory.deciders import (
    Change,
    DecisionError,
    apply_changes,
    decide_attribution,
    decide_merge,
    decide_new_cause,
    decide_promotions,
    promotion_scores,
)
from diagevo.memory.fold import InvariantError, evolve, fold, fold_until
from diagevo.memory.sampler import GenerationRequest, sample_requests
from diagevo.memory.schedule import Schedule, schedule
from diagevo.memory.state import Cause, CauseState, Memory, Node

__all__ = [
    "Cause",
    "CauseState",
    "Change",
    "DecisionError",
    "GenerationRequest",
    "InvariantError",
    "Memory",
    "Node",
    "Schedule",
    "apply_changes",
    "decide_attribution",
    "decide_merge",
    "decide_new_cause",
    "decide_promotions",
    "evolve",
    "fold",
    "fold_until",
    "promotion_scores",
    "sample_requests",
    "schedule",
]
