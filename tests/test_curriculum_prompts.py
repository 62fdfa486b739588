"""Appendix J prompts equal the paper's text, and the challenger's output is parsed right.

The expected texts are the paper's LaTeX source, converted here by a tiny independent
converter (paragraph = blank-line separated, \\textit/\\texttt dropped, --- as an em dash).
"""

from __future__ import annotations

import re

import pytest

from diagevo.curriculum.prompts import (
    CHALLENGER_SYSTEM,
    SOLVER_SYSTEM,
    challenger_messages,
    parse_question,
    solver_messages,
)
from diagevo.memory.sampler import FREE, GenerationRequest

SYSTEM_TEX = r"""
You are an expert competition-math problem setter. FIRST, in your private scratch-pad, think step-by-step to design a brand-new, non-trivial problem. The problem could come from any field of mathematics, including but not limited to algebra, geometry, number theory, combinatorics, prealgebra, probability, statistics, and calculus. Aim for a difficulty such that fewer than 30\% of advanced high-school students could solve it. Avoid re-using textbook clich\'es or famous contest problems.

THEN, without revealing any of your private thoughts, output \textit{exactly} the following block:

\texttt{<question>}

\{The full problem statement on one or more lines\}

\texttt{</question>}

Do NOT output anything else---no explanations, no extra markup.
"""  # noqa: E501

FREE_TEX = r"""
Generate one new, challenging reasoning question now. Remember to format the output exactly as instructed.
"""

TARGETED_TEX = r"""
Generate one new, challenging reasoning question now. The question must specifically target the following reasoning weakness observed in the solver's failures:

Knowledge area: \texttt{<skill\_node>}

Weakness to probe: \texttt{<error\_cause>}

Design the question so that correctly solving it requires the solver to overcome this specific weakness. Remember to format the output exactly as instructed.
"""  # noqa: E501

STITCHED_TEX = r"""
Generate one new, challenging reasoning question now. The question must weave together two reasoning elements within the same knowledge area into a single, coherent problem, rather than testing them separately:

Knowledge area: \texttt{<skill\_node>}

Element A (an observed weakness that remains \textit{Active} and should still be challenging): \texttt{<active\_cause>}

Element B (a previously diagnosed weakness for which the solver has reached high self-consistency, as measured by the endogenous consistency proxy; the question should require the corresponding corrective reasoning skill): \texttt{<mastered\_cause>}

Design a single self-contained question that genuinely requires combining both elements to reach the answer---neither element should be solvable in isolation from the other. Remember to format the output exactly as instructed.
"""  # noqa: E501

SOLVER_TEX = r"Please reason step by step, and put your final answer within \verb|\boxed{}|."


def tex_to_text(tex: str, **slots: str) -> str:
    s = tex.strip()
    # runtime fields; <question> / </question> in the system message are literal format tags
    s = re.sub(r"\\texttt\{<([a-z]+\\_[a-z\\_]+)>\}", lambda m: "{" + m.group(1).replace("\\_", "_") + "}", s)
    s = re.sub(r"\\texttt\{(<[^}]*>)\}", r"\1", s)
    s = re.sub(r"\\textit\{([^}]*)\}", r"\1", s)
    s = re.sub(r"\\verb\|([^|]*)\|", r"\1", s)
    s = s.replace("---", "\u2014").replace("\\%", "%").replace("clich\\'es", "clich\u00e9s")
    s = s.replace("\\{", "{").replace("\\}", "}")
    paragraphs = [" ".join(p.split("\n")) for p in re.split(r"\n\s*\n", s)]
    text = "\n\n".join(paragraphs)
    for name, value in slots.items():
        text = text.replace("{" + name + "}", value)
    return text


NODE = "Modular arithmetic and congruences"
ACTIVE = "misapplies Fermat's little theorem when the modulus is not prime {sic}"
MASTERED = "forgets to reduce intermediate powers modulo n before multiplying"


def test_system_message() -> None:
    assert CHALLENGER_SYSTEM == tex_to_text(SYSTEM_TEX)
    assert "Do NOT output anything else\u2014no explanations" in CHALLENGER_SYSTEM
    assert "<question>\n\n{The full problem statement on one or more lines}\n\n</question>" in CHALLENGER_SYSTEM


def test_free() -> None:
    msgs = challenger_messages(FREE)
    assert msgs == [
        {"role": "system", "content": tex_to_text(SYSTEM_TEX)},
        {"role": "user", "content": tex_to_text(FREE_TEX)},
    ]


def test_targeted() -> None:
    req = GenerationRequest(mode="targeted", active_cause="c1", active_text=ACTIVE, node="n1", node_label=NODE)
    msgs = challenger_messages(req)
    assert msgs[0] == {"role": "system", "content": CHALLENGER_SYSTEM}
    assert msgs[1] == {"role": "user", "content": tex_to_text(TARGETED_TEX, skill_node=NODE, error_cause=ACTIVE)}
    assert f"Knowledge area: {NODE}\n\nWeakness to probe: {ACTIVE}\n\n" in msgs[1]["content"]


def test_stitched() -> None:
    req = GenerationRequest(
        mode="stitched",
        active_cause="c1",
        active_text=ACTIVE,
        mastered_cause="c2",
        mastered_text=MASTERED,
        node="n1",
        node_label=NODE,
    )
    user = challenger_messages(req)[1]["content"]
    assert user == tex_to_text(STITCHED_TEX, skill_node=NODE, active_cause=ACTIVE, mastered_cause=MASTERED)
    assert "remains Active and should" in user
    assert "to reach the answer\u2014neither element" in user


@pytest.mark.parametrize(
    "req",
    [
        GenerationRequest(mode="targeted", active_text=ACTIVE),
        GenerationRequest(mode="targeted", node_label=NODE),
        GenerationRequest(mode="stitched", active_text=ACTIVE, node_label=NODE),
    ],
)
def test_incomplete_requests_are_rejected(req: GenerationRequest) -> None:
    with pytest.raises(ValueError):
        challenger_messages(req)


def test_solver_messages() -> None:
    q = "What is $1+1$?"
    assert solver_messages(q) == [
        {"role": "system", "content": tex_to_text(SOLVER_TEX)},
        {"role": "user", "content": q},
    ]
    assert SOLVER_SYSTEM == "Please reason step by step, and put your final answer within \\boxed{}."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<question>\nWhat is 2+2?\n</question>", "What is 2+2?"),
        ("<question>Line one.\n\nLine two: $x^2$.</question>", "Line one.\n\nLine two: $x^2$."),
        ("<question>draft</question> better: <question> final </question> bye", "final"),
        ("<question> a <question> b </question>", "b"),
        ("<question>kept</question> then <question>truncated", "kept"),
        ("<question>   </question>", None),
        ("<question></question>", None),
        ("no tags at all", None),
        ("</question>", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_question(text: str | None, expected: str | None) -> None:
    assert parse_question(text) == expected
