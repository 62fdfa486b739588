"""The memory routing of Sec. 2.3 (Appendix J), stage by stage, as pure functions.

Each stage takes the memory, what the vector index looked up and the diagnostician's reply,
and returns a decision: the memory changes to append (:mod:`diagevo.memory.deciders`), the
failure's outcome for the round summary, or why the reply is refused. Nothing here calls a
model, reads the log or appends to it; :mod:`diagevo.diagnosis.pipeline` does, in this order:

* Prompt 1 for every failure -> :func:`check_extraction`; a match with a supplied cause ->
  :func:`recurrence`; neither a match nor a cause -> a non-skill slip, nothing more;
* a new cause: stage 2a screening against every stored cause (θ_dup, ``VectorIndex.screen``)
  -> :func:`known_causes` -> Prompt 2 when some candidate passed -> :func:`after_dedup`
  (a confirmed duplicate is attributed; otherwise on to stage 3a);
* stage 3a: the node shortlist (top K by best member similarity, ``VectorIndex.node_shortlist``)
  -> :func:`shortlist_views` -> Prompt 3 -> stage 3.5 :func:`route_assignment`;
* after all failures, stage 4a: :func:`node_pairs` (θ_merge on label embeddings) -> for each
  pair still open (:func:`pair_open`) Prompt 4 on :func:`node_view` -> :func:`after_consolidation`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from diagevo.diagnosis.interface import Assignment, Consolidation, Dedup, Extraction, KnownCause, NodeView
from diagevo.diagnosis.parsing import phrase_problem
from diagevo.memory.deciders import Change, DecisionError, decide_attribution, decide_merge, decide_new_cause
from diagevo.memory.state import Memory
from diagevo.text.parsing import quoted

PAIR_BLOCK = 512  # rows of the node-similarity matrix computed at a time (stage 4a)


@dataclass(frozen=True, slots=True)
class ReplyRefusal:
    """A reply that decides nothing: recorded as ``diagnosis.failed`` at ``stage``."""

    stage: str  # extract | deduplicate | assign_node | route | consolidate
    reason: str


@dataclass(frozen=True, slots=True)
class Routed:
    """A decision: the memory changes, in order, and the outcome the round summary lists
    (``{"outcome": "duplicate", "cause": "C3", "similarity": 0.71}``, ...)."""

    changes: tuple[Change, ...] = ()
    outcome: dict[str, Any] = field(default_factory=dict)


Decision = Routed | ReplyRefusal


def known_causes(memory: Memory, ids: Sequence[str]) -> tuple[KnownCause, ...]:
    """Causes as the diagnostician is shown them: id, state, description."""
    return tuple(KnownCause(cid, memory.causes[cid].state.value, memory.causes[cid].description) for cid in ids)


# --- Prompt 1 ---------------------------------------------------------------------------------


def check_extraction(
    value: Extraction | None, error: str | None, supplied: Collection[str]
) -> Extraction | ReplyRefusal:
    """Prompt 1's reply, if it names only a cause that was supplied (the known causes of the
    failure's question); ``error`` says why there is no reply."""
    if value is None:
        return ReplyRefusal("extract", error or "no decision")
    if value.matched_cause_id is not None and value.matched_cause_id not in supplied:
        return ReplyRefusal("extract", f"matched_cause_id {quoted(value.matched_cause_id)} was not supplied")
    too_long = phrase_problem("error_cause", value.error_cause) if value.error_cause is not None else None
    return value if too_long is None else ReplyRefusal("extract", too_long)


def _decided(outcome: dict[str, Any], decide: Callable[..., list[Change]], *args: Any, **kwargs: Any) -> Decision:
    """The changes ``decide`` makes of the memory, with ``outcome``; a refusal at ``route`` when
    the memory does not take them."""
    try:
        changes = decide(*args, **kwargs)
    except DecisionError as exc:
        return ReplyRefusal("route", str(exc))
    return Routed(tuple(changes), outcome)


def recurrence(memory: Memory, failure_id: str, cause_id: str) -> Decision:
    """A confirmed match with a supplied cause counts one failure for it (Eq. 7)."""
    outcome = {"outcome": "recurrence", "cause": cause_id}
    return _decided(outcome, decide_attribution, memory, failure_id, cause_id, "recurrence")


# --- stage 2a and Prompt 2 --------------------------------------------------------------------


def after_dedup(
    memory: Memory, failure_id: str, screened: Sequence[tuple[str, float]], value: Dedup | None, error: str | None
) -> Decision | None:
    """Prompt 2's reply: a confirmed duplicate of a screened cause is attributed to it, with its
    similarity; None when it is no duplicate (the new cause goes on to stage 3a)."""
    if value is None:
        return ReplyRefusal("deduplicate", error or "no decision")
    if not value.duplicate:
        return None
    sim_of = dict(screened)
    if value.matched_cause_id not in sim_of:
        return ReplyRefusal(
            "deduplicate", f"matched_cause_id {quoted(value.matched_cause_id)} was not among the candidates"
        )
    cause_id = value.matched_cause_id
    sim = round(sim_of[cause_id], 6)
    outcome = {"outcome": "duplicate", "cause": cause_id, "similarity": sim}
    return _decided(outcome, decide_attribution, memory, failure_id, cause_id, "dedup", similarity=sim)


# --- stage 3a, Prompt 3 and stage 3.5 ---------------------------------------------------------


def shortlist_views(memory: Memory, shortlist: Sequence[tuple[str, float, str | None]]) -> tuple[NodeView, ...]:
    """What Prompt 3 is shown: each shortlisted node (``(node_id, score, best_member)``) with its
    label and its member most similar to the new cause."""
    return tuple(
        NodeView(nid, memory.nodes[nid].label, (memory.causes[best].description,) if best else ())
        for nid, _score, best in shortlist
    )


def route_assignment(
    memory: Memory,
    failure_id: str,
    description: str,
    views: Sequence[NodeView],
    value: Assignment | None,
    error: str | None,
) -> Decision:
    """Stage 3.5, in code: Prompt 3's choice creates the new cause (Active, 1) under a new node
    or under a node of the shortlist it was shown."""
    if value is None:
        return ReplyRefusal("assign_node", error or "no decision")
    too_long = phrase_problem("new_node_label", value.new_node_label) if value.new_node_label is not None else None
    if too_long is not None:
        return ReplyRefusal("assign_node", too_long)
    if value.new_node_label is not None:
        label = value.new_node_label
        return _decided(
            {"outcome": "new_node"}, decide_new_cause, memory, failure_id, description, new_node_label=label
        )
    if value.assigned_node not in {v.id for v in views}:
        return ReplyRefusal("assign_node", f"assigned_node {quoted(value.assigned_node)} was not on the shortlist")
    node = value.assigned_node
    return _decided({"outcome": "existing_node"}, decide_new_cause, memory, failure_id, description, node_id=node)


# --- stage 4a and Prompt 4 --------------------------------------------------------------------


def node_pairs(ids: Sequence[str], vecs: np.ndarray, theta_merge: float) -> list[tuple[float, str, str]]:
    """Stage 4a: node pairs whose label similarity is at least θ_merge, best first, then by node
    age (``ids`` in creation order, ``vecs`` their unit label vectors). Similarities are float64
    products rounded to 1e-6, so every run finds the same pairs."""
    exact = np.asarray(vecs).astype(np.float64)
    pairs: list[tuple[float, int, int]] = []
    for start in range(0, len(ids), PAIR_BLOCK):
        block = np.round(exact[start : start + PAIR_BLOCK] @ exact.T, 6)
        for r, row in enumerate(block):
            i = start + r
            for j in np.flatnonzero(row[i + 1 :] >= theta_merge) + i + 1:
                pairs.append((float(row[j]), i, int(j)))
    pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
    return [(s, ids[i], ids[j]) for s, i, j in pairs]


def pair_open(memory: Memory, a: str, b: str, absorbed: Collection[str]) -> bool:
    """Whether Prompt 4 is asked about (a, b): both nodes exist and neither was absorbed this
    round (a node merged away is not merged again)."""
    return a not in absorbed and b not in absorbed and a in memory.nodes and b in memory.nodes


def node_view(memory: Memory, node_id: str) -> NodeView:
    """A node as Prompt 4 is shown it: its label and all its causes."""
    return NodeView(node_id, memory.nodes[node_id].label, tuple(c.description for c in memory.members(node_id)))


def after_consolidation(
    memory: Memory, a: str, b: str, similarity: float, value: Consolidation | None, error: str | None
) -> Decision:
    """Prompt 4's reply on the pair (a, b), ``a`` the older node: a merge keeps ``a``, relabelled,
    and re-parents ``b``'s causes under it; a refusal changes nothing."""
    if value is None:
        return ReplyRefusal("consolidate", f"nodes {a} and {b}: {error or 'no decision'}")
    if not value.merge:
        return Routed(outcome={"outcome": "distinct"})
    if value.merged_label is None:  # the parser refuses this; a diagnostician in code could send it
        return ReplyRefusal("consolidate", f"nodes {a} and {b}: merge is true but merged_label is null")
    too_long = phrase_problem("merged_label", value.merged_label)
    if too_long is not None:
        return ReplyRefusal("consolidate", f"nodes {a} and {b}: {too_long}")
    changes = decide_merge(memory, a, b, value.merged_label, similarity=similarity)
    return Routed(tuple(changes), {"outcome": "merged"})
