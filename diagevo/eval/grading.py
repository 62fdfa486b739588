"""Grading one response against a benchmark's gold answer, by the content of its last
``\\boxed{}`` (as the solver prompt asks and the rewards read it):

- ``math``: the answer check the solver reward uses, gold first;
- ``choice``: the boxed content must name one option: a letter of the options (``B``, ``(B)``,
  ``\\text{B}``), one followed by ``.``, ``)`` or ``:`` (``B. 42``), or exactly one option's
  text. Anything else is *unparsable*: graded wrong and counted apart, never guessed;
- ``text`` (BBEH): equal after normalisation (case, spacing, ``\\text{}``, surrounding
  parentheses, end punctuation), or equal as numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.equivalence import agrees
from diagevo.eval.benchmarks import LETTERS, BenchmarkQuestion


@dataclass(frozen=True, slots=True)
class Graded:
    """``answer`` is what was read from the response (None: unparsable)."""

    answer: str | None
    correct: bool


_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textit|operatorname)\s*\{([^{}]*)\}")
_LEAD_LETTER = re.compile(r"([A-Za-z])\s*[.):]")


def _strip_markup(s: str) -> str:
    prev = None
    while prev != s:
        prev, s = s, _TEXT_CMD.sub(r"\1", s)
    s = s.replace("$", "").strip()
    while len(s) >= 2 and s[0] + s[-1] in ("()", "[]", "{}"):
        s = s[1:-1].strip()
    return s


def read_choice(boxed: str | None, options: tuple[str, ...]) -> str | None:
    """The option letter named by a boxed answer, or None (see the module docstring)."""
    if boxed is None:
        return None
    s = _strip_markup(boxed)
    valid = LETTERS[: len(options)]
    if len(s) == 1 and s.upper() in valid:
        return s.upper()
    m = _LEAD_LETTER.match(s)
    if m and m.group(1).upper() in valid:
        return m.group(1).upper()
    folded = _fold(s)
    hits = [LETTERS[j] for j, o in enumerate(options) if _fold(o) == folded]
    return hits[0] if len(hits) == 1 else None


def _fold(s: str) -> str:
    return " ".join(_strip_markup(s).lower().split()).rstrip(".")


def _number(s: str) -> Fraction | None:
    try:
        return Fraction(s.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


def text_equal(answer: str, gold: str) -> bool:
    """BBEH's exact match after normalisation, or numeric equality."""
    a, g = _fold(answer), _fold(gold)
    if a == g:
        return True
    na, ng = _number(a), _number(g)
    return na is not None and na == ng


def grade(question: BenchmarkQuestion, response: str) -> Graded:
    """Read the final answer of ``response`` and compare it with the question's gold."""
    boxed = extract_answer(response)
    if question.grader == "choice":
        letter = read_choice(boxed, question.options)
        return Graded(letter, letter == question.gold)
    if boxed is None:
        return Graded(None, False)
    if question.grader == "text":
        return Graded(boxed, text_equal(boxed, question.gold))
    return Graded(boxed, agrees(boxed, question.gold))  # the gold as math-verify's gold side, as a label is
