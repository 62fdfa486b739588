"""Vote shares, tie-breaks, no-answer responses and the reference trajectory (hand-computed)."""

from __future__ import annotations

import sys

import pytest

from diagevo.curriculum.equivalence import EquivalenceChecker
from diagevo.curriculum.votes import votes

# The fast path must not need math-verify: a checker whose worker cannot start would count an
# error the moment a symbolic check were attempted.
NO_WORKER = [sys.executable, "-c", "raise SystemExit(1)"]


@pytest.fixture
def offline() -> EquivalenceChecker:
    return EquivalenceChecker(command=NO_WORKER)


def test_shares_count_no_answer_responses(offline: EquivalenceChecker) -> None:
    v = votes(["7", None, "7", "3", "", "7", "3", None], checker=offline)
    assert v.n == 8
    assert v.p1 == 3 / 8 and v.p2 == 2 / 8
    assert v.label == "7"
    assert [c.indices for c in v.classes] == [(0, 2, 5), (3, 6)]
    assert v.answered == 5
    assert v.reference == 0
    assert offline.stats.failures == 0 and offline.stats.starts == 0


def test_issue_examples(offline: EquivalenceChecker) -> None:
    six_three_three = ["1"] * 6 + ["2"] * 3 + ["3"] * 3
    v = votes(six_three_three, checker=offline)
    assert (v.p1, v.p2, v.label) == (0.5, 0.25, "1")
    five_four_three = ["2"] * 4 + ["1"] * 5 + ["3"] * 3
    v = votes(five_four_three, checker=offline)
    assert (v.p1, v.p2, v.label) == (5 / 12, 4 / 12, "1")
    assert v.reference == 4


def test_single_class_has_p2_zero(offline: EquivalenceChecker) -> None:
    v = votes(["4", None, "4"], checker=offline)
    assert (v.p1, v.p2, v.label) == (2 / 3, 0.0, "4")


def test_tie_break_larger_then_earliest(offline: EquivalenceChecker) -> None:
    v = votes(["5", "9", "9", "5", "1", "1"], checker=offline)
    assert (v.p1, v.p2) == (2 / 6, 2 / 6)
    assert v.label == "5"  # three tied classes: "5" occurs first
    assert [c.answer for c in v.classes] == ["5", "9", "1"]
    v = votes([None, "9", "5", "5", "9"], checker=offline)
    assert v.label == "9" and v.reference == 1


def test_tie_break_does_not_depend_on_later_members(offline: EquivalenceChecker) -> None:
    # "2" is ahead at index 0; "1" catches up later but was first seen at index 1
    v = votes(["2", "1", "1", "2"], checker=offline)
    assert v.label == "2"
    assert v.classes[1].answer == "1"


def test_no_answers(offline: EquivalenceChecker) -> None:
    v = votes([None, None, " "], checker=offline)
    assert (v.p1, v.p2, v.label, v.classes, v.n) == (0.0, 0.0, None, (), 3)
    assert v.reference is None
    v = votes([], checker=offline)
    assert (v.p1, v.p2, v.label, v.n) == (0.0, 0.0, None, 0)


def test_rational_forms_merge_without_math_verify(offline: EquivalenceChecker) -> None:
    v = votes(["0.5", "3", "1/2", "\\frac{1}{2}", "x + 1", "x+1", "-\\frac{2}{4}"], checker=offline)
    assert v.label == "0.5"
    assert v.classes[0].indices == (0, 2, 3)
    assert [c.indices for c in v.classes] == [(0, 2, 3), (4, 5), (1,), (6,)]
    assert v.p1 == 3 / 7 and v.p2 == 2 / 7
    # no symbolic check was needed: all keys are rationals or identical strings... except x+1,
    # which is compared against the rationals' classes and counts as different when no worker
    assert offline.stats.timeouts == 0


def test_pure_rationals_never_call_math_verify(offline: EquivalenceChecker) -> None:
    votes(["12", "12", "7", "3/4", "0.75", None, "12", "-1", "5"], checker=offline)
    assert offline.stats.starts == 0 and offline.stats.errors == 0 and offline.stats.parses == 0


@pytest.fixture(scope="module")
def checker() -> EquivalenceChecker:
    chk = EquivalenceChecker()
    yield chk
    chk.close()


def test_symbolic_classes_are_unioned(checker: EquivalenceChecker) -> None:
    answers = ["\\sqrt{2}/2", "1", "\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", None, "2/2", "\\sqrt{4}"]
    v = votes(answers, checker=checker)
    assert [c.indices for c in v.classes] == [(0, 2, 3), (1, 5), (6,)]
    assert v.label == "\\sqrt{2}/2" and v.p1 == 3 / 7 and v.p2 == 2 / 7
    assert v.reference == 0
    assert checker.stats.failures == 0


def test_symbolic_join_with_rationals(checker: EquivalenceChecker) -> None:
    v = votes(["2", "\\sqrt{4}", "3", "\\frac{4}{2}"], checker=checker)
    assert [c.indices for c in v.classes] == [(0, 1, 3), (2,)]


def test_hanging_answer_stays_apart_and_is_counted(checker: EquivalenceChecker) -> None:
    """9^(9^(9^9)) would hang sympy: refused by its value, unsent, and counted."""
    before, parses = checker.stats.skipped, checker.stats.parses
    v = votes(["9^{9^{9^{9}}}", "1", "1", "9^{9^{9^{9}}}"], checker=checker)
    assert [c.indices for c in v.classes] == [(0, 3), (1, 2)]
    assert v.label == "9^{9^{9^{9}}}"
    assert checker.stats.skipped == before + 1 and checker.stats.parses == parses


def test_budget_skips_symbolic_checks() -> None:
    chk = EquivalenceChecker(command=NO_WORKER)
    v = votes(["\\sqrt{4}", "2", "\\sqrt{4}"], checker=chk, max_checks=0)
    assert [c.indices for c in v.classes] == [(0, 2), (1,)]
    assert chk.stats.skipped == 1 and chk.stats.starts == 0


def test_the_reference_is_the_earliest_response_agreeing_with_the_label(offline: EquivalenceChecker) -> None:
    answers = [None, "3", "0.5", "3", "1/2"]
    v = votes(answers, checker=offline)  # tie 2/2: "3" occurs first
    assert (v.label, v.reference) == ("3", 1)
    v = votes(answers + ["0.50"], checker=offline)  # "0.5", "1/2", "0.50" agree by value
    assert (v.label, v.reference) == ("0.5", 2)
    assert votes([None, None], checker=offline).reference is None


def test_solver_answers_that_cost_a_minute_stay_apart_unchecked(offline: EquivalenceChecker) -> None:
    """The challenger's reward votes over the solver's answers: one that would be evaluated for a
    minute forms its own class without a symbolic check (the offline worker would count an error)."""
    lim = "\\lim_{x\\to 0} \\frac{\\sin(x)^{100}-x^{100}}{x^{102}}"
    v = votes([lim, "1", "1", lim], checker=offline)
    assert [c.indices for c in v.classes] == [(0, 3), (1, 2)]
    assert offline.stats.skipped == 1
    assert offline.stats.starts == 0 and offline.stats.errors == 0 and offline.stats.parses == 0
