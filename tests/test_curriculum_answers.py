"""Answer extraction, the fast comparison keys, and the budgeted math-verify check."""

from __future__ import annotations

import sys
import threading
import time
from fractions import Fraction

import pytest

from diagevo.curriculum.answers import (
    answer_key,
    extract_answer,
    normalize_answer,
    plausible_final_answer,
    simple_number,
)
from diagevo.curriculum.equivalence import EquivalenceChecker, default_checker
from diagevo.verl import compute_score

# a verify of over 20 s of CPU with no limit; refused by no cheap rule (an exponent under 100, no \lim)
SLOW = "\\sin(x)^{99}-x^{99}"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("so the answer is \\boxed{42}.", "42"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("first \\boxed{1}, finally \\boxed{2}", "2"),
        ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
        ("$\\boxed{x + 1}$", "x + 1"),
        ("\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}"),
        ("\\boxed{ 7 . }", "7"),
        ("\\boxed{\\left( 1,  2 \\right)}", "( 1, 2 )"),
        ("\\boxed 5", "5"),
        ("so $\\boxed 12$.", "12"),
        ("\\boxed{a_{n+1}} = x", "a_{n+1}"),
        ("no box here", None),
        ("", None),
        (None, None),
        ("\\boxed{}", None),
        ("\\boxed{  }", None),
        ("\\boxed{3} then, truncated: \\boxed{\\frac{1}{2", None),
        ("\\boxed5", None),
        ("\\boxedfoo{1}", None),
        ("\\boxed{9} \\boxedfoo{1}", "9"),
    ],
)
def test_extract_answer(response: str | None, expected: str | None) -> None:
    assert extract_answer(response) == expected


def test_normalize_and_key() -> None:
    assert normalize_answer(" $\\displaystyle \\tfrac{1}{3}$ ") == "\\frac{1}{3}"
    assert normalize_answer("x\\,y\\!z") == "x y z"
    # a matrix's row break (two backslashes) is no spacing command: both backslashes stay
    assert normalize_answer("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}") == "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"
    assert answer_key("x + 1") == answer_key("x+1") == "x+1"
    assert answer_key("\\left(1, 2\\right)") == "(1,2)"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("3", Fraction(3)),
        ("-12", Fraction(-12)),
        ("+4", Fraction(4)),
        ("0.25", Fraction(1, 4)),
        (".5", Fraction(1, 2)),
        ("-0.5", Fraction(-1, 2)),
        ("7/2", Fraction(7, 2)),
        ("-6/4", Fraction(-3, 2)),
        ("\\frac{7}{2}", Fraction(7, 2)),
        ("-\\frac{7}{2}", Fraction(-7, 2)),
        ("\\frac{-7}{2}", Fraction(-7, 2)),
        ("\\frac34", Fraction(3, 4)),
        ("1/0", None),
        ("1e999999999", None),
        ("x", None),
        ("\\sqrt{2}", None),
        ("1,000", None),
        ("1" * 41, None),
    ],
)
def test_simple_number(key: str, value: Fraction | None) -> None:
    assert simple_number(key) == value


def test_fast_path_never_starts_a_worker() -> None:
    checker = EquivalenceChecker(command=["/nonexistent/worker"])
    assert checker.equivalent("1/2", "0.5")
    assert checker.equivalent("\\frac{1}{2}", "0.50")
    assert checker.equivalent("x + 1", "x+1")
    assert not checker.equivalent("2", "3")
    assert not checker.equivalent("", "")
    assert checker.stats.fast == 5
    assert checker.stats.starts == 0 and checker.stats.failures == 0


@pytest.fixture(scope="module")
def checker() -> EquivalenceChecker:
    chk = EquivalenceChecker()
    yield chk
    chk.close()


def test_symbolic_equivalence(checker: EquivalenceChecker) -> None:
    # bare \sqrt{2}/2 only parses once wrapped as LaTeX
    assert checker.equivalent("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}")
    assert checker.equivalent("\\frac{1}{\\sqrt{2}}", "\\frac{\\sqrt{2}}{2}")
    assert checker.equivalent("x=3", "3")
    assert not checker.equivalent("\\sqrt{2}", "\\sqrt{3}")
    assert not checker.equivalent("\\pi", "3.14")
    matrix = "\\begin{pmatrix} -1/3 \\\\ 2/3 \\end{pmatrix}"
    assert checker.equivalent(matrix, "\\begin{pmatrix} -\\frac{1}{3} \\\\ \\frac{2}{3} \\end{pmatrix}")
    assert checker.stats.failures == 0
    parses = checker.stats.parses
    assert checker.equivalent("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}")
    assert checker.stats.parses == parses  # parsed answers are cached in the worker


@pytest.mark.parametrize("hostile", ["9^{9^{9^{9}}}", "10^{-10^{10}}", "99999!"])
def test_hostile_value_is_refused_unsent(checker: EquivalenceChecker, hostile: str) -> None:
    """sympy would hang in C on these (no signal reaches it): their values say so, and they are
    different without reaching the worker (the worker's operation limits stay behind the rules:
    ``test_answercheck_bounds.py`` sends them to it)."""
    before, parses = checker.stats.skipped, checker.stats.parses
    assert not checker.equivalent(hostile, "1")
    assert checker.stats.skipped == before + 1 and checker.stats.parses == parses
    assert checker.equivalent("\\sqrt{4}", "2")


def test_hostile_check_is_over_budget(checker: EquivalenceChecker) -> None:
    """A binomial is not read by the rules: the worker's operation limits refuse it before it
    starts, in a few milliseconds, and the worker stays up."""
    before, starts = checker.stats.over_budget, checker.stats.starts
    assert not checker.equivalent("\\binom{10^{9}}{10^{5}}", "1")
    assert checker.stats.over_budget == before + 1
    assert checker.stats.timeouts == 0 and checker.stats.starts == starts
    assert checker.equivalent("\\sqrt{4}", "2")


def test_step_budget_is_counted_in_work() -> None:
    """A verify that needs more Python calls than its budget is refused, whatever the clock says."""
    chk = EquivalenceChecker(verify_steps=1000)
    try:
        assert not chk.equivalent("\\tan^2(y)+1", "\\sec^2(y)")
        assert chk.stats.over_budget == 1 and chk.stats.timeouts == 0
    finally:
        chk.close()
    chk = EquivalenceChecker()
    try:
        assert chk.equivalent("\\tan^2(y)+1", "\\sec^2(y)")
    finally:
        chk.close()


def _fake_worker(body: str) -> list[str]:
    return [sys.executable, "-c", "import sys, time, json\n" + body]


def test_worker_that_raises_counts_errors() -> None:
    chk = EquivalenceChecker(
        timeout_s=2.0,
        command=_fake_worker(
            'print(json.dumps({"ready": True}), flush=True)\n'
            "for line in sys.stdin:\n"
            '    print(json.dumps({"ok": False, "error": "ValueError"}), flush=True)\n'
        ),
    )
    try:
        assert not chk.equivalent("\\sqrt{2}", "\\sqrt{2}/1")
        assert chk.stats.errors == 1 and chk.stats.timeouts == 0
    finally:
        chk.close()


def test_worker_that_never_starts_is_bounded() -> None:
    chk = EquivalenceChecker(start_timeout_s=0.3, command=_fake_worker("time.sleep(60)"))
    chk.retry_after_s = 60.0
    try:
        for _ in range(6):
            assert not chk.equivalent("\\sqrt{2}", "\\sqrt{8}/2")
        # three starts are waited for and time out, then checks fail fast: the worker started
        # again after the third is never waited for (no fifth start, whatever the clock says)
        assert chk.stats.errors == 6
        assert chk.stats.starts == chk.max_start_failures + 1 == 4
    finally:
        chk.close()


def test_missing_worker_binary_does_not_raise() -> None:
    chk = EquivalenceChecker(command=["/nonexistent/worker"])
    assert not chk.equivalent("\\sqrt{2}", "\\sqrt{8}/2")
    assert chk.stats.errors == 1


def test_worker_that_dies_mid_check() -> None:
    chk = EquivalenceChecker(
        timeout_s=2.0,
        command=_fake_worker('print(json.dumps({"ready": True}), flush=True)\nsys.stdin.readline()\nsys.exit(1)\n'),
    )
    try:
        assert not chk.equivalent("\\sqrt{2}", "\\sqrt{8}/2")
        assert chk.stats.errors >= 1
    finally:
        chk.close()


def test_garbage_reply_counts_error() -> None:
    chk = EquivalenceChecker(
        timeout_s=2.0,
        command=_fake_worker(
            'print(json.dumps({"ready": True}), flush=True)\n'
            "for line in sys.stdin:\n"
            "    print('not json', flush=True)\n"
        ),
    )
    try:
        assert not chk.equivalent("\\sqrt{2}", "\\sqrt{8}/2")
        assert chk.stats.errors == 1
    finally:
        chk.close()


def test_long_answers_are_not_sent(checker: EquivalenceChecker) -> None:
    skipped = checker.stats.skipped
    long = "x+" * 2000 + "1"
    assert not checker.equivalent(long, "y")
    assert checker.equivalent(long, long)  # identical strings still agree
    assert checker.stats.skipped == skipped + 1


@pytest.mark.parametrize(
    ("answer", "plausible"),
    [
        ("\\lim_{x\\to 0} \\frac{\\sin(x)^{100}-x^{100}}{x^{102}}", False),
        ("\\int_0^1 x^{1000} e^x dx", False),
        ("\\sum_{k=1}^{n} k", True),  # symbolic bounds: bounded per operation, not refused
        ("\\prod_{k=1}^{n} k", True),
        ("\\sum_{k=1}^{10^{6}} k", False),  # a million terms
        ("\\limsup_{n} a_n", False),
        ("\\sin(x)^{100}-x^{100}", False),
        ("(x+1)^{-120}", False),
        ("x ^ { 1 0 0 }", False),
        ("x+" * 1000 + "1", False),
        ("2^{100}", True),  # a plain number's power: the worker's power limit bounds it
        ("10^{-10^{10}}", False),  # its value has 33 billion bits
        ("x^{99}", True),
        ("\\sqrt{2}/2", True),
        ("\\interval", True),
        ("(0, \\infty)", True),
    ],
)
def test_what_cannot_be_a_final_answer_is_not_checked(answer: str, plausible: bool) -> None:
    assert plausible_final_answer(answer) is plausible


@pytest.mark.parametrize(
    "response",
    ["\\boxed{\\lim_{x\\to 0} \\frac{\\sin(x)^{100}-x^{100}}{x^{102}}}", "\\boxed{\\int_0^1 x^{1000} e^x dx}"],
)
def test_an_answer_of_59_bytes_that_costs_a_minute_is_refused_unchecked(response: str) -> None:
    """The solver's reward of an answer that would be evaluated for a minute: different at once,
    counted as skipped, and nothing sent to math-verify."""
    before = default_checker().stats.snapshot()
    assert compute_score("diagevo/solver", response, "1", {})["score"] == -1.0
    after = default_checker().stats.snapshot()
    assert after["skipped"] == before["skipped"] + 1
    assert (after["parses"], after["verifies"], after["timeouts"]) == (
        before["parses"],
        before["verifies"],
        before["timeouts"],
    )
    assert compute_score("diagevo/solver", response, response[7:-1], {})["score"] == 1.0  # identical still agrees


def test_a_check_over_its_cpu_limit_counts_as_different_and_as_a_timeout() -> None:
    """The work budget counts calls, and this one's calls are long: the CPU-time limit ends the
    worker, the check is different and counted in timeouts, and a new worker takes the next check."""
    chk = EquivalenceChecker()
    try:
        assert not chk.equivalent(SLOW, "0")
        assert chk.stats.timeouts == 1 and chk.stats.over_budget == 0 and chk.stats.errors == 0
        assert chk.equivalent("\\sqrt{4}", "2")
        assert chk.stats.starts == 1  # the worker forked a new child: no second start
    finally:
        chk.close()


def test_a_fast_answer_is_not_queued_behind_a_slow_one() -> None:
    """A fast check submitted while a slow one runs on the pool's first worker is answered by a
    second worker before the slow one ends."""
    chk = EquivalenceChecker(cpu_limit_s=20.0)  # room for a second worker to start on a loaded machine
    done: list[str] = []

    def slow() -> None:
        assert not chk.equivalent(SLOW, "0")
        done.append("slow")

    thread = threading.Thread(target=slow)
    thread.start()
    try:
        while chk.stats.verifies == 0 and thread.is_alive():  # until the slow verify is sent
            time.sleep(0.01)
        assert chk.equivalent("\\frac{1}{\\sqrt{2}}", "\\frac{\\sqrt{2}}{2}")
        done.append("fast")
    finally:
        thread.join()
        chk.close()
    assert done == ["fast", "slow"]
    assert chk.stats.starts >= 2 and chk.stats.timeouts == 1


def test_an_answer_beside_hostile_ones_is_still_checked() -> None:
    """Two checks of ``0`` cut by the CPU-time limit do not leave ``0`` unchecked against the next
    answer: the limit blames the heavier answer of the pair (``\\sin(x)^{99}-x^{99}``), not ``0``."""
    chk = EquivalenceChecker()
    try:
        assert not chk.equivalent(SLOW, "0")
        assert not chk.equivalent(SLOW.replace("x", "y"), "0")
        assert chk.stats.timeouts == 2 and chk.stats.marked == 2
        assert chk.equivalent("\\cos(\\pi/2)", "0")
    finally:
        chk.close()
