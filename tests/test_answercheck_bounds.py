"""The answer check bounded per batch (issue 74): rules that read values, answers over a limit
marked once, and CPU budgets for a question's votes and for a batch of checks.

Counts, never seconds: a fake worker reports a fixed CPU cost for each operation, so the
budgets' effect is computed by hand; the real worker is used only where the fork server itself
is under test, with a CPU limit of half a second."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from diagevo.curriculum.answers import normalize_answer, plausible_final_answer
from diagevo.curriculum.costs import number, refusal
from diagevo.curriculum.equivalence import RESPONSE, CheckStats, EquivalenceChecker, agrees, verdict
from diagevo.curriculum.votes import votes
from tests.shared import BENCHMARKS

WORKER = Path(__file__).resolve().parents[1] / "diagevo" / "curriculum" / "mathverify_worker.py"
SLOW = "\\sin(x)^{99}-x^{99}"  # passes every rule; its check runs past any CPU limit


@pytest.mark.parametrize(
    ("text", "value"),
    [("(100)", 100), ("{{100}}", 100), ("5\\cdot 20", 100), ("2^{7}", 128), ("-(3+4)\\times 2", -14), ("4!", 24)],
)
def test_the_evaluator_reads_values(text: str, value: int) -> None:
    num = number(text)
    assert num is not None and num.exact == value


@pytest.mark.parametrize("text", ["n-1", "\\pi", "1/2", "x^{2}", ""])
def test_what_is_not_integer_arithmetic_has_no_value(text: str) -> None:
    assert number(text) is None


def test_a_huge_value_is_a_size_not_a_number() -> None:
    """(2^524287 + 1)^2 has 2 x 524,288 bits; it is never computed."""
    num = number("(2^{524287}+1)^{2}")
    assert num is not None and num.exact is None and num.bits == 1_048_576


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("x^{(100)}", "exponent of 100"),
        ("x^{{100}}", "exponent of 100"),
        ("x^{5\\cdot 20}", "exponent of 100"),
        ("x^{2^{7}}", "exponent of 100"),
        ("(\\sin(x)^{(100)}-x^{(100)})^{2}", "exponent of 100"),
        ("10000!" * 8, "factorials of 80000"),
        ("(2^{524287}+1)^{2}", "524287 bits"),
        ("(x+y+z+w+v)^{(99)}", "expands to 4421275 terms"),  # C(103, 4)
        ("\\frac{d^{99}}{dx^{99}} \\tan(x)", "derivative"),
        ("\\sqrt{" * 200 + "2" + "}" * 200, "nested 200 deep"),
        ("\\sum_{k=1}^{10^{6}} k", "sum or product"),
        ("\\lim_{x\\to 0} x", "limit"),
    ],
)
def test_each_form_that_passed_the_spelling_rules_is_refused_by_value(answer: str, why: str) -> None:
    reason = refusal(answer)
    assert reason is not None and why in reason
    assert not plausible_final_answer(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "F_n = \\sum_{k=0}^{n-1} F_k F_{n-k-1}",  # in math-verify's own suite
        "\\sum_{k=1}^{150} k",  # 150 terms, and 150 is a bound, not an exponent
        "\\prod^{n}_{k=1} k",
        "x^{99}",
        "(x+1)^{99}",  # 100 terms
        "(a+b+c+d)^{30}",  # C(33, 3) = 5456 terms
        "\\frac{1}{2004!}",
        "2^{2^{2^{2^{2}}}}",  # 65,536 bits: the largest power let through
        "90^\\circ",
        "x != 3",
    ],
)
def test_what_can_be_bounded_is_checked(answer: str) -> None:
    assert refusal(answer) is None


@pytest.mark.skipif(not BENCHMARKS.is_dir(), reason="the shared benchmark files are not here")
def test_no_benchmark_answer_is_refused() -> None:
    """The 1,879 answers of MATH-500, GSM8K and AIME 2024/2025 all reach the check."""
    from diagevo.eval.benchmarks import load_benchmark

    files = {"math500": "math500", "gsm8k": "gsm8k_test", "aime2024": "aime2024", "aime2025": "aime2025"}
    golds = [q.gold for name, f in files.items() for q in load_benchmark(name, BENCHMARKS / f"{f}.jsonl").questions]
    assert len(golds) == 1879
    assert [g for g in golds if not plausible_final_answer(normalize_answer(g))] == []


def test_math_verifys_sum_pair_agrees_again() -> None:
    """math-verify's suite (``test_yujianll.py``): a sum with its product's factors swapped agrees,
    one over another range does not."""
    chk = EquivalenceChecker(cpu_limit_s=10.0)  # the rule pinned, not the budget: 1.7-2.5 s of CPU by processor
    try:
        gold = "F_n = \\sum_{k=0}^{n-1} F_k F_{n-k-1}"
        assert agrees("F_n = \\sum_{k=0}^{n-1} F_{n-k-1} F_k", gold, chk)
        assert not agrees("F_n = \\sum_{k=0}^{n-2} F_k F_{n-k-2}", gold, chk)
        assert chk.stats.failures == 0
    finally:
        chk.close()


FAKE_HEAD = """
import json, sys
texts = {}
print(json.dumps({"ready": True, "cpu": 0.5}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "parse":
        texts[req["id"]] = req["text"]
"""
"""The fake workers' start: ready, then each request read, a parse's text kept by its id."""


def _fake(parse_cut: str = "", verify_cut: str = "", cpu: float = 1.0) -> list[str]:
    """A worker speaking the protocol: every operation costs ``cpu`` seconds; a parse of a text
    holding ``parse_cut``, or a verify of one holding ``verify_cut``, is cut by the CPU-time limit
    (2 s), after which nothing is parsed (a new child); verify is True only for identical texts."""
    body = (
        FAKE_HEAD
        + f"""        cut = bool({parse_cut!r}) and {parse_cut!r} in req["text"]
    else:
        a, b = texts.get(req.get("a")), texts.get(req.get("b"))
        cut = bool({verify_cut!r}) and ({verify_cut!r} in (a or "") or {verify_cut!r} in (b or ""))
    if cut:
        texts.clear()
        reply = {{"ok": False, "error": "limit", "cpu": 2.0}}
    else:
        reply = {{"ok": req["op"] == "parse" or a == b, "cpu": {cpu}}}
    print(json.dumps(reply), flush=True)
"""
    )
    return [sys.executable, "-c", body]


def test_an_answer_over_the_limit_is_checked_once_in_a_batch() -> None:
    """Five responses give the same hostile answer against five labels: one verify, cut by the
    limit; the answer is marked and the four other checks are skipped unsent. The label, known
    cheap from an earlier check, is not marked and is still checked."""
    chk = EquivalenceChecker(command=_fake(verify_cut="\\hostile", cpu=0.01))
    try:
        assert not agrees("\\sqrt{3}", "\\sqrt{2}", chk)  # \sqrt{2} is now known cheap
        assert not agrees("\\sqrt{2}\\hostile", "\\sqrt{2}", chk)
        for k in range(3, 7):
            assert not agrees("\\sqrt{2}\\hostile", f"\\sqrt{{{k}}}", chk)
        assert agrees("\\sqrt{2}", "\\sqrt{2} ", chk)  # same key: fast
        assert not agrees("\\sqrt{5}", "\\sqrt{2}", chk)
        s = chk.stats
        assert (s.verifies, s.timeouts, s.marked, s.skipped) == (3, 1, 1, 4)
        assert s.starts == 1
    finally:
        chk.close()


def test_a_parse_over_the_limit_marks_its_text_for_good() -> None:
    chk = EquivalenceChecker(command=_fake(parse_cut="\\hostile", cpu=0.01))
    try:
        for k in range(4):
            assert not agrees("\\hostile{1}", f"\\sqrt{{{k + 2}}}", chk)
        s = chk.stats
        assert (s.timeouts, s.marked, s.skipped) == (1, 1, 3)
        assert s.parses == 2  # the label, then the hostile answer once
    finally:
        chk.close()


def test_the_votes_of_a_question_stop_at_their_cpu_budget() -> None:
    """Four distinct answers, every operation 1 s of CPU, a budget of 2.5 s: the first pair costs
    two parses and a verify (3 s); the five pairs left (answer 3 against 1 and 2, answer 4
    against 1, 2 and 3) are "different" unchecked. Each answer is its own class."""
    chk = EquivalenceChecker(command=_fake(cpu=1.0))
    try:
        v = votes(["\\sqrt{2}", "\\sqrt{3}", "\\sqrt{5}", "\\sqrt{6}"], chk, cpu_s=2.5)
        s = chk.stats
        assert (s.parses, s.verifies, s.out_of_budget) == (2, 1, 5)
        assert len(v.classes) == 4
        assert chk.cpu_spent == 3.0
    finally:
        chk.close()


def test_a_batch_earns_its_budget_check_by_check() -> None:
    """``batch_cpu_s=2`` per 4 checks: each check earns 0.5 s, at most 2 s in hand. Check 1 sends
    two parses and a verify (3 s: -1 left); checks 2 and 3 find -0.5 and 0 and are "different"
    unchecked; check 4 finds 0.5 and is sent (its label is parsed already)."""
    chk = EquivalenceChecker(command=_fake(cpu=1.0), batch_cpu_s=2.0, batch_checks=4)
    try:
        for k in range(4):
            assert not agrees(f"\\sqrt{{{k + 3}}}", "\\sqrt{2}", chk)
        s = chk.stats
        assert (s.verifies, s.out_of_budget, s.parses) == (2, 2, 3)
    finally:
        chk.close()


def test_no_batch_budget_with_an_infinite_one() -> None:
    chk = EquivalenceChecker(command=_fake(cpu=1.0), batch_cpu_s=math.inf)
    try:
        for k in range(4):
            agrees(f"\\sqrt{{{k + 3}}}", "\\sqrt{2}", chk)
        assert (chk.stats.verifies, chk.stats.out_of_budget) == (4, 0)
    finally:
        chk.close()


def test_a_limit_kill_costs_a_fork_not_a_start() -> None:
    """The real worker: a check cut by its CPU limit ends the child only; the same process forks
    another, which parses the label again when it is next needed; the hostile text is never sent
    again, against any label."""
    chk = EquivalenceChecker(cpu_limit_s=0.5)
    try:
        assert agrees("\\frac{\\sqrt{2}}{2}", "\\sqrt{2}/2", chk)
        parses = chk.stats.parses
        assert not agrees(SLOW, "\\sqrt{2}/2", chk)
        assert (chk.stats.timeouts, chk.stats.marked, chk.stats.starts) == (1, 1, 1)
        assert agrees("\\frac{1}{\\sqrt{2}}", "\\sqrt{2}/2", chk)
        assert chk.stats.parses == parses + 3  # SLOW, then the label again and the new answer
        assert not agrees(SLOW, "0", chk)
        assert chk.stats.skipped == 1 and chk.stats.timeouts == 1
    finally:
        chk.close()


def test_the_fork_server_reports_a_limit_and_answers_on() -> None:
    """The worker's own protocol: the reply to a cut operation, then an answer from the new child."""
    lines = [
        {"op": "parse", "id": 1, "text": SLOW},
        {"op": "parse", "id": 2, "text": "0"},
        {"op": "verify", "a": 1, "b": 2},
        {"op": "parse", "id": 3, "text": "2"},
        {"op": "verify", "a": 3, "b": 3},
        {"op": "parse", "id": 4, "text": "99999!"},  # the operation limits, behind the rules
        {"op": "verify", "a": 4, "b": 3},
        {"op": "parse", "id": 5, "text": "\\frac{\\sqrt{3}}{2}", "steps": 100, "cpu_s": 0.5},  # its own limits
        {"op": "parse", "id": 6, "text": "\\frac{\\sqrt{3}}{2}"},
    ]
    proc = subprocess.run(
        [sys.executable, str(WORKER), "2000000", "4000000", "0.5"],
        input="".join(json.dumps(x) + "\n" for x in lines),
        capture_output=True,
        text=True,
        check=True,
    )
    replies = [json.loads(x) for x in proc.stdout.splitlines()]
    assert replies[0]["ready"] is True
    # SLOW's parse or its check, whichever this processor reaches the limit in, is cut
    cut = {"ok": False, "error": "limit"}  # the parent charges the limit it sent
    assert replies[3] == cut or (replies[1] == cut and replies[3]["ok"] is False), replies[1:4]
    assert [r["ok"] for r in replies[4:6]] == [True, True]
    assert replies[7]["error"] == "budget"
    # a request's own step budget, then the process's for the same text
    assert replies[8]["error"] == "budget" and replies[9]["ok"] is True and replies[9]["steps"] > 100


def _heavy_fake(cpu: float = 1.0) -> list[str]:
    """A worker whose operations on a text holding ``\\heavy`` need more than one response's own
    limits: under a request's ``cpu_s`` below 1 s they are cut (a new child), under the worker's
    own they answer. Every operation costs ``cpu``; verify is True only for identical texts."""
    body = (
        FAKE_HEAD
        + f"""        held = [req["text"]]
    else:
        held = [texts.get(req.get("a")) or "", texts.get(req.get("b")) or ""]
    if req.get("cpu_s", 2.0) < 1 and any("\\\\heavy" in t for t in held):
        texts.clear()
        reply = {{"ok": False, "error": "limit"}}
    else:
        reply = {{"ok": req["op"] == "parse" or held[0] == held[1], "cpu": {cpu}}}
    print(json.dumps(reply), flush=True)
"""
    )
    return [sys.executable, "-c", body]


def test_a_response_spends_only_its_own_limits() -> None:
    """Issue 83: ``batch_cpu_s=2`` per 4 checks, every operation 1 s. Under the worker's own limits
    the batch budget stops the checks after the first (as above); under each response's own
    (:data:`RESPONSE`, the reward's) all six are checked, whatever the others spent."""
    chk = EquivalenceChecker(command=_heavy_fake(), batch_cpu_s=2.0, batch_checks=4)
    try:
        shared = [verdict(f"\\sqrt{{{k + 3}}}", "\\sqrt{2}", chk) for k in range(6)]
        assert shared.count(None) == chk.stats.out_of_budget >= 4
        chk.stats = CheckStats()
        own = [verdict(f"\\sqrt{{{k + 3}}}", "\\sqrt{2}", chk, RESPONSE) for k in range(6)]
        assert own == [False] * 6
        assert (chk.stats.verifies, chk.stats.out_of_budget) == (6, 0)
    finally:
        chk.close()


def test_an_answer_past_its_own_limits_is_unchecked_and_only_it_is_blamed() -> None:
    """An answer that needs more than one response's limits is unchecked (None), not different;
    it is marked under those limits only (the worker's own still check it), and the label it was
    checked against is not marked."""
    chk = EquivalenceChecker(command=_heavy_fake(cpu=0.01))
    try:
        assert verdict("\\sqrt{2}\\heavy", "\\sqrt{2}", chk, RESPONSE) is None
        assert verdict("\\sqrt{2}\\heavy", "\\sqrt{2}", chk, RESPONSE) is None  # marked: not sent again
        assert (chk.stats.timeouts, chk.stats.marked, chk.stats.skipped) == (1, 1, 1)
        assert verdict("\\sqrt{2}\\heavy", "\\sqrt{2}", chk) is False  # the worker's own limits: decided
        assert verdict("\\sqrt{2}", "\\sqrt{2} ", chk, RESPONSE) is True
        assert verdict("\\sqrt{3}", "\\sqrt{2}", chk, RESPONSE) is False
    finally:
        chk.close()


def test_the_reward_of_an_unchecked_answer_is_marked_unchecked() -> None:
    """The solver's reward: an unchecked answer earns -1 (nothing showed it agrees) with
    ``checked`` 0 in compute_score's figures, which verl dumps with the rollout; the others are
    scored as usual beside it."""
    from diagevo.curriculum import equivalence
    from diagevo.curriculum.reward import SolverScore, solver_scores
    from diagevo.verl import compute_score

    chk = EquivalenceChecker(command=_heavy_fake(cpu=0.01))
    equivalence._default = chk
    try:
        got = solver_scores(["\\boxed{\\sqrt{2}\\heavy}", "\\boxed{\\sqrt{2}}", "\\boxed{\\sqrt{3}}"], "\\sqrt{2}")
        assert got == [SolverScore(-1.0, False), SolverScore(1.0, True), SolverScore(-1.0, True)]
        scored = compute_score("diagevo/solver", "so \\boxed{\\sqrt{2}\\heavy}", "\\sqrt{2}", {"question_id": "q1"})
        assert (scored["score"], scored["acc"], scored["checked"]) == (-1.0, 0.0, 0.0)
        assert (
            compute_score("diagevo/solver", "\\boxed{\\sqrt{2}}", "\\sqrt{2}", {"question_id": "q1"})["checked"] == 1.0
        )
    finally:
        equivalence._default = None
        chk.close()


def test_a_real_cut_costs_one_responses_limit() -> None:
    """The real worker: a hostile answer no rule refuses is cut at one response's CPU limit
    (0.1 s), not the worker's own (2 s), and charged that."""
    chk = EquivalenceChecker()
    try:
        assert verdict(SLOW, "0", chk, RESPONSE) is None
        assert chk.stats.timeouts + chk.stats.over_budget == 1
        assert chk.cpu_spent < 1.0  # the label's parse and the cut: RESPONSE.cpu_s, far from 2 s
    finally:
        chk.close()


_PARSE_BOTH_WAYS = """
import json, runpy, sys
worker = runpy.run_path(sys.argv[1])
from math_verify import parse
from antlr4.error.Errors import ParseCancellationException
import latex2sympy2_extended.latex2sympy2 as l2s
config = worker["_config"]()
texts = json.loads(sys.stdin.read())
def parsed(text):
    try:
        return [str(x) for x in parse(worker["_answer_latex"](text), extraction_config=config, parsing_timeout=None)]
    except Exception as exc:
        return type(exc).__name__
full = [parsed(t) for t in texts]
worker["_install_two_stage_parsing"]()
stages, second = l2s._Latex2Sympy.parse, []
def counted(self, s):
    try:
        return stages(self, s)
    finally:
        second.append(s)
l2s._Latex2Sympy.parse = counted
two = [parsed(t) for t in texts]
print(json.dumps({"differ": [t for t, a, b in zip(texts, full, two) if a != b], "parses": len(second)}))
"""


def test_two_stage_parsing_gives_the_full_parse() -> None:
    """The worker parses in ANTLR's SLL mode first and in full LL only where SLL reports a syntax
    error; every answer of math-verify's own pairs (both sides, and the final answers the tests
    read from them), of the benchmarks where their files are here, and the hostile forms parse to
    the same result either way, in a process of their own (the stages are installed into
    latex2sympy for good)."""
    from tests.test_curriculum_math_verify_pairs import PAIRS, final_answer

    texts = {t for p in PAIRS for side in ("pred", "gold") for t in (p[side], final_answer(p[side]) or "")}
    if BENCHMARKS.is_dir():
        texts |= {str(json.loads(line)["answer"]) for f in BENCHMARKS.glob("*.jsonl") for line in f.open()}
    texts |= {SLOW, "\\left( \\frac{1}{4} \\right)", "\\sin(x)^{3}-x^{3}", "(x+1)^{45}(x-1)^{45}-(x^2-1)^{45}"}
    proc = subprocess.run(
        [sys.executable, "-c", _PARSE_BOTH_WAYS, str(WORKER)],
        input=json.dumps(sorted(texts)),
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["differ"] == []
    assert result["parses"] > 0  # the stages ran


_LL_ONLY = """
import runpy, sys
worker = runpy.run_path(sys.argv[1])
worker["main"].__globals__["_install_two_stage_parsing"] = lambda: None
worker["main"]([])
"""


def test_two_stage_parsing_costs_a_fresh_child_less() -> None:
    """Full-context prediction was much of what an ordinary parse cost, in a child that had not
    seen the form before (``\\left( \\frac{1}{4} \\right)``: 182,000 calls, past one response's
    100,000). The same answers, in the same order, in two fresh workers, one left parsing in LL
    alone: in two stages each costs fewer calls, and all of them together at most 3/4."""
    texts = ["\\left( \\frac{1}{4} \\right)", "(8+1)", "x \\in [-3,7]", "y=-\\frac{1}{3}x+\\frac{3}{4}"]
    request = "".join(
        json.dumps({"op": "parse", "id": i, "text": t, "cpu_s": 0}) + "\n" for i, t in enumerate(texts, 1)
    )

    def steps(command: list[str]) -> list[int]:
        proc = subprocess.run(command, input=request, capture_output=True, text=True, check=True)
        replies = [json.loads(x) for x in proc.stdout.splitlines()[1:]]
        assert [r["ok"] for r in replies] == [True] * len(texts), replies
        return [r["steps"] for r in replies]

    two = steps([sys.executable, str(WORKER)])
    full = steps([sys.executable, "-c", _LL_ONLY, str(WORKER)])
    assert all(a < b for a, b in zip(two, full, strict=True)), (two, full)
    assert sum(two) <= 0.75 * sum(full), (two, full)


def honest_forms(k: int) -> list[tuple[str, str]]:
    """(label, response) pairs that agree, of forms beyond the few the worker warms up with in its
    first version (issue 92): a logarithm, inverse trigonometry, intervals, a set with ``\\pm``,
    an angle, a column vector, a union, units in text, a polar point."""
    return [
        (f"\\log_{{2}} {k + 38}", f"\\frac{{\\ln {k + 38}}}{{\\ln 2}}"),
        (f"\\arctan({k})", f"\\tan^{{-1}}({k})"),
        (f"[0,{k})", f"x \\in [0, {k})"),
        (f"\\{{1\\pm\\sqrt{{{k}}},-2\\}}", f"\\{{-2, 1+\\sqrt{{{k}}}, 1-\\sqrt{{{k}}}\\}}"),
        (f"{k + 10}^\\circ", f"{k + 10}"),
        (
            f"\\begin{{pmatrix}}-1/{k}\\\\2/{k}\\end{{pmatrix}}",
            f"\\begin{{pmatrix}}-\\frac{{1}}{{{k}}}\\\\\\frac{{2}}{{{k}}}\\end{{pmatrix}}",
        ),
        (f"(-\\infty, {k}) \\cup ({k + 1}, \\infty)", f"(-\\infty,{k})\\cup({k + 1},\\infty)"),
        (f"\\left[ \\frac{{\\pi^2}}{{{k}}}, \\frac{{5 \\pi^2}}{{4}} \\right]", f"[\\pi^2/{k}, 5\\pi^2/4]"),
        (f"{k}.4 \\text{{ cents}}", f"{k}.4"),
        (f"1 \\pm \\sqrt{{{k + 17}}}", f"1+\\sqrt{{{k + 17}}}, 1-\\sqrt{{{k + 17}}}"),
        (f"\\left( 3, \\frac{{\\pi}}{{{k}}} \\right)", f"(3, \\pi/{k})"),
    ]


def test_a_responses_verdict_is_a_function_of_the_pair() -> None:
    """Issue 92: honest answers of forms beyond the warm-up, scored under one response's limits
    (the reward's) on a fresh checker in order, and again on another that has checked other
    answers of the same forms, with hostile answers among them (cut by their limits) and the
    order shuffled, beside a busy process: every verdict the same, and every one "agrees". Before,
    the first answer of each form in a child paid the form's first use and passed its limits
    (-1, and marked for good), a later one did not."""
    pairs = [(answer, label) for k in (9, 14) for label, answer in honest_forms(k)]
    chk = EquivalenceChecker()
    try:
        first = [verdict(a, lab, chk, RESPONSE) for a, lab in pairs]
    finally:
        chk.close()
    company = [(a, lab) for k in (5, 6) for lab, a in honest_forms(k)] + [(SLOW, "0"), ("\\binom{y+61}{61}", "45")]
    again = pairs + company
    random.Random(92).shuffle(again)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    chk = EquivalenceChecker()
    try:
        for a, lab in company:  # a checker that has met the forms, and hostile answers, before
            verdict(a, lab, chk, RESPONSE)
        second = dict(((a, lab), verdict(a, lab, chk, RESPONSE)) for a, lab in again)
        assert chk.stats.over_budget + chk.stats.timeouts >= 2  # the hostile answers were cut
    finally:
        busy.kill()
        busy.wait()
        chk.close()
    assert [second[p] for p in pairs] == first
    assert first == [True] * len(pairs)
