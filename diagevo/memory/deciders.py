"""Deciders: the paper's rules as pure functions from (memory, evidence) to new events.

Each returns a list of typed events; the caller stamps run, round and event ids and appends
them. Applying them with :func:`diagevo.memory.fold.evolve` gives the new memory.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from fractions import Fraction
from functools import cache
from typing import Literal

from diagevo.catalog import (
    CauseCreated,
    CausePromoted,
    CauseReactivated,
    Event,
    FailureAttributed,
    NodeCreated,
    NodesMerged,
    QuestionGenerated,
    QuestionScored,
    of_type,
)
from diagevo.errors import BadInput
from diagevo.memory.fold import Row, evolve
from diagevo.memory.state import Memory

Change = Event
"""What a decider returns: an event to append."""


class DecisionError(BadInput):
    """A decision names something the memory does not hold (or is otherwise impossible)."""


@cache
def vote_share(p1: float) -> Fraction:
    """``p1`` as the ratio of counts it is (votes / N, N up to 10^6), exactly."""
    return Fraction(p1).limit_denominator(1_000_000)


def promotion_scores(evidence: Iterable[tuple[str | None, float]]) -> dict[str, tuple[Fraction, int]]:
    """Eq. 5: acc_t(e) = mean p1 over P_t(e), the candidates of Q^cur_t whose Active cause is e
    (filtered-out candidates included). ``evidence`` is (active_cause, p1) per scored candidate.

    The mean is exact: p1 values are ratios of counts, and a float sum of fifteen shares whose
    mean is 7/10 comes out at 0.6999999999999998, which Eq. 6 must not read as below 0.70. A
    round's p1 values are few (votes / N), so each distinct one is summed once, times its count."""
    shares: dict[str, Counter[float]] = defaultdict(Counter)
    for cause, p1 in evidence:
        if cause is not None:
            shares[cause][p1] += 1
    out: dict[str, tuple[Fraction, int]] = {}
    for cause in sorted(shares):
        n = sum(shares[cause].values())
        out[cause] = (sum((vote_share(p1) * k for p1, k in shares[cause].items()), Fraction()) / n, n)
    return out


def decide_promotions(
    memory: Memory,
    evidence: Iterable[tuple[str | None, float]],
    theta_up: float,
    *,
    enabled: bool = True,
) -> list[CausePromoted]:
    """Eq. 6: an Active cause with |P_t(e)| > 0 and acc_t(e) >= θ_up becomes (Mastered, 0).

    ``memory`` is M_{t-1} (the state at round start); causes that are not Active there, or
    unknown, are never promoted. ``enabled=False`` is the "no state updates" ablation. The
    comparison is exact, with θ_up read as the decimal it is written as (0.70 = 7/10).
    """
    if not enabled:
        return []
    threshold = Fraction(repr(float(theta_up)))
    out: list[CausePromoted] = []
    for cause_id, (acc, n) in promotion_scores(evidence).items():
        cause = memory.causes.get(cause_id)
        if cause is not None and cause.active and acc >= threshold:
            out.append(CausePromoted(cause_id=cause_id, acc=float(acc), n_candidates=n))
    return out


def decide_attribution(
    memory: Memory,
    failure_id: str,
    cause_id: str,
    via: Literal["recurrence", "dedup"],
    similarity: float | None = None,
) -> list[Change]:
    """Eq. 7: one failure adds one to Δ_t(e). A Mastered cause is reactivated first, so it ends
    the round at (Active, Δ_t(e)); an Active one at (Active, f̃ + Δ_t(e))."""
    cause = memory.causes.get(cause_id)
    if cause is None:
        raise DecisionError(f"unknown cause {cause_id!r}")
    out: list[Change] = []
    if not cause.active:
        out.append(CauseReactivated(cause_id=cause_id, failure_id=failure_id))
    out.append(FailureAttributed(failure_id=failure_id, cause_id=cause_id, via=via, similarity=similarity))
    return out


def decide_new_cause(
    memory: Memory,
    failure_id: str | None,
    description: str,
    *,
    node_id: str | None = None,
    new_node_label: str | None = None,
) -> list[Change]:
    """Stage 3.5 routing: the new cause starts (Active, 1) under an existing node or a new one."""
    if (node_id is None) == (new_node_label is None):
        raise DecisionError("give exactly one of node_id and new_node_label")
    out: list[Change] = []
    if new_node_label is not None:
        node_id = memory.next_node_id()
        out.append(NodeCreated(node_id=node_id, label=new_node_label))
    elif node_id is None or node_id not in memory.nodes:
        raise DecisionError(f"unknown node {node_id!r}")
    cause_id = memory.next_cause_id()
    out.append(CauseCreated(cause_id=cause_id, node_id=node_id, description=description, failure_id=failure_id))
    return out


def decide_merge(
    memory: Memory, survivor: str, absorbed: str, label: str, similarity: float | None = None
) -> list[Change]:
    """Prompt 4 confirmed: re-parent ``absorbed``'s causes under ``survivor`` and relabel it.
    States and frequencies are untouched."""
    for node in (survivor, absorbed):
        if node not in memory.nodes:
            raise DecisionError(f"unknown node {node!r}")
    if survivor == absorbed:
        raise DecisionError("a node cannot be merged with itself")
    return [NodesMerged(survivor=survivor, absorbed=absorbed, label=label, similarity=similarity)]


def apply_changes(memory: Memory, t: int, changes: Iterable[Change]) -> Memory:
    """Convenience for producers that keep a working memory in step with what they append."""
    for event in changes:
        memory = evolve(memory, event, t)
    return memory


def promotion_evidence(rows: Iterable[Row]) -> list[tuple[str | None, float]]:
    """The evidence of Eq. 5 in a round's rows: (active cause, p1) of every candidate of Q^cur_t,
    joining each ``question.generated`` (the cause it targeted) with its ``question.scored``
    (its p1), filtered-out candidates included."""
    active: dict[str, str | None] = {}
    p1: dict[str, float] = {}
    for event in of_type((QuestionGenerated, QuestionScored), rows):
        match event:
            case QuestionGenerated(question_id=qid, active_cause=cause):
                active[qid] = cause
            case QuestionScored(question_id=qid, p1=score):
                p1[qid] = score
    return [(active[q], p1[q]) for q in active if q in p1]
