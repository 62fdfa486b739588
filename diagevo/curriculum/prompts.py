"""Challenger and solver prompts (Appendix J), verbatim, and the challenger's output format. The
texts are data, in ``prompts.toml`` beside this module (how the paper's LaTeX became plain text
is said there)."""

from __future__ import annotations

import re
import tomllib
from importlib import resources

from diagevo.memory.sampler import GenerationRequest
from diagevo.text.calls import validated

PROMPTS: dict[str, dict[str, str]] = tomllib.loads(
    resources.files("diagevo.curriculum").joinpath("prompts.toml").read_text(encoding="utf-8")
)
"""The texts (``prompts.toml`` beside this module): the challenger's ``system`` and its user
message per generation mode, the solver's ``system``."""
CHALLENGER_SYSTEM = PROMPTS["challenger"]["system"]
SOLVER_SYSTEM = PROMPTS["solver"]["system"]

_QUESTION = re.compile(r"<question>((?:(?!<question>).)*?)</question>", re.DOTALL)


def _require(value: str | None, field: str, mode: str) -> str:
    if not value:
        raise ValueError(f"a {mode} generation request needs {field}")
    return value


def challenger_user_message(request: GenerationRequest) -> str:
    """The user message of the request's generation mode (Modes 1-3)."""
    if request.mode == "free":
        return PROMPTS["challenger"]["free"]
    node = _require(request.node_label, "node_label", request.mode)
    active = _require(request.active_text, "active_text", request.mode)
    if request.mode == "targeted":
        return PROMPTS["challenger"]["targeted"].format(skill_node=node, error_cause=active)
    if request.mode == "stitched":
        mastered = _require(request.mastered_text, "mastered_text", request.mode)
        return PROMPTS["challenger"]["stitched"].format(skill_node=node, active_cause=active, mastered_cause=mastered)
    raise ValueError(f"unknown generation mode {request.mode!r}")


def reword_messages(question: str) -> list[dict[str, str]]:
    """The challenger's messages asking it to reword ``question`` with its answer unchanged (the
    shared-error check's, beyond the paper): its system message, and ``prompts.toml``'s [reword]."""
    return [
        {"role": "system", "content": CHALLENGER_SYSTEM},
        {"role": "user", "content": PROMPTS["reword"]["user"].format(question=question)},
    ]


def challenger_messages(request: GenerationRequest) -> list[dict[str, str]]:
    """OpenAI chat messages for one challenger generation: the shared system message and the
    mode's user message."""
    return [
        {"role": "system", "content": CHALLENGER_SYSTEM},
        {"role": "user", "content": challenger_user_message(request)},
    ]


@validated
def solver_messages(question: str) -> list[dict[str, str]]:
    """OpenAI chat messages for one solver response (R-Zero's solver prompt)."""
    return [
        {"role": "system", "content": SOLVER_SYSTEM},
        {"role": "user", "content": question},
    ]


@validated
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
