"""``agrees`` on every pair of Math-Verify's own test suite, and the same verdicts at any load.

The 210 pairs (``tests/data/math_verify_pairs.json``) are every parametrized case of
huggingface/Math-Verify ``tests/test_all.py`` (version 0.9.0, MIT licence). Math-Verify reads an
answer anywhere in a free-text response; the project reads only the last ``\\boxed{}``. Each side
is reduced to the answer a boxed response would give: the last box when there is one, else the
content of the last math span (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``), else the whole
text. The misses are by design: prose with no math span (``The final answer is 7.78.``), a
response whose last box is not its answer (``\\boxed{-2} and \\boxed{1}``), pairs that ask
Math-Verify for another rounding (2 places) or for strict set/relation comparison, math spans
broken over lines that Math-Verify refuses on purpose, and ``\\$`` inside a math span.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.equivalence import RESPONSE, EquivalenceChecker, agrees, verdict
from diagevo.curriculum.limits import Limits

PAIRS = json.loads((Path(__file__).parent / "data" / "math_verify_pairs.json").read_text())["pairs"]
_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
TARGET = 190


def final_answer(text: str) -> str | None:
    """The answer a boxed response giving ``text`` would give (see the module docstring)."""
    if "\\boxed" in text:
        return extract_answer(text)
    spans = [next(g for g in m.groups() if g is not None) for m in _MATH.finditer(text)]
    return spans[-1] if spans else text


def verdicts(checker: EquivalenceChecker) -> list[bool]:
    return [agrees(final_answer(p["pred"]), final_answer(p["gold"]), checker) for p in PAIRS]


def test_the_pairs_are_math_verifys_210() -> None:
    assert len(PAIRS) == 210
    assert sum(p["expected"] for p in PAIRS) == 174


@pytest.fixture(scope="module")
def idle() -> tuple[list[bool], dict[str, int]]:
    chk = EquivalenceChecker()
    try:
        return verdicts(chk), chk.stats.snapshot()
    finally:
        chk.close()


def test_agrees_with_math_verify_on_its_own_pairs(idle: tuple[list[bool], dict[str, int]]) -> None:
    got, stats = idle
    matched = sum(g == p["expected"] for g, p in zip(got, PAIRS, strict=True))
    assert matched >= TARGET, f"{matched}/210"
    assert stats["failures"] == 0


def _busy(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


@pytest.mark.slow
@pytest.mark.parametrize("verify_steps", [None, 60_000])
def test_same_verdicts_on_a_saturated_cpu(idle: tuple[list[bool], dict[str, int]], verify_steps: int | None) -> None:
    """Two busy loops take the CPU while the pairs are checked again. With the default budget
    nothing comes near it; with a budget of 60,000 calls per verify several pairs are over it,
    and the same ones are over it idle or loaded (a wall-clock limit would move with the load)."""
    kwargs = {} if verify_steps is None else {"verify_steps": verify_steps}
    if verify_steps is None:
        base, base_stats = idle
    else:
        chk = EquivalenceChecker(**kwargs)
        try:
            base, base_stats = verdicts(chk), chk.stats.snapshot()
        finally:
            chk.close()
        assert base_stats["over_budget"] > 0
    hogs = _busy(2)
    try:
        chk = EquivalenceChecker(**kwargs)
        try:
            loaded, loaded_stats = verdicts(chk), chk.stats.snapshot()
        finally:
            chk.close()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert loaded == base
    assert loaded_stats == base_stats


REWARD_TARGET = 187  # 174 before the worker parsed in two stages, 183 in a child that kept what it met


def test_one_responses_own_limits_check_most_of_the_pairs() -> None:
    """The solver's reward checks each response under :data:`RESPONSE` alone (issue 83), each from
    the worker's warm state (issue 92); here its call budgets without the CPU-time limit, so the
    count is the same at any load. The three pairs left unchecked need more than one response may
    spend (a matrix written as an array, one of cube roots, whose parses take 225,000 and 300,000
    calls, an ellipse whose verify takes 400,000); the benchmark grading checks them under the
    worker's own limits (the test above)."""
    chk = EquivalenceChecker()
    limits = Limits(RESPONSE.parse_steps, RESPONSE.verify_steps, 0.0)
    try:
        got = [verdict(final_answer(p["pred"]), final_answer(p["gold"]), chk, limits) for p in PAIRS]
    finally:
        chk.close()
    matched = sum((g is True) == p["expected"] for g, p in zip(got, PAIRS, strict=True))
    assert matched >= REWARD_TARGET, f"{matched}/210 ({got.count(None)} unchecked)"
