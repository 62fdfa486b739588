"""One decision, "this answer agrees with this label", behind the votes, the reference and the reward.

The pairs come from Math-Verify's own test suite (huggingface/Math-Verify, ``tests/test_all.py``:
``test_number_extraction``, ``test_simple_fraction_notation``, ``test_sets_handling``,
``test_latex_notation``, ``test_percent_notation``, ``test_latex_notation_math``,
``test_relations_math``, ``test_complex_math_expressions`` and the numbered issue regressions),
reduced to the final answers a boxed response gives, with Math-Verify's expected verdicts; and
from the answer styles of MATH-500 (``../shared/data/benchmarks/math500.jsonl``).
"""

from __future__ import annotations

import pytest

from diagevo.curriculum.answers import normalize_answer
from diagevo.curriculum.equivalence import agrees
from diagevo.curriculum.votes import votes

# (gold, prediction, Math-Verify's verdict)
MATH_VERIFY_PAIRS = [
    # test_number_extraction
    ("-5", "-5", True),
    ("7425000", "7,425,000", True),
    ("1000", "1000.0", True),
    ("1000.0", "1,000.0", True),
    ("1000.99", "1,000.99", True),
    ("0.4", ".4", True),
    # test_simple_fraction_notation
    ("10/9", "\\frac{10}{9}", True),
    ("-10/9", "-\\frac{10}{9}", True),
    # test_sets_handling
    ("[0,1)", "[0,1)", True),
    ("[0,9)", "[0,1)", False),
    ("(0,9)", "[0,9)", False),
    ("1", "-[0,1)", False),
    # test_latex_notation
    ("1/3", "\\frac13", True),
    ("1", "\\frac3{3}", True),
    ("\\sqrt{3}", "\\sqrt3", True),
    ("1/3", "\\cfrac{1}{3}", True),
    ("1/3", "\\dfrac{1}{3}", True),
    ("1/3", "\\tfrac{1}{3}", True),
    ("1/3", "\\left( \\frac{1}{3} \\right)", True),
    ("1/3", "\\frac{1}{3} \\text{meters}", True),
    ("1/3", "k = \\frac{1}{3}", True),
    # test_percent_notation
    ("28\\%", "28", True),
    ("0.28", "28", False),
    ("28/100", "28", False),
    ("28", "28/100", False),
    ("\\frac{28}{100}", "28", False),
    # test_latex_notation_math
    ("(3, \\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
    ("3\\sqrt{13}", "3\\sqrt{13}", True),
    ("-2,1", "-2,1", True),
    ("(6,31,-1)", "(6,31,-1)", True),
    ("\\sqrt{2}+\\sqrt{5}", "\\sqrt 2+\\sqrt 5", True),
    ("\\frac{9}{4}\\pi", "\\frac94\\pi", True),
    (
        "[-1, -\\frac{1}{2}) \\cup (-\\frac{1}{2}, 0) \\cup (0, 1) \\cup (1, \\infty)",
        "[-1, -\\tfrac12) \\cup (-\\tfrac12, 0) \\cup (0, 1) \\cup (1, \\infty)",
        True,
    ),
    # test_relations_math
    ("x >= 5", "x \\geq 5", True),
    ("x > 5", "x < 5", False),
    ("x \\geq 5", "x \\leq 5", False),
    ("x \\leq 5", "5 \\geq x", True),
    ("x < 1", "-x > -1", True),
    ("x < 1", "x > -1", False),
    ("11", "x=11", True),
    ("k=1", "1", True),
    ("1", "k=1", True),
    ("2x + z = 1", "1", False),
    ("2x+4y-3=0", "y=-\\frac{1}{2}x+\\frac{3}{4}", True),
    # test_complex_math_expressions
    ("(1,\\frac{9}{2})", "(1,4.5)", True),
    ("\\frac{x+2}{7}", "\\frac{x}{7}+\\frac{2}{7}", True),
    ("\\tan^2(y)+1", "\\sec^2(y)", True),
    ("(a+5)(b+2)", "(+5)(b+2)", False),
    ("2", "\\frac{1+\\sqrt{5}}{2}", False),
    ("x+2n+1", "x+1", False),
    # issue regressions #6 (\! not substituted), #8 (commas in large numbers), #9 ({,})
    ("16386.20", "\\$16,\\!386.20", True),
    ("12000023", "12,\\!000,\\!023", True),
    ("14916", "14{,}916", True),
    # test_matrix_extraction
    ("\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix}", "\\begin{pmatrix}1 & 2 \\\\ 3 & 5\\end{pmatrix}", False),
]


@pytest.mark.parametrize(("gold", "pred", "verdict"), MATH_VERIFY_PAIRS)
def test_agrees_matches_math_verify_verdicts(gold: str, pred: str, verdict: bool) -> None:
    assert agrees(pred, gold) is verdict


# Every number MATH-500 writes with thousands separators (problems, solutions, answers), with its value.
MATH500_THOUSANDS = [
    ("1,\\!000,\\!000", "1000000"),
    ("10,\\!000", "10000"),
    ("10,\\!080", "10080"),
    ("11,\\! 111,\\! 111,\\! 100", "11111111100"),
    ("24,\\!000", "24000"),
    ("\\$32,\\!348", "32348"),
    ("729,\\!000", "729000"),
    ("912,\\!673", "912673"),
    ("10{,}080", "10080"),
]


@pytest.mark.parametrize(("written", "plain"), MATH500_THOUSANDS)
def test_math_thousands_separators_are_one_number(written: str, plain: str) -> None:
    assert normalize_answer(written) == plain
    assert agrees(written, plain) and agrees(plain, written)
    v = votes([written, plain, plain, written])
    assert (v.p1, v.p2, len(v.classes)) == (1.0, 0.0, 1)


def test_a_comma_and_a_space_stay_a_list() -> None:
    assert normalize_answer("12, 345") == "12, 345"
    assert not agrees("12, 345", "12345")


def test_the_issue_example_splits_no_more() -> None:
    v = votes(["10,\\!080", "10080", "10080", "10,\\!080"])
    assert (v.p1, v.label) == (1.0, "10080")


def counted_iff_rewarded(answers: list[str | None]) -> None:
    """The invariant: a response is in the label's class exactly when it would be rewarded +1,
    and the reference is the earliest such response."""
    v = votes(answers)
    assert v.label is not None
    counted = set(v.classes[0].indices)
    rewarded = {i for i, a in enumerate(answers) if agrees(a, v.label)}
    assert counted == rewarded
    assert v.p1 == len(rewarded) / len(answers)
    assert v.reference == min(rewarded)


def test_an_answer_counted_for_the_label_is_never_punished() -> None:
    # math-verify's lenient set/relation comparison: 0<x<1 and (0,1) agree whichever is the label
    assert agrees("(0,1)", "0<x<1") and agrees("0<x<1", "(0,1)")
    assert agrees("-2 \\le x \\le 7", "x \\in [-2,7]") and agrees("x \\in [-2,7]", "-2 \\le x \\le 7")
    for answers in (["0<x<1", "0<x<1", "(0,1)"], ["(0,1)", "(0,1)", "0<x<1"]):
        v = votes(answers)
        assert (v.p1, v.label) == (1.0, answers[0])
        assert [1 if agrees(a, v.label) else -1 for a in answers] == [1, 1, 1]
    # an interval and a different one stay apart
    assert not agrees("[0,1)", "0<x<1")


@pytest.mark.parametrize(
    "answers",
    [
        ["0<x<1", "0<x<1", "(0,1)", "(0,1)", "(0,1)"],
        ["(0,1)", "0<x<1", "0<x<1", "0<x<1"],
        ["\\frac{1}{2}", "0.5", "1/2", "\\sqrt{1/4}", "2", None, ""],
        ["x \\leq 5", "5 \\geq x", "x<5", "x \\leq 5"],
        ["28\\%", "28", "0.28", "28"],
    ],
)
def test_counted_iff_rewarded(answers: list[str | None]) -> None:
    counted_iff_rewarded(answers)


def test_a_later_answer_agreeing_with_the_label_moves_to_its_class() -> None:
    # math-verify: 28\% agrees with gold 0.28 and with gold 28, which reject each other. 28\% first
    # joins the class led by 0.28; 28 wins the vote, and 28\% then counts for it.
    answers = ["0.28", "28\\%", "28", "28", "28"]
    v = votes(answers)
    assert (v.label, v.p1, v.p2) == ("28", 4 / 5, 1 / 5)
    assert [c.indices for c in v.classes] == [(1, 2, 3, 4), (0,)]
    counted_iff_rewarded(answers)
