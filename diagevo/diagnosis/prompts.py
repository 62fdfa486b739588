"""Prompts 1-4 of Appendix J, word for word.

The LaTeX of the paper is converted to the plain text a reader of the PDF sees: ``--`` and
``---`` become en and em dashes, ``\\texttt{<slot>}`` becomes a template slot, math such as
``$\\Delta_t(e)$`` becomes ``Δ_t(e)`` and equation references their numbers. Slots are filled
with :meth:`str.replace` on ``{{slot}}`` markers (never ``str.format``), so braces in a question
or trajectory are data, not template syntax.

Prompt 1's "Known Causes Used for Generation" section (heading, list and its explanatory line) is
left out when the question was freely generated, as the paper's parenthetical asks.
"""

from __future__ import annotations

from collections.abc import Sequence

from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView

Messages = list[dict[str, str]]

EXTRACT_SYSTEM = """\
You are a diagnostician analyzing why a math solver's reasoning went wrong. You will be shown a problem, a working reference answer, and two solving attempts that disagree with each other: one that reaches the reference answer and one that does not. Your job is to locate the exact reasoning step where the two attempts diverge and name the underlying skill deficiency responsible for the divergence.

Do not re-solve the problem yourself, and do not treat the reference answer as ground truth: it was itself produced by majority voting over the solver's own samples and can occasionally be wrong. Your only task is to explain the divergence between the two given attempts, not to adjudicate correctness from outside evidence.

If one or more known causes are supplied below, compare the located divergence with every supplied cause. Select at most one cause whose underlying failure mechanism best explains the earliest divergence. Only if none of the supplied causes matches should you characterize a new one.

EXTRACTION PRINCIPLES:
- Localize the single earliest step at which the two attempts stop agreeing, and diagnose that step specifically—do not summarize the disagreeing attempt's overall approach.
- State the error cause as a general, transferable skill deficiency, phrased as a single verb–object phrase (e.g., “misapplies triangle inequality to algebraic side lengths”), never as a restatement of this problem's specific numbers, entities, or context.
- The description must be 10–20 words. This is a hard constraint, not a suggestion: it will later be embedded and used for cosine-similarity screening before semantic confirmation, so any leftover problem-specific detail, hedge, or explanation will dilute the embedding and silently corrupt every downstream deduplication and routing decision.
- If the two attempts do not actually diverge in reasoning strategy (e.g., the disagreement is a trivial arithmetic or copying slip), report this explicitly rather than forcing an artificial skill label onto a non-skill failure."""  # noqa: E501

EXTRACT_USER = """\
# Problem
{{problem}}

# Working Reference Answer
{{pseudo_label}}

# Attempt That Agrees With the Reference
{{agreeing_response}}

# Attempt That Disagrees With the Reference
{{disagreeing_response}}
{{known_cause_section}}
OUTPUT FORMAT:
Return exactly one JSON object with the following fields.
{
  "matched_cause_id": null,
  "error_cause": null
}
Set matched_cause_id to the exact ID of the single supplied cause that best explains the earliest divergence, or to null if none matches. When matched_cause_id is non-null, set error_cause to null; the pipeline assigns the observation directly to that cause and skips the stages below. When matched_cause_id is null, error_cause must be a new 10–20-word verb–object description unless the failure is unrelated to any identifiable skill, in which case it is also null."""  # noqa: E501

KNOWN_CAUSE_SECTION = """
# Known Causes Used for Generation
{{known_cause_list}}

Each entry contains a cause ID, its current state, and its cause description.
"""

DEDUP_SYSTEM = """\
You are a diagnostician deciding whether a newly identified error cause describes a mistake already recorded in the memory. You will be shown one new error cause and a short list of existing candidates that an embedding search flagged as textually similar to it. Judge duplication by underlying mechanism, not by wording: two causes represent the same error cause if fixing one would also fix the other, even when phrased differently; they are different if a solver could overcome one while still exhibiting the other.

Your decision directly controls the memory's current-episode frequency signal and may reactivate a matched Mastered cause. Frequency determines sampling weights within the Active cause-targeted pool and contributes to the next round's exploration–exploitation ratio: confirming a genuine duplicate adds evidence to an Active cause or starts a reactivated cause at one, while wrongly accepting two distinct failure modes as one would blur the signal used for cause-targeted generation. Err toward keeping mechanistically distinct causes apart whenever the match is not clearly correct."""  # noqa: E501

DEDUP_USER = """\
# New Error Cause
{{new_cause}}

# Candidate Existing Causes
{{candidate_cause_list}}

OUTPUT FORMAT:
Return exactly one of the following valid JSON objects.
{
  "duplicate": true,
  "matched_cause_id": "<matched_cause_id>"
}
or
{
  "duplicate": false,
  "matched_cause_id": null
}
If more than one candidate plausibly matches, select the single closest one. When duplicate is true, the observation is assigned to matched_cause_id and contributes one count to Δ_t(e) in Equation 7; no new cause is created. The joint transition then increments an Active cause or starts a new active episode for a Mastered cause with the matched-failure count as its frequency. When duplicate is false, the new cause proceeds to Stage 3a for node assignment."""  # noqa: E501

ASSIGN_SYSTEM = """\
You are a diagnostician organizing error causes under skill nodes. Each node names a reasoning or knowledge skill that the challenger can target on its own. You will see a new error cause and its top-K most relevant existing skill nodes. Each node is shown with its label and one representative error cause. Base your decision only on this shortlist; do not assume access to the full memory. In a single pass, decide whether the new cause belongs to a listed node or needs a new one. Use the following three criteria:

- Semantic distinctness: is the new cause's underlying skill clearly different from every candidate node's skill, as defined relative to this specific candidate set (this criterion is trivially satisfied when no candidates are shown)?
- Independent actionability: would practicing to fix this cause be a meaningfully different exercise from practicing any candidate node's skill? A node should correspond to one coherent thing the solver can get better at, not a loose bag of unrelated causes.
- Generality and extensibility: if a new node is created, is its label general enough to later host other, distinct error causes that share this skill, rather than merely restating this one instance? A node opened too narrowly will never accumulate enough error causes to reveal a stable pattern for later composite-problem generation."""  # noqa: E501

ASSIGN_USER = """\
# New Error Cause
{{new_cause}}

# Top-K Candidate Skill Nodes
{{candidate_node_list}}

OUTPUT FORMAT:
Return exactly one of the following valid JSON objects.
{
  "create_new_node": true,
  "new_node_label": "<10-20 word verb-object label>",
  "assigned_node": null
}
or
{
  "create_new_node": false,
  "new_node_label": null,
  "assigned_node": "<assigned_node_id>"
}
Exactly one of new_node_label and assigned_node must be non-null. This single pass is the only chance to get the decision right: it is trusted and executed as-is, with no second retrieval or second diagnostician call to verify it, so weigh all three criteria within this one judgment rather than treating creation and assignment as separate questions."""  # noqa: E501

CONSOLIDATE_SYSTEM = """\
You are a diagnostician checking skill nodes for redundancy as the memory grows. Prompt 3 assigns each error cause using only the shortlist available at that time. Nodes created at different times may therefore describe the same skill. Your task is to identify these duplicate nodes. You will see two skill nodes, each with its label and all its error causes. Decide whether they describe the same skill and should be merged, or distinct skills that share similar words. Base your decision on all error causes under both nodes. Similar labels can cover different mistakes, while different labels can cover the same mistake."""  # noqa: E501

CONSOLIDATE_USER = """\
# Skill Node A
{{node_a_label}}: {{node_a_causes}}

# Skill Node B
{{node_b_label}}: {{node_b_causes}}

OUTPUT FORMAT:
Return exactly one of the following valid JSON objects.
{
  "merge": true,
  "merged_label": "<10-20 word verb-object label>"
}
or
{
  "merge": false,
  "merged_label": null
}
The merged label must remain a general, transferable skill description under the same 10–20 word verb–object phrase constraint as any node label, not a concatenation of A's and B's labels. When merge is true, the pipeline relabels the surviving node as merged_label and re-parents every error cause from both A and B under it without an additional cause-level deduplication pass; cross-node duplicate screening has already been applied in Stage 2a. Individual cause states and current-episode frequencies remain unchanged."""  # noqa: E501

# The system message of each prompt identifies its stage (the test server routes on it).
STAGES: dict[str, str] = {
    "extract": EXTRACT_SYSTEM,
    "deduplicate": DEDUP_SYSTEM,
    "assign_node": ASSIGN_SYSTEM,
    "consolidate": CONSOLIDATE_SYSTEM,
}


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


def _messages(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def extract_messages(item: ExtractionInput) -> Messages:
    known = "\n".join(
        f"- ID: {c.id} | State: {c.state.strip().capitalize()} | Cause: {c.description}" for c in item.known
    )
    section = fill(KNOWN_CAUSE_SECTION, known_cause_list=known) if item.known else ""
    user = fill(
        EXTRACT_USER,
        problem=item.question,
        pseudo_label=item.pseudo_label,
        agreeing_response=item.reference,
        disagreeing_response=item.response,
        known_cause_section=section,
    )
    return _messages(EXTRACT_SYSTEM, user)


def dedup_messages(new_cause: str, candidates: Sequence[KnownCause]) -> Messages:
    listed = "\n".join(f"- ID: {c.id} | Cause: {c.description}" for c in candidates)
    return _messages(DEDUP_SYSTEM, fill(DEDUP_USER, new_cause=new_cause, candidate_cause_list=listed))


def assign_messages(new_cause: str, shortlist: Sequence[NodeView]) -> Messages:
    listed = "\n".join(
        f"- ID: {n.id} | Label: {n.label} | Representative error cause: {n.representative}" for n in shortlist
    )
    user = fill(ASSIGN_USER, new_cause=new_cause, candidate_node_list=listed or "(none)")
    return _messages(ASSIGN_SYSTEM, user)


def consolidate_messages(a: NodeView, b: NodeView) -> Messages:
    user = fill(
        CONSOLIDATE_USER,
        node_a_label=a.label,
        node_a_causes=_node_causes(a),
        node_b_label=b.label,
        node_b_causes=_node_causes(b),
    )
    return _messages(CONSOLIDATE_SYSTEM, user)


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
