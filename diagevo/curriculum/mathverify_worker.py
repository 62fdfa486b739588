"""Child process that runs math-verify for :mod:`diagevo.curriculum.equivalence`.

Every operation runs under a budget counted in work, never in seconds, so the same request, in
a child in the same state, gets the same answer on an idle or a saturated machine:

- a **step budget**: Python function calls made by the operation (sympy is Python, so its work
  is calls), counted by a trace hook; past it the operation stops with ``"budget"``;
- **operation limits** on the sympy operations that are single calls into C and can run for
  minutes (``9^{9^{9^{9}}}``, ``100000!``): a power over :data:`MAX_POWER_BITS` bits, a
  factorial or binomial over :data:`MAX_FACTORIAL`, stop with ``"budget"`` before they start;
- sympy's caches are cleared before each operation, so its cost does not depend on history;
- the grammar is parsed in two stages (ANTLR's SLL prediction, then full LL only where SLL
  reports an error), the same parse at a fraction of the calls;
- a **CPU-time limit** (:data:`CPU_LIMIT_S`) for the calls the budget counts that are each long
  (``\\sin(x)^{100}-x^{100}`` spends a minute in under four million of them, inside C):
  ``ITIMER_VIRTUAL`` raises ``SIGVTALRM``, whose default action ends the process even inside a C
  call, where no Python handler would run. The process's own CPU time in user mode, not wall time
  and not the kernel's: a loaded machine does not turn ordinary answers into "different", nor do
  the pages a new child copies from the server on its first operation (up to 0.05 s).

Protocol: one JSON object per line. ``{"op": "parse", "id": k, "text": s}`` and ``{"op":
"verify", "a": k1, "b": k2}`` (with math-verify's lenient set and relation comparison), each
with its own :class:`Limits` where it carries ``"steps"`` and ``"cpu_s"`` (one response's
check, :data:`diagevo.curriculum.equivalence.RESPONSE`), answer ``{"ok": bool, "cpu": s,
"steps": n}`` (the CPU seconds and calls the operation used; the parent charges the CPU to the
budget of the check's votes or batch); ``{"op": "forget"}`` drops every parsed answer;
``{"op": "fresh"}`` ends the child, and the next request is answered by a child forked from the
server's warm state (a response's check for the reward is counted from there, whatever the
child served before: work counted after other operations depends on them, through caches that
``clear_cache`` does not reach). Errors
reply ``{"ok": false, "error": "..."}`` (``"budget"``: the worker stays usable; ``"limit"``: the
operation passed its CPU-time limit). On start the worker writes ``{"ready": true, "cpu": s}``.
Run by path: ``mathverify_worker.py [parse_steps verify_steps [cpu_limit_s]]`` (diagevo importable).

The process is a fork server: it imports math-verify once, then forks the child that answers
the operations. A child ended by its CPU-time limit is reported (``"limit"``) and replaced by a
fork in milliseconds, so a hostile answer costs its limit, not also a second of CPU to import
sympy again; the parent re-sends the parses the new child lacks when it needs them. The
server's state is the same in every worker: its hash seed, sympy's random points and, where the
kernel allows, its address layout are fixed (:func:`_one_layout`), so two workers count alike.
"""

# the process may run itself again before sympy is imported (_one_layout)
# ruff: noqa: E402
from __future__ import annotations

import ctypes
import os
import sys

ADDR_NO_RANDOMIZE = 0x0040000  # personality(2)


def _one_layout() -> None:
    """Run again, once, with str hashes seeded alike (``PYTHONHASHSEED=0``) and the kernel's address
    randomisation off where a process may ask for it. Why: the order in which sympy and the parser
    visit sets follows hashes, and for some objects their addresses, so two workers counted one
    verify apart (37,100 to 37,928 calls with random seeds; 37,474 and 37,514 with the seed alone),
    and an answer that near a limit would get another verdict in another worker. With both fixed
    every worker counts alike (sympy's random points are seeded too, see :func:`main`). Where the
    kernel refuses (a container's seccomp), the address residue remains."""
    again = os.environ.get("PYTHONHASHSEED") != "0"
    os.environ["PYTHONHASHSEED"] = "0"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)
        if current != -1 and not current & ADDR_NO_RANDOMIZE:
            again |= libc.personality(current | ADDR_NO_RANDOMIZE) != -1
    except (OSError, AttributeError):  # no C library to ask: not Linux
        pass
    if again:
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


if __name__ == "__main__":
    _one_layout()

import gc
import itertools
import json
import logging
import random
import signal
import time
import warnings
from collections.abc import Callable
from typing import Any

from antlr4.atn.PredictionMode import PredictionMode
from antlr4.error.Errors import ParseCancellationException
from antlr4.error.ErrorStrategy import BailErrorStrategy
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from sympy.core import random as sympy_random
from sympy.core.cache import clear_cache
from sympy.core.numbers import Float, Integer, Rational
from sympy.functions.combinatorial.factorials import binomial, factorial

from diagevo.curriculum.limits import CPU_LIMIT_S, PARSE_STEPS, VERIFY_STEPS, Limits

try:
    from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy
except ImportError:  # a latex2sympy2_extended laid out otherwise: parsed in LL alone, as before
    _Latex2Sympy = None

MAX_POWER_BITS = 1 << 20  # an exact power result larger than this (about 315,000 digits) is refused
MAX_FACTORIAL = 10_000
FRESH = 3  # a child's exit status: it answered "fresh", the server forks the next one


WARM_UP = (
    ("x<1", "(0,1)"),
    ("x^2+9x", "x(x+9)"),
    ("\\frac{\\sqrt{10}}{10}", "\\sqrt{10}/10"),
    ("\\{1, 2\\}", "[0, 1)"),
    ("y = 2x + 1", "3.5\\%"),
    ("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "30^\\circ"),
    ("\\sin(x)+\\log(2)", "e^{\\pi i}"),
    ("\\log_{2} 40", "\\frac{\\ln 40}{\\ln 2}"),
    ("\\arctan(3)", "\\tan^{-1}(3)"),
    ("\\arcsin(\\frac{1}{2})", "\\cos^{-1}(0)"),
    ("[0, 5)", "x \\in [0, 5)"),
    ("(-\\infty, 2) \\cup (3, \\infty)", "(0,9) \\cup (9,36]"),
    ("[ \\frac{\\pi^2}{8}, \\frac{5 \\pi^2}{4} ]", "[\\pi^2/8, 5\\pi^2/4]"),
    ("\\{1\\pm\\sqrt{5},-2\\}", "\\{-2, 1+\\sqrt{5}, 1-\\sqrt{5}\\}"),
    ("1 \\pm \\sqrt{19}", "1+\\sqrt{19}, 1-\\sqrt{19}"),
    ("864 \\mbox{ inches}^2", "\\frac{270}7\\text{ degrees}"),
    ("5.4 \\text{ cents}", "\\text{(C)}"),
    ("\\begin{pmatrix}-1/3\\\\2/3\\end{pmatrix}", "\\begin{pmatrix}-\\frac{1}{3}\\\\\\frac{2}{3}\\end{pmatrix}"),
    ("( 3, \\frac{\\pi}{2} )", "(3, \\pi/2)"),
    ("-2 \\le x \\le 7", "x \\in [-2,7]"),
    ("52_8", "(6,31,-1)"),
    ("2500.75", "the total is 2,500.75 dollars"),
)
"""Pairs of the common forms of an answer that the server parses and verifies before the first
fork: a polynomial, a root, a set, an interval, an equation, a percentage, a matrix, an angle,
functions, and MATH-500's (logarithms, inverse trigonometry, unions, ``\\pm``, units in text,
bases, tuples) and GSM8K's (a sentence with a number). Every response's check starts from this
state (see :meth:`~diagevo.curriculum.equivalence.EquivalenceChecker._fresh_verify`), so what a
form costs there is what it costs every time: the first operation of a form costs up to a
hundred times a later one (imports, compiled grammars, the parser's prediction tables:
``\\log_{2} 41`` 220,000 calls, 2,800 once met), and no check should pay it. The forms are the
benchmarks', not the test pairs' of math-verify. About 0.6 s of CPU more at the worker's start."""


class BudgetExceeded(BaseException):
    """Raised inside sympy when the work budget is spent. A BaseException, so that the
    ``except Exception`` handlers of math-verify and sympy let it through."""


class _Steps:
    """Runs an operation under a budget of Python calls: the global trace function is called once
    per call (it returns None, so no line events follow) and only advances a C counter. And
    under the CPU-time limit: ``SIGVTALRM`` keeps its default action, so the timer ends the process."""

    def __init__(self) -> None:
        self.count = 0
        self.spent = False
        signal.signal(signal.SIGVTALRM, signal.SIG_DFL)

    def run(self, limit: int, cpu_s: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` under ``limit`` calls and ``cpu_s`` CPU seconds (0: no limit)."""
        clear_cache()
        calls = itertools.count(1)
        self.spent = False

        def hook(frame: Any, event: str, arg: Any) -> None:
            if next(calls) > limit:
                self.spent = True
                raise BudgetExceeded

        signal.setitimer(signal.ITIMER_VIRTUAL, cpu_s)  # 0 leaves it unarmed
        sys.settrace(hook)
        try:
            result = fn(*args, **kwargs)
        finally:
            sys.settrace(None)
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            self.count = next(calls) - 1
        if self.spent:  # someone caught the BaseException anyway: the answer is not to be trusted
            raise BudgetExceeded
        return result


def _install_operation_limits() -> None:
    """Refuse, before they start, the sympy operations that are one long call into C."""

    def bits(n: int) -> int:
        return max(abs(int(n)).bit_length(), 1)

    def guard_power(cls: Any) -> None:
        original = cls._eval_power

        def _eval_power(self: Any, expt: Any) -> Any:
            if isinstance(expt, Rational) and not isinstance(expt, Float):
                p = abs(int(expt.p))
                if isinstance(self, Float):
                    if p > MAX_POWER_BITS:
                        raise BudgetExceeded
                elif p * max(bits(self.p), bits(self.q)) > MAX_POWER_BITS:
                    raise BudgetExceeded
            return original(self, expt)

        cls._eval_power = _eval_power

    for cls in (Integer, Rational, Float):
        guard_power(cls)

    def guard_eval(cls: Any) -> None:
        original = cls.eval.__func__

        def bounded_eval(klass: Any, *args: Any) -> Any:
            for a in args:
                if getattr(a, "is_Integer", False) and abs(int(a)) > MAX_FACTORIAL:
                    raise BudgetExceeded
            return original(klass, *args)

        cls.eval = classmethod(bounded_eval)

    guard_eval(factorial)
    guard_eval(binomial)


def _install_two_stage_parsing() -> None:
    """ANTLR's two-stage parsing for latex2sympy's grammar: each answer is parsed first in SLL
    prediction mode with the bail-out error strategy, and again in full LL mode only where that
    stage reports a syntax error. ANTLR guarantees that an SLL parse that succeeds is the parse LL
    would give (its ``PredictionMode.SLL``); every answer of the benchmarks and of math-verify's own
    pairs parses to the same result either way (``tests/test_answercheck_bounds.py``).
    Why: full-context LL prediction is much of what an ordinary parse costs, most of all in a child
    that has not seen the form (``\\left( \\frac{1}{4} \\right)``: 182,000 calls in LL, 106,000 in
    two stages, 3,900 once seen), so one response's own limits hold honest answers that LL alone
    put past them. A latex2sympy without these two methods is left parsing in LL mode."""
    create_parser, parse_latex = (getattr(_Latex2Sympy, name, None) for name in ("create_parser", "parse"))
    if create_parser is None or parse_latex is None:
        return
    full_context = [False]  # the worker parses one answer at a time

    def two_stage_parser(self: Any, latex_str: str) -> Any:
        parser = create_parser(self, latex_str)
        if not full_context[0]:
            parser._interp.predictionMode = PredictionMode.SLL
            parser._errHandler = BailErrorStrategy()
        return parser

    def two_stage_parse(self: Any, latex_str: str) -> Any:
        try:
            return parse_latex(self, latex_str)
        except ParseCancellationException:
            full_context[0] = True
            try:
                return parse_latex(self, latex_str)
            finally:
                full_context[0] = False

    _Latex2Sympy.create_parser = two_stage_parser
    _Latex2Sympy.parse = two_stage_parse


def _answer_latex(text: str) -> str:
    """Bare answers do not parse (``\\sqrt{2}/2``); wrapped in ``$...$`` they do."""
    return text if text.startswith("$") else f"${text}$"


def _serve(steps: _Steps, limits: Limits, out: Any) -> int:
    """The child's loop: one operation per line of stdin until it closes (0) or asks for a
    fresh child (:data:`FRESH`)."""
    config = _config()
    parsed: dict[Any, list[Any]] = {}
    # unbuffered: a line read ahead into a buffer would die with a child cut by its limit
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    for line in iter(stdin.readline, b""):
        start = time.process_time()
        try:
            req = json.loads(line)
            op = req["op"]
            if op == "parse":
                result = steps.run(
                    int(req.get("steps", limits.parse_steps)),
                    float(req.get("cpu_s", limits.cpu_s)),
                    parse,
                    _answer_latex(req["text"]),
                    extraction_config=config,
                    parsing_timeout=None,
                    raise_on_error=True,
                )
                parsed[req["id"]] = result
                reply: dict[str, Any] = {"ok": bool(result)}
            elif op == "verify":
                a, b = parsed[req["a"]], parsed[req["b"]]
                ok = steps.run(
                    int(req.get("steps", limits.verify_steps)),
                    float(req.get("cpu_s", limits.cpu_s)),
                    verify,
                    a,
                    b,
                    timeout_seconds=None,
                    raise_on_error=True,
                    allow_set_relation_comp=True,
                )
                reply = {"ok": bool(ok)}
            elif op == "forget":
                parsed.clear()
                reply = {"ok": True}
            elif op == "fresh":  # this child ends; the server forks another from its warm state
                out.write(json.dumps({"ok": True, "cpu": 0.0, "steps": 0}) + "\n")
                out.flush()
                return FRESH
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except BudgetExceeded:
            reply = {"ok": False, "error": "budget"}
        except Exception as exc:  # reported to the parent, which counts it as a failed check
            # only the type: str() of an exception holding a huge sympy number can itself hang
            reply = {"ok": False, "error": type(exc).__name__}
        reply["cpu"] = round(time.process_time() - start, 4)
        reply["steps"] = steps.count
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


def _config() -> list[Any]:
    return [LatexExtractionConfig(), ExprExtractionConfig()]


def main(argv: list[str]) -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    limits = Limits(
        int(argv[0]) if argv else PARSE_STEPS,
        int(argv[1]) if len(argv) > 1 else VERIFY_STEPS,
        float(argv[2]) if len(argv) > 2 else CPU_LIMIT_S,
    )
    _install_operation_limits()
    _install_two_stage_parsing()
    # sympy tests equality at random points: seeded, so that every worker's children decide and count alike
    random.seed(0)
    sympy_random.seed(0)
    steps = _Steps()
    config = _config()
    # the first parse and verify of a form import, compile and build its parser tables: done once,
    # here, before the first fork, so that no child pays it and an operation costs the same whenever it runs
    for pair in WARM_UP:
        gold, answer = (parse(_answer_latex(t), extraction_config=config, parsing_timeout=None) for t in pair)
        verify(gold, answer, timeout_seconds=None, allow_set_relation_comp=True)
    gc.freeze()  # the warmed heap out of the children's collections: fewer pages copied after a fork
    out = sys.stdout
    sys.stdout = sys.stderr  # anything a library prints must not corrupt the protocol
    out.write(json.dumps({"ready": True, "cpu": round(time.process_time(), 4)}) + "\n")
    out.flush()
    while True:
        pid = os.fork()
        if pid == 0:  # the child answers until stdin closes; nothing of the parent's exit runs
            code = 1  # anything but 0 tells the parent process to fork another
            try:
                code = _serve(steps, limits, out)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == FRESH:
            continue  # asked for (and answered): the next child starts from the warm state
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return  # stdin closed: the parent is done with this worker
        limit = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGVTALRM
        reply = {"ok": False, "error": "limit" if limit else "died"}  # the parent charges the limit it sent
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
