"""Challenger and solver prompts (Appendix J), verbatim, and the challenger's output format.

LaTeX converted to plain text: paragraphs separated by a blank line, ``\\textit``/``\\texttt``
dropped, ``---`` as an em dash, ``\\%``, ``\\{``, ``\\}`` and ``clich\\'es`` as the characters
they typeset, ``<xxx>`` fields as format slots.
"""

from __future__ import annotations

import re

from diagevo.memory.sampler import GenerationRequest

CHALLENGER_SYSTEM = (
    "You are an expert competition-math problem setter. FIRST, in your private scratch-pad, "
    "think step-by-step to design a brand-new, non-trivial problem. The problem could come from "
    "any field of mathematics, including but not limited to algebra, geometry, number theory, "
    "combinatorics, prealgebra, probability, statistics, and calculus. Aim for a difficulty such "
    "that fewer than 30% of advanced high-school students could solve it. Avoid re-using "
    "textbook clich\u00e9s or famous contest problems.\n"
    "\n"
    "THEN, without revealing any of your private thoughts, output exactly the following block:\n"
    "\n"
    "<question>\n"
    "\n"
    "{The full problem statement on one or more lines}\n"
    "\n"
    "</question>\n"
    "\n"
    "Do NOT output anything else\u2014no explanations, no extra markup."
)

FREE_USER = "Generate one new, challenging reasoning question now. Remember to format the output exactly as instructed."

TARGETED_USER = (
    "Generate one new, challenging reasoning question now. The question must specifically target "
    "the following reasoning weakness observed in the solver's failures:\n"
    "\n"
    "Knowledge area: {skill_node}\n"
    "\n"
    "Weakness to probe: {error_cause}\n"
    "\n"
    "Design the question so that correctly solving it requires the solver to overcome this "
    "specific weakness. Remember to format the output exactly as instructed."
)

STITCHED_USER = (
    "Generate one new, challenging reasoning question now. The question must weave together two "
    "reasoning elements within the same knowledge area into a single, coherent problem, rather "
    "than testing them separately:\n"
    "\n"
    "Knowledge area: {skill_node}\n"
    "\n"
    "Element A (an observed weakness that remains Active and should still be challenging): "
    "{active_cause}\n"
    "\n"
    "Element B (a previously diagnosed weakness for which the solver has reached high "
    "self-consistency, as measured by the endogenous consistency proxy; the question should "
    "require the corresponding corrective reasoning skill): {mastered_cause}\n"
    "\n"
    "Design a single self-contained question that genuinely requires combining both elements to "
    "reach the answer\u2014neither element should be solvable in isolation from the other. "
    "Remember to format the output exactly as instructed."
)

SOLVER_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."

_QUESTION = re.compile(r"<question>((?:(?!<question>).)*?)</question>", re.DOTALL)


def _require(value: str | None, field: str, mode: str) -> str:
    if not value:
        raise ValueError(f"a {mode} generation request needs {field}")
    return value


def challenger_user_message(request: GenerationRequest) -> str:
    """The user message of the request's generation mode (Modes 1-3)."""
    if request.mode == "free":
        return FREE_USER
    node = _require(request.node_label, "node_label", request.mode)
    active = _require(request.active_text, "active_text", request.mode)
    if request.mode == "targeted":
        return TARGETED_USER.format(skill_node=node, error_cause=active)
    if request.mode == "stitched":
        mastered = _require(request.mastered_text, "mastered_text", request.mode)
        return STITCHED_USER.format(skill_node=node, active_cause=active, mastered_cause=mastered)
    raise ValueError(f"unknown generation mode {request.mode!r}")


def challenger_messages(request: GenerationRequest) -> list[dict[str, str]]:
    """OpenAI chat messages for one challenger generation: the shared system message and the
    mode's user message."""
    return [
        {"role": "system", "content": CHALLENGER_SYSTEM},
        {"role": "user", "content": challenger_user_message(request)},
    ]


def solver_messages(question: str) -> list[dict[str, str]]:
    """OpenAI chat messages for one solver response (R-Zero's solver prompt)."""
    return [
        {"role": "system", "content": SOLVER_SYSTEM},
        {"role": "user", "content": question},
    ]


def parse_question(text: str | None) -> str | None:
    """The stripped content of the last ``<question>...</question>`` block (may span lines);
    None when there is none or it is blank. A block's content never contains ``<question>``,
    so a stray opening tag before the real one is skipped."""
    if not text:
        return None
    blocks = _QUESTION.findall(text)
    if not blocks:
        return None
    question = blocks[-1].strip()
    return question or None
