"""Prompts 1-4 of Appendix J, word for word: the texts are data, in ``prompts.toml`` beside this
module (how the paper's LaTeX became plain text is said there). Slots are filled on ``{{slot}}``
markers in one pass (never ``str.format``), so braces in a question or trajectory are data, not
template syntax.

Prompt 1's "Known Causes Used for Generation" section (heading, list and its explanatory line) is
left out when the question was freely generated, as the paper's parenthetical asks.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from importlib import resources

from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView

Messages = list[dict[str, str]]

PROMPTS: dict[str, dict[str, str]] = tomllib.loads(
    resources.files("diagevo.diagnosis").joinpath("prompts.toml").read_text(encoding="utf-8")
)
"""Each stage's texts (``prompts.toml`` beside this module): ``system``, ``user`` and, for Prompt
1, ``known_cause_section``."""

# The system message of each prompt identifies its stage (the test server routes on it).
STAGES: dict[str, str] = {stage: texts["system"] for stage, texts in PROMPTS.items()}


def fill(template: str, **slots: str) -> str:
    """Replace ``{{name}}`` markers in one pass, so slot values are never scanned for markers."""
    out: list[str] = []
    rest = template
    while True:
        start = rest.find("{{")
        if start < 0:
            out.append(rest)
            return "".join(out)
        end = rest.find("}}", start)
        name = rest[start + 2 : end]
        if end < 0 or name not in slots:
            raise KeyError(f"template slot {name!r} not supplied")
        out.append(rest[:start])
        out.append(slots[name])
        rest = rest[end + 2 :]


def _messages(stage: str, **slots: str) -> Messages:
    """The stage's system message, then its user message with ``slots`` filled in."""
    return [
        {"role": "system", "content": STAGES[stage]},
        {"role": "user", "content": fill(PROMPTS[stage]["user"], **slots)},
    ]


def extract_messages(item: ExtractionInput) -> Messages:
    known = "\n".join(
        f"- ID: {c.id} | State: {c.state.strip().capitalize()} | Cause: {c.description}" for c in item.known
    )
    return _messages(
        "extract",
        problem=item.question,
        pseudo_label=item.pseudo_label,
        agreeing_response=item.reference,
        disagreeing_response=item.response,
        known_cause_section=fill(PROMPTS["extract"]["known_cause_section"], known_cause_list=known)
        if item.known
        else "",
    )


def dedup_messages(new_cause: str, candidates: Sequence[KnownCause]) -> Messages:
    listed = "\n".join(f"- ID: {c.id} | Cause: {c.description}" for c in candidates)
    return _messages("deduplicate", new_cause=new_cause, candidate_cause_list=listed)


def assign_messages(new_cause: str, shortlist: Sequence[NodeView]) -> Messages:
    listed = "\n".join(
        f"- ID: {n.id} | Label: {n.label} | Representative error cause: {n.representative}" for n in shortlist
    )
    return _messages("assign_node", new_cause=new_cause, candidate_node_list=listed or "(none)")


def consolidate_messages(a: NodeView, b: NodeView) -> Messages:
    return _messages(
        "consolidate",
        node_a_label=a.label,
        node_a_causes=_node_causes(a),
        node_b_label=b.label,
        node_b_causes=_node_causes(b),
    )


def _node_causes(node: NodeView) -> str:
    return "".join(f"\n- {c}" for c in node.causes) if node.causes else "(no error causes)"


def reask_message(violation: str) -> dict[str, str]:
    """The one follow-up turn after an invalid reply: it states what was wrong."""
    return {
        "role": "user",
        "content": (
            f"Your reply was not valid: {violation}. "
            "Return exactly one JSON object in the OUTPUT FORMAT given above, with no other text."
        ),
    }
