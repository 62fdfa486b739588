"""The answer check bounded in time: hostile answers, a verl-sized batch, a fast answer beside a
slow one, before and after, measured in the same run.

Before is the same checker with what bounds time switched off: no CPU-time limit
(``cpu_limit_s=0``), the earlier 120 s wall-clock backstop, one worker (one queue), and the
refusal of what cannot be a final answer replaced by the length rule alone (``--quick`` leaves
out the hostile answers of a minute and more before). After is the default checker.

- the hostile answers one at a time: the two refused (a limit and an integral), and one no
  cheap rule refuses (``\\sin(x)^{99}-x^{99}`` against ``0``), cut by the CPU-time limit;
- ``compute_score`` over a verl-sized batch (``--batch``, 2048) of which 1 % are hostile, the
  rest answers like a solver's (plain numbers, and symbolic forms of each question's label);
- the same batch with 0 %, 1 % and 10 % hostile answers, every one a distinct text of fifteen
  forms (:func:`hostile`), each response checked under its own limits (issue 83): time against
  the clean batch's, in this run, and the count of honest responses scored otherwise than in the
  clean batch (targets: 10 % at most 3x, and none);
- the wait of fast symbolic answers sent from a second thread while a slow one is checked;
- ``--twice`` (issue 92): the ordinary batch scored twice, on two fresh checkers: in order, then
  shuffled under a busy loop on every core, alone and with 10 % hostile company; the count of
  honest responses whose verdict differs between the runs (target: none).

The ordinary responses are plain numbers and symbolic answers: the three forms of the worker's
first warm-up, eleven more (:func:`beyond_warm_up`: logarithms, inverse trigonometry, intervals,
a set with ``\\pm``, an angle, a vector, a union, units in text, a polar point, shaped on
MATH-500's answers), and the agreeing pairs of math-verify's own suite. ``--shares`` adds a 10 %
of hostile answers all of forms that no rule refuses, each then checked by math-verify until a
limit stops it. ``--busy`` keeps a busy loop on every core through the whole run.

Run: ``.venv/bin/python benchmarks/bench_answercheck.py [--quick] [--shares] [--twice] [--busy] [--batch N]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import diagevo.curriculum.equivalence as equivalence
from diagevo.curriculum.answers import MAX_ANSWER_CHARS, extract_answer, plausible_final_answer
from diagevo.curriculum.equivalence import EquivalenceChecker
from diagevo.verl import compute_score

LIM = "\\lim_{x\\to 0} \\frac{\\sin(x)^{100}-x^{100}}{x^{102}}"
INT = "\\int_0^1 x^{1000} e^x dx"
SLOW = "\\sin(x)^{99}-x^{99}"


def before() -> EquivalenceChecker:
    return EquivalenceChecker(cpu_limit_s=0, timeout_s=120.0, workers=1)


def unrefused(fn: Callable[[], Any]) -> Any:
    """``fn()`` with only the length rule deciding what reaches math-verify (as before)."""
    rule = equivalence.plausible_final_answer
    equivalence.plausible_final_answer = lambda answer: len(answer) <= MAX_ANSWER_CHARS
    try:
        return fn()
    finally:
        equivalence.plausible_final_answer = rule


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def warm(chk: EquivalenceChecker) -> EquivalenceChecker:
    chk.equivalent("\\sqrt{4}", "2")  # the worker started and sympy imported, outside the timings
    return chk


def beyond_warm_up(k: int) -> list[tuple[str, str]]:
    """(response, label) pairs that agree, of forms the worker's first warm-up did not hold,
    shaped on MATH-500's answers and issue 92's: each cost a child that had not met it up to
    580,000 calls."""
    return [
        (f"\\frac{{\\ln {k + 38}}}{{\\ln 2}}", f"\\log_{{2}} {k + 38}"),
        (f"\\tan^{{-1}}({k})", f"\\arctan({k})"),
        (f"x \\in [0, {k})", f"[0,{k})"),
        (f"\\{{-2, 1+\\sqrt{{{k}}}, 1-\\sqrt{{{k}}}\\}}", f"\\{{1\\pm\\sqrt{{{k}}},-2\\}}"),
        (f"{k + 10}", f"{k + 10}^\\circ"),
        (
            f"\\begin{{pmatrix}}-\\frac{{1}}{{{k}}}\\\\\\frac{{2}}{{{k}}}\\end{{pmatrix}}",
            f"\\begin{{pmatrix}}-1/{k}\\\\2/{k}\\end{{pmatrix}}",
        ),
        (f"(-\\infty,{k})\\cup({k + 1},\\infty)", f"(-\\infty, {k}) \\cup ({k + 1}, \\infty)"),
        (f"[\\pi^2/{k}, 5\\pi^2/4]", f"\\left[ \\frac{{\\pi^2}}{{{k}}}, \\frac{{5 \\pi^2}}{{4}} \\right]"),
        (f"{k}.4", f"{k}.4 \\text{{ cents}}"),
        (f"1+\\sqrt{{{k + 17}}}, 1-\\sqrt{{{k + 17}}}", f"1 \\pm \\sqrt{{{k + 17}}}"),
        (f"(3, \\pi/{k})", f"\\left( 3, \\frac{{\\pi}}{{{k}}} \\right)"),
    ]


_SPAN = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)


def _final(text: str) -> str:
    """The answer a boxed response giving ``text`` would give (as the suite's test reads it)."""
    if "\\boxed" in text:
        return extract_answer(text) or ""
    spans = [next(g for g in m.groups() if g is not None) for m in _SPAN.finditer(text)]
    return spans[-1] if spans else text


PAIRS_FILE = Path(__file__).resolve().parents[1] / "tests" / "data" / "math_verify_pairs.json"
SUITE = [(_final(p["pred"]), _final(p["gold"])) for p in json.loads(PAIRS_FILE.read_text())["pairs"] if p["expected"]]
"""(response, label): math-verify's own pairs that agree (174 of its 210)."""


def batch(n: int, hostile_every: int) -> list[tuple[str, str]]:
    """(response, label) pairs: every ``hostile_every``-th answer hostile (the integral, refused,
    and the one cut by the limit in turn, each in another variable, so that no failed pair is
    skipped as seen before; the limit of a minute would make before take an hour), 70 % of the
    rest plain numbers, 30 % symbolic: the warm-up's three forms, :func:`beyond_warm_up`'s
    eleven and math-verify's agreeing pairs in turn."""
    out = []
    for i in range(n):
        k = i % 97 + 2
        if i % hostile_every == hostile_every - 1:
            var = "xyztuvwabc"[(i // hostile_every // 2) % 10]
            answer, label = [(INT, "1"), ("0", SLOW)][(i // hostile_every) % 2]
            answer, label = answer.replace("x", var), label.replace("x", var)
        elif i % 10 < 7:
            answer, label = str(k * 3 + i % 2), str(k * 3)
        else:
            forms = [
                (f"\\sqrt{{{k}}}/2", f"\\frac{{\\sqrt{{{k}}}}}{{2}}"),
                (f"x(x+{k})", f"x^2+{k}x"),
                (f"\\frac{{1}}{{\\sqrt{{{k}}}}}", f"\\frac{{\\sqrt{{{k}}}}}{{{k}}}"),
                *beyond_warm_up(k),
                SUITE[i // 15 % len(SUITE)],
            ]
            answer, label = forms[i % len(forms)]
        out.append((f"So the answer is \\boxed{{{answer}}}.", label))
    return out


FORMS = 15


def hostile(i: int) -> str:
    """The ``i``-th hostile answer: distinct for each ``i``, in turn one of fifteen forms: seven
    from before issue 83, three that spent a shared batch budget under the per-check limit (a
    derivative of high order of a quotient, a power written with doubled parentheses, nested trig
    raised to a power), and five that no spelling rule refuses, each 2-3 s of CPU under the
    worker's own limits (an expansion that cancels, a symbolic binomial, a sum of towers, nested
    logarithms raised to a power, a power of a sum of roots)."""
    k, v = i // FORMS, "xyztuvwabc"[i % 10]
    return [
        f"(\\sin({v})^{{({100 + k})}}-{v}^{{(100)}})^{{2}}",
        f"{10000 + k}!" * 8,
        f"(2^{{{524287 - k}}}+1)^{{2}}",
        f"({v}+y+z+w+q)^{{({60 + k % 40})}}",
        f"\\frac{{d^{{{99 - k % 90}}}}}{{d{v}^{{{99 - k % 90}}}}} \\tan({v})",
        "\\sqrt{" * 200 + str(k) + "}" * 200,
        f"\\sin({v})^{{{99 - k % 20}}}-{v}^{{{99 - k % 20}}}",
        f"\\frac{{d^{{{40 + k % 50}}}}}{{d{v}^{{{40 + k % 50}}}}} \\frac{{{v}^2+{k + 1}}}{{{v}-1}}",
        f"({v}+{k + 2})^{{(({30 + k % 40}))}}-{v}^{{(({30 + k % 40}))}}",
        f"\\sin(\\cos(\\tan({v}+{k})))^{{{20 + k % 30}}}",
        f"({v}+1)^{{{45 + k % 10}}}({v}-1)^{{{45 + k % 10}}}-({v}^2-1)^{{{45 + k % 10}}}",
        f"\\binom{{{v}+{60 + k % 20}}}{{{60 + k % 20}}}",
        f"\\sum_{{{v}=1}}^{{{400 + k}}} {v}^{{{v}}}",
        f"\\log(\\log(\\log(\\log({v}+{k + 2}))))^{{{25 + k % 10}}}",
        f"(\\sqrt{{2}}+\\sqrt{{3}}+\\sqrt{{5}}+\\sqrt{{{7 + k}}})^{{{24 + k % 10}}}",
    ][i % FORMS]


def reaching(count: int) -> list[str]:
    """The first ``count`` hostile answers that no rule refuses: each reaches math-verify."""
    return [h for h in map(hostile, range(4 * count + FORMS)) if plausible_final_answer(h)][:count]


def mixed(n: int, share: float, reach: bool = False) -> list[tuple[str, str]]:
    """``batch(n)``'s ordinary responses with ``share`` of them, evenly spread, replaced by
    hostile answers (each text once; ``reach``: only those no rule refuses)."""
    pairs = batch(n, n + 1)  # no hostile answer of the old kind
    count = round(n * share)
    texts = reaching(count) if reach else [hostile(j) for j in range(count)]
    for j, text in enumerate(texts):
        i = j * n // count
        pairs[i] = (f"So the answer is \\boxed{{{text}}}.", pairs[i][1])
    return pairs


def shares(n: int) -> None:
    """Batches of 0 %, 1 % and 10 % hostile answers, each on a fresh default checker: the time
    against the clean batch's, and how many honest responses (those not replaced) were scored
    otherwise than in the clean batch (targets: 10 % at most 3x, and none)."""
    clean_s, clean_scores, base = 0.0, [], mixed(n, 0.0)
    for share, reach in ((0.0, False), (0.01, False), (0.10, False), (0.10, True)):
        chk = warm(EquivalenceChecker())
        pairs = mixed(n, share, reach)
        scores: list[float] = []
        seconds = timed(lambda c=chk, p=pairs, out=scores: out.extend(score(c, p)))
        clean_s, clean_scores = clean_s or seconds, clean_scores or scores
        honest = [i for i, pair in enumerate(pairs) if pair == base[i]]
        moved = sum(scores[i] != clean_scores[i] for i in honest)
        stats = chk.stats.snapshot()
        print(
            f"{share:4.0%} hostile{' (all reach math-verify)' if reach else ''} of {n}: {seconds:.1f} s "
            f"({seconds / clean_s:.2f}x the clean batch); "
            f"{moved} of {len(honest)} honest responses scored otherwise than clean; "
            f"skipped {stats['skipped']}, timeouts {stats['timeouts']}, out_of_budget {stats['out_of_budget']}, "
            f"marked {stats['marked']}, starts {stats['starts']}; worker CPU {chk.cpu_spent:.1f} s"
        )
        chk.close()


def score(chk: EquivalenceChecker, pairs: list[tuple[str, str]]) -> list[tuple[float, float]]:
    """verl's calls of ``compute_score``, one response at a time, with ``chk`` as the process's
    checker: each response's score and whether it was checked."""
    equivalence._default = chk
    try:
        return [
            (float(got["score"]), float(got["checked"]))
            for i, (response, label) in enumerate(pairs)
            if (got := compute_score("diagevo/solver", response, label, {"question_id": f"q{i}"}))
        ]
    finally:
        equivalence._default = None


@contextlib.contextmanager
def busy(on: bool = True) -> Iterator[None]:
    """A busy loop on every core (``os.cpu_count()`` processes) while the block runs."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range((os.cpu_count() or 1) * on)]
    try:
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


def twice(n: int) -> None:
    """The ordinary batch of ``n`` scored on a fresh checker in order, then on fresh checkers again,
    shuffled, under a busy loop on every core: alone, and with 10 % hostile answers among them (of
    forms no rule refuses).
    How many honest responses got another score than the first time (target: none), how many were
    unchecked, and the time of each run (with hostile company, against alone, under the same load)."""
    honest = batch(n, n + 1)
    chk = warm(EquivalenceChecker())
    first: list[tuple[float, float]] = []
    seconds = timed(lambda: first.extend(score(chk, honest)))
    chk.close()
    unchecked = sum(not checked for _, checked in first)
    print(f"twice, {n} honest responses: in order {seconds:.1f} s, {unchecked} unchecked")
    alone_s = 0.0
    for share in (0.0, 0.10):
        company = [(-1, (f"\\boxed{{{h}}}", "1")) for h in reaching(round(n * share))]
        pairs = list(enumerate(honest)) + company
        random.Random(92).shuffle(pairs)
        with busy():
            chk = warm(EquivalenceChecker())
            again: list[tuple[float, float]] = []
            seconds = timed(lambda c=chk, p=pairs, out=again: out.extend(score(c, [x for _, x in p])))
        chk.close()
        moved = sum(got != first[i] for (i, _), got in zip(pairs, again, strict=True) if i >= 0)
        alone_s = alone_s or seconds
        print(
            f"  shuffled, busy loop on {os.cpu_count()} cores, {share:.0%} hostile: {seconds:.1f} s "
            f"({seconds / alone_s:.2f}x alone); {moved} of {n} honest responses scored otherwise; "
            f"worker CPU {chk.cpu_spent:.1f} s, {chk.stats.snapshot()}"
        )


def fast_beside_slow(chk: EquivalenceChecker, n: int, slow: bool = True) -> float:
    """The longest wait of ``n`` fast symbolic checks sent one after another from this thread
    while another thread checks the slow answer (or alone)."""
    thread = threading.Thread(target=chk.equivalent, args=(SLOW, "0") if slow else ("1", "1"))
    verifies = chk.stats.verifies
    thread.start()
    while slow and chk.stats.verifies == verifies and thread.is_alive():
        time.sleep(0.001)
    worst = 0.0
    for k in range(2, n + 2):
        worst = max(worst, timed(lambda k=k: chk.equivalent(f"\\sqrt{{{k}}}/2", f"\\frac{{\\sqrt{{{k}}}}}{{2}}")))
    thread.join()
    return worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="leave out the hostile answers before (minutes)")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--shares", action="store_true", help="only the 0/1/10 %% hostile batches")
    ap.add_argument("--twice", action="store_true", help="only the batch scored twice (issue 92)")
    ap.add_argument("--busy", action="store_true", help="a busy loop on every core through the run")
    args = ap.parse_args()
    with busy(args.busy):
        print(f"load average {os.getloadavg()[0]:.1f}{', a busy loop on every core' if args.busy else ''}")
        if args.twice:
            return twice(args.batch)
        shares(args.batch)
        if args.shares:
            return
        rest(args)


def rest(args: argparse.Namespace) -> None:
    """The hostile answers one at a time, before and after; a verl-sized batch; the waits."""
    after = warm(EquivalenceChecker())
    old = warm(before())
    for name, (gold, answer) in {"\\lim": ("1", LIM), "\\int": ("1", INT), "sin^99": (SLOW, "0")}.items():
        new_s = timed(lambda g=gold, a=answer: after.equivalent(g, a))
        if args.quick and name != "\\int":
            print(f"{name}: after {new_s:.3f} s")
            continue
        old_s = unrefused(lambda g=gold, a=answer: timed(lambda: old.equivalent(g, a)))
        print(f"{name}: before {old_s:.2f} s, after {new_s:.3f} s ({old_s / new_s:.0f}x)")
    old.close()
    after.close()

    pairs = batch(args.batch, 100)
    ordinary = [(r, lab) for r, lab in pairs if "^{99}" not in lab and "\\int" not in r]
    plain_s = timed(lambda: score(warm(EquivalenceChecker()), ordinary))
    after = warm(EquivalenceChecker())
    new_s = timed(lambda: score(after, pairs))
    hostile = len(pairs) - len(ordinary)
    print(
        f"compute_score, {args.batch} responses ({hostile} hostile): after {new_s:.1f} s, "
        f"{args.batch / new_s:.0f}/s; the {len(ordinary)} ordinary ones alone {plain_s:.1f} s "
        f"({new_s / plain_s:.2f}x)"
    )
    print(f"  after: {after.stats.snapshot()}")
    after.close()
    if not args.quick:
        old = warm(before())
        old_s = unrefused(lambda: timed(lambda: score(old, pairs)))
        print(f"  before {old_s:.1f} s, {args.batch / old_s:.0f}/s: after is {old_s / new_s:.1f}x faster")
        print(f"  before: {old.stats.snapshot()}")
        old.close()

    single = warm(EquivalenceChecker())
    alone = fast_beside_slow(single, 20, slow=False)
    single.close()
    print(f"20 fast answers alone, longest: {alone:.2f} s")
    one = warm(EquivalenceChecker(workers=1))
    pool = warm(EquivalenceChecker())
    worst_one = fast_beside_slow(one, 20)
    cold = fast_beside_slow(pool, 20)  # the second worker starts when the first is busy
    warm_pool = fast_beside_slow(pool, 20)
    print(
        f"20 fast answers beside a slow one, longest wait: one worker {worst_one:.2f} s; pool of "
        f"{pool.workers}, its second worker started then {cold:.2f} s ({worst_one / cold:.1f}x), "
        f"already started {warm_pool:.2f} s ({worst_one / warm_pool:.0f}x)"
    )
    one.close()
    pool.close()
    if not args.quick:
        old = warm(before())
        worst_old = fast_beside_slow(old, 20)
        print(f"  before (one worker, no CPU limit): {worst_old:.2f} s")
        old.close()


if __name__ == "__main__":
    main()
