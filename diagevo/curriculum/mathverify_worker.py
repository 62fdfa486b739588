"""Child process that runs math-verify for :mod:`diagevo.curriculum.equivalence`.

Every operation runs under a budget counted in work, never in seconds, so the same request gets
the same answer on an idle or a saturated machine:

- a **step budget**: Python function calls made by the operation (sympy is Python, so its work
  is calls), counted by a trace hook; past it the operation stops with ``"budget"``;
- **operation limits** on the sympy operations that are single calls into C and can run for
  minutes (``9^{9^{9^{9}}}``, ``100000!``): a power over :data:`MAX_POWER_BITS` bits, a
  factorial or binomial over :data:`MAX_FACTORIAL`, stop with ``"budget"`` before they start;
- sympy's caches are cleared before each operation, so its cost does not depend on history;
- a **CPU-time limit** (:data:`CPU_LIMIT_S`) for the calls the budget counts that are each long
  (``\\sin(x)^{100}-x^{100}`` spends a minute in under four million of them, inside C):
  ``ITIMER_PROF`` raises ``SIGPROF``, whose default action ends the process even inside a C call,
  where no Python handler would run. CPU time, not wall time, so a loaded machine does not turn
  ordinary answers into "different".

Protocol: one JSON object per line. ``{"op": "parse", "id": k, "text": s}`` and ``{"op":
"verify", "a": k1, "b": k2}`` (with math-verify's lenient set and relation comparison) answer
``{"ok": bool, "cpu": s}`` (``cpu``: the CPU seconds the operation used, which the parent
charges to the budget of the check's votes or batch); ``{"op": "forget"}`` drops every parsed
answer. Errors reply ``{"ok": false, "error": "..."}`` (``"budget"``: the worker stays usable;
``"limit"``: the operation passed its CPU-time limit). On start the worker writes ``{"ready":
true, "cpu": s}``. Run by path: ``mathverify_worker.py [parse_steps verify_steps [cpu_limit_s]]``.

The process is a fork server: it imports math-verify once, then forks the child that answers
the operations. A child ended by its CPU-time limit is reported (``"limit"``) and replaced by a
fork in milliseconds, so a hostile answer costs its limit, not also a second of CPU to import
sympy again; the parent re-sends the parses the new child lacks when it needs them.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

PARSE_STEPS = 2_000_000  # Python calls one parse may make (answers of the test pairs: < 60k)
VERIFY_STEPS = 4_000_000  # Python calls one verify may make (test pairs: < 600k)
MAX_POWER_BITS = 1 << 20  # an exact power result larger than this (about 315,000 digits) is refused
MAX_FACTORIAL = 10_000
CPU_LIMIT_S = 2.0  # CPU seconds one operation may use before the worker is ended


class BudgetExceeded(BaseException):
    """Raised inside sympy when the work budget is spent. A BaseException, so that the
    ``except Exception`` handlers of math-verify and sympy let it through."""


class _Steps:
    """Runs an operation under a budget of Python calls: the global trace function is called once
    per call (it returns None, so no line events follow) and only advances a C counter. And
    under the CPU-time limit: ``SIGPROF`` keeps its default action, so the timer ends the process."""

    def __init__(self, cpu_limit_s: float) -> None:
        self.count = 0
        self.spent = False
        self.cpu_limit_s = cpu_limit_s
        signal.signal(signal.SIGPROF, signal.SIG_DFL)

    def run(self, limit: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from sympy.core.cache import clear_cache

        clear_cache()
        calls = itertools.count(1)
        self.spent = False

        def hook(frame: Any, event: str, arg: Any) -> None:
            if next(calls) > limit:
                self.spent = True
                raise BudgetExceeded

        signal.setitimer(signal.ITIMER_PROF, self.cpu_limit_s)  # 0 leaves it unarmed
        sys.settrace(hook)
        try:
            result = fn(*args, **kwargs)
        finally:
            sys.settrace(None)
            signal.setitimer(signal.ITIMER_PROF, 0)
            self.count = next(calls) - 1
        if self.spent:  # someone caught the BaseException anyway: the answer is not to be trusted
            raise BudgetExceeded
        return result


def _install_operation_limits() -> None:
    """Refuse, before they start, the sympy operations that are one long call into C."""
    from sympy.core.numbers import Float, Integer, Rational
    from sympy.functions.combinatorial.factorials import binomial, factorial

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


def _answer_latex(text: str) -> str:
    """Bare answers do not parse (``\\sqrt{2}/2``); wrapped in ``$...$`` they do."""
    return text if text.startswith("$") else f"${text}$"


def _serve(steps: _Steps, parse_steps: int, verify_steps: int, out: Any) -> None:
    """The child's loop: one operation per line of stdin until it closes."""
    from math_verify import parse, verify

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
                    parse_steps,
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
                    verify_steps,
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
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except BudgetExceeded:
            reply = {"ok": False, "error": "budget"}
        except Exception as exc:  # reported to the parent, which counts it as a failed check
            # only the type: str() of an exception holding a huge sympy number can itself hang
            reply = {"ok": False, "error": type(exc).__name__}
        reply["cpu"] = round(time.process_time() - start, 4)
        out.write(json.dumps(reply) + "\n")
        out.flush()


def _config() -> list[Any]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return [LatexExtractionConfig(), ExprExtractionConfig()]


def main(argv: list[str]) -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from math_verify import parse, verify

    parse_steps = int(argv[0]) if argv else PARSE_STEPS
    verify_steps = int(argv[1]) if len(argv) > 1 else VERIFY_STEPS
    cpu_limit_s = float(argv[2]) if len(argv) > 2 else CPU_LIMIT_S
    _install_operation_limits()
    steps = _Steps(cpu_limit_s)
    config = _config()
    # the first parse and verify import most of sympy: done once, here, before the first fork
    gold, answer = (parse(t, extraction_config=config, parsing_timeout=None) for t in ("$x<1$", "$(0,1)$"))
    verify(gold, answer, timeout_seconds=None)
    out = sys.stdout
    sys.stdout = sys.stderr  # anything a library prints must not corrupt the protocol
    out.write(json.dumps({"ready": True, "cpu": round(time.process_time(), 4)}) + "\n")
    out.flush()
    while True:
        pid = os.fork()
        if pid == 0:  # the child answers until stdin closes; nothing of the parent's exit runs
            code = 1  # anything but 0 tells the parent process to fork another
            try:
                _serve(steps, parse_steps, verify_steps, out)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return  # stdin closed: the parent is done with this worker
        limit = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGPROF
        reply = {"ok": False, "error": "limit" if limit else "died", "cpu": cpu_limit_s if limit else 0.0}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
