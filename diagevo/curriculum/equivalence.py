"""Answer equivalence, bounded in work and in time.

Cheapest first: identical normalised keys; two plain rationals compared by value; an answer
that cannot be a final answer is different without a symbolic check; otherwise math-verify
``parse`` + ``verify`` in a child process (:mod:`diagevo.curriculum.mathverify_worker`), under
two bounds:

- a budget counted in work (Python calls, sizes of powers and factorials), so the same pair gets
  the same verdict on an idle or a saturated machine; past it the answer is "different",
  counted in :class:`CheckStats` (``over_budget``), and the worker stays;
- a limit in CPU time (``cpu_limit_s``) for the work the call count misses (one call into C can
  take seconds): the worker is ended, the check answers "different" (``timeouts``), and another
  worker starts at once.

An answer whose parse or check passes either bound is marked and never sent again (a memo of
:data:`MEMO_TEXTS` texts, kept in this process, so a worker restart does not forget it); the
rules of :mod:`diagevo.curriculum.costs` refuse, from the values it writes, what would pass
them. A response's check for the reward (its own limits, :data:`RESPONSE`) is instead a function
of the pair: counted from the worker's warm state in a child that served nothing before, and
remembered for the pair alone (:meth:`EquivalenceChecker._fresh_verify`). And a group of checks
has a CPU budget (:meth:`EquivalenceChecker.budget`: the votes of a question; and every
:data:`BATCH_CHECKS` checks, a verl batch of ``compute_score`` calls, earn :data:`BATCH_CPU_S`):
once it is spent the remaining symbolic checks are "different" unchecked, counted in
``out_of_budget``. So the CPU a batch can lose to hostile answers is bounded, not paid again for
each of them.

``timeout_s`` is a wall-clock backstop for a worker that stops answering. Nothing raises into
the caller. Checks run on a small pool of workers, one check per worker at a time, so a fast
answer does not queue behind a slow one unless every worker is busy; a worker starts only when
all the others are busy, since starting one costs about a second of CPU (importing sympy).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from diagevo.curriculum.answers import (
    answer_key,
    decimal_comma,
    is_decimal,
    normalize_answer,
    plausible_final_answer,
    simple_number,
)
from diagevo.curriculum.costs import weight
from diagevo.curriculum.limits import CPU_LIMIT_S, PARSE_STEPS, VERIFY_STEPS, Limits
from diagevo.curriculum.mathverify_process import Memo, Worker, WorkerGone

ROUNDING_GAP = Fraction(1, 10**6)
WORKERS = 4  # math-verify processes one checker runs at most (each holds sympy: ~150 MB)
MEMO_TEXTS = 4096  # answers over a limit remembered (the oldest forgotten first)
BATCH_CHECKS = 2048  # checks that earn one batch's CPU budget (a verl batch of compute_score calls)
BATCH_CPU_S = 24.0  # worker CPU seconds per BATCH_CHECKS checks (the benchmark's clean batch: 6)
VOTES_CPU_S = 10.0  # worker CPU seconds the votes of one question may spend
RESPONSE = Limits(parse_steps=200_000, verify_steps=150_000, cpu_s=0.4)
"""One response's own limits, for its parse and for its verify against the label (the reward's
check, :func:`verdict` with ``limits=RESPONSE``, counted from the worker's warm state): past them
the response is unchecked, whatever the others cost. The calls decide; the CPU limit is a backstop
for the work they miss (a call into C that runs long), set where no honest operation comes near
it: the answers of the benchmark's forms and of math-verify's pairs use at most 1.6 microseconds
a call and 0.16 s an operation within these calls (1.5 times that beside 15 busy processes), while
``\\sin(x)^{99}-x^{99}`` (4 microseconds a call) is cut there. The largest honest costs: 169,000
calls to parse ``[\\pi^2/8, 5\\pi^2/4]`` (full-context prediction, each time), 130,000 to verify
two equations of a line; 187 of math-verify's 210 pairs agree with it under these calls
(``tests/test_curriculum_math_verify_pairs.py``)."""

_UNKNOWN = object()  # no verdict remembered for a pair
Failure = Literal["unavailable", "lost", "failed", "over budget", "over limit"]
"""Why an operation has no answer: no worker (the request is not to blame); the worker's child
died or stopped answering (``lost``); math-verify raised; a limit passed."""
Verdict = bool | None
"""Whether two answers are the same object; None where the check ended without deciding (a limit
or a budget passed, the worker failed): "unchecked"."""


@dataclass
class CheckStats:
    """Counters of the equivalence checks (a metric: read with :meth:`snapshot`)."""

    fast: int = 0  # decided without math-verify: by key, rational value, or a response's remembered verdict
    parses: int = 0  # math-verify parse operations sent
    verifies: int = 0  # math-verify verify operations sent
    unparsed: int = 0  # math-verify found no expression (compared as strings only)
    over_budget: int = 0  # an operation spent its work budget (deterministic; worker kept)
    timeouts: int = 0  # an operation passed its CPU-time limit or the wall-clock backstop; worker ended
    errors: int = 0  # math-verify raised, or the worker died / could not start
    skipped: int = 0  # not attempted: not a plausible final answer, failed before, or votes() checks spent
    out_of_budget: int = 0  # not attempted: the CPU budget of the votes or of the batch was spent
    marked: int = 0  # answers marked after passing a limit (never sent again)
    starts: int = 0  # workers started (the first start included)

    @property
    def failures(self) -> int:
        """Checks that answered "different" because of a problem rather than a decision."""
        return self.over_budget + self.timeouts + self.errors + self.skipped + self.out_of_budget

    def snapshot(self) -> dict[str, int]:
        return {**asdict(self), "failures": self.failures}


@dataclass(eq=False)  # a scope is left by identity: two budgets may be equal
class Budget:
    """The worker CPU seconds a group of checks may spend (:meth:`EquivalenceChecker.budget`);
    each operation is charged what the worker measured, a cut one its CPU-time limit."""

    cpu_s: float
    spent: float = 0.0

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.cpu_s


class EquivalenceChecker:
    """math-verify behind a pool of killable child processes; parsed answers are cached in each.

    Thread-safe; meant to be shared, e.g. through :func:`default_checker`.
    """

    def __init__(
        self,
        timeout_s: float = 30.0,
        start_timeout_s: float = 60.0,
        max_cached: int = 20000,
        command: list[str] | None = None,
        parse_steps: int = PARSE_STEPS,
        verify_steps: int = VERIFY_STEPS,
        cpu_limit_s: float = CPU_LIMIT_S,
        workers: int = WORKERS,
        batch_cpu_s: float = BATCH_CPU_S,
        batch_checks: int = BATCH_CHECKS,
    ):
        """``parse_steps``/``verify_steps``: the work budgets of one operation (Python calls);
        ``cpu_limit_s``: its CPU-time limit (0: none); ``timeout_s``, ``start_timeout_s``: wall-clock
        backstops of an operation and of a worker start; ``command``: the worker's command line (tests
        use fakes that hang or fail); ``batch_cpu_s``: the worker CPU seconds every ``batch_checks``
        checks earn, up to that much in hand (``math.inf``: no batch budget)."""
        # run by path, a script of the installed package: -m would put the current folder first on its path
        worker = str(Path(__file__).with_name("mathverify_worker.py"))
        self.limits = Limits(parse_steps, verify_steps, cpu_limit_s)  # the worker's own: a label's, a vote's
        self.command = command or [sys.executable, worker, *map(str, self.limits)]
        self.timeout_s = timeout_s
        self.cpu_limit_s = cpu_limit_s
        self.start_timeout_s = start_timeout_s
        self.max_cached = max_cached
        self.workers = max(1, workers)
        self.max_start_failures = 3  # then symbolic checks fail fast for retry_after_s
        self.retry_after_s = 60.0
        self.stats = CheckStats()
        self._lock = threading.Lock()  # the pool, the stats and the sets below
        self._freed = threading.Condition(self._lock)
        self._pool: list[Worker] = []
        self._ids = itertools.count(1)  # names of parsed answers in the workers (never 0, never False)
        self._bad = Memo(MEMO_TEXTS)  # (text, limits) over a limit, or whose parse raised: never sent again
        self._pairs = Memo(max_cached)  # (a, b, limits) -> verdict: a response's check, a failed verify
        self._verify_failures: dict[str, int] = {}
        self._cleared: set[str] = set()  # texts in a verify that ended within its limits
        self.batch_cpu_s = batch_cpu_s
        self._earned = batch_cpu_s / max(1, batch_checks)  # CPU seconds each check adds to the batch's
        self._in_hand = batch_cpu_s  # the batch budget left (may go below 0 by one operation)
        self.cpu_spent = 0.0  # worker CPU seconds charged in all (not in stats: it varies a little with load)
        self._scopes = threading.local()  # this thread's open budgets (votes)
        self._start_failures = 0  # consecutive worker starts that never became ready
        self._retry_after = 0.0

    # -- the pool --------------------------------------------------------------------------
    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self.stats, name, getattr(self.stats, name) + 1)

    @contextlib.contextmanager
    def budget(self, cpu_s: float) -> Iterator[Budget]:
        """Checks made in this block, from this thread, share ``cpu_s`` worker CPU seconds (the
        votes of one question): once spent, the rest are "different" unchecked (``out_of_budget``).
        Budgets nest; the batch budget applies as well."""
        scope = Budget(cpu_s)
        stack: list[Budget] = self._scopes.__dict__.setdefault("stack", [])
        stack.append(scope)
        try:
            yield scope
        finally:
            stack.remove(scope)

    def _spent(self) -> bool:
        """Whether a budget of this check is spent (the caller holds the lock)."""
        stack: list[Budget] = self._scopes.__dict__.get("stack", [])
        return self._in_hand <= 0 or any(b.exhausted for b in stack)

    def _charge(self, cpu_s: float, limits: Limits) -> None:
        """Charge an operation to the open budgets, and to the batch's unless it ran under its own
        limits."""
        stack: list[Budget] = self._scopes.__dict__.get("stack", [])
        with self._lock:
            if limits == self.limits:
                self._in_hand -= cpu_s
            self.cpu_spent += cpu_s
        for b in stack:
            b.spent += cpu_s

    def _mark(self, limits: Limits, *texts: str) -> None:
        """Never send ``texts`` again under ``limits`` (the caller holds the lock)."""
        for text in texts:
            if self._bad.add((text, limits)):
                self.stats.marked += 1

    def _acquire(self) -> Worker:
        """The first free worker (the one a single caller always gets), a new one while the pool
        is not full, or else the first to be freed."""
        with self._freed:
            while True:
                w = next((w for w in self._pool if not w.busy), None)
                if w is None and len(self._pool) < self.workers:
                    w = Worker()
                    self._pool.append(w)
                if w is not None:
                    w.busy = True
                    return w
                self._freed.wait()

    def _release(self, w: Worker) -> None:
        with self._freed:
            w.busy = False
            self._freed.notify_all()  # a close() waits here too

    def close(self) -> None:
        """Kill the workers once the checks in flight are done (they start again when needed)."""
        with self._freed:
            while any(w.busy for w in self._pool):
                self._freed.wait()
            for w in self._pool:
                w.close()

    def _start(self, w: Worker) -> bool:
        if not w.start(self.command):
            return False
        self._count("starts")
        return True

    def _restart(self, w: Worker) -> bool:
        """Replace the worker's process (it imports math-verify in the background at once); whether
        the old one had ended itself over its CPU-time limit."""
        over_limit = w.close()
        self._start(w)
        return over_limit

    def _ensure_ready(self, w: Worker) -> bool:
        with self._lock:
            failing = self._start_failures >= self.max_start_failures and time.monotonic() < self._retry_after
        if failing:
            self._count("errors")  # workers keep failing to start: do not wait for one again
            return False
        if not w.usable():
            if w.proc is not None and w.pid == os.getpid():
                w.close()
            if not self._start(w):
                self._count("errors")
                return False
        if w.ready:
            return True
        try:
            reply = w.readline(time.monotonic() + self.start_timeout_s)
        except (WorkerGone, ValueError):
            reply = None
        w.ready = bool(reply and reply.get("ready"))
        with self._lock:
            self._start_failures = 0 if w.ready else self._start_failures + 1
            if not w.ready:
                self.stats.errors += 1
                self._retry_after = time.monotonic() + self.retry_after_s
        if not w.ready:
            self._restart(w)
        return w.ready

    def _call(self, w: Worker, request: dict[str, Any], limits: Limits | None = None) -> bool | Failure:
        """Send one operation to ``w`` under ``limits`` (the worker's own when None) and charge its
        CPU to the budgets: its answer, or why there is none ("unavailable": no worker, the request
        is not to blame)."""
        if not self._ensure_ready(w):
            return "unavailable"
        assert w.proc is not None and w.proc.stdin is not None
        limits = limits or self.limits
        if limits != self.limits:
            steps = limits.parse_steps if request["op"] == "parse" else limits.verify_steps
            request = {**request, "steps": steps, "cpu_s": limits.cpu_s}
        try:
            w.proc.stdin.write((json.dumps(request) + "\n").encode())
            reply = w.readline(time.monotonic() + self.timeout_s)
        except (WorkerGone, OSError, ValueError):
            over_limit = self._restart(w)
            self._count("timeouts" if over_limit else "errors")
            self._charge(limits.cpu_s if over_limit else 0.0, limits)
            return "over limit" if over_limit else "lost"
        if reply is None:
            self._count("timeouts")
            self._restart(w)
            self._charge(limits.cpu_s or self.timeout_s, limits)
            return "lost"
        self._charge(limits.cpu_s if reply.get("error") == "limit" else float(reply.get("cpu", 0.0)), limits)
        if "error" in reply:
            return self._failure(w, reply["error"])
        return bool(reply["ok"])

    def _failure(self, w: Worker, error: str) -> Failure:
        """Count an operation's error reply. "limit" and "died": the worker's child process ended
        and another took its place (the fork server), without the answers it had parsed."""
        if error in ("limit", "died"):
            w.parse_ids.clear()
            w.fresh = True
            self._count("timeouts" if error == "limit" else "errors")
            return "over limit" if error == "limit" else "lost"
        over = error == "budget"
        self._count("over_budget" if over else "errors")
        return "over budget" if over else "failed"

    # -- checks ----------------------------------------------------------------------------
    def _parse(self, w: Worker, text: str, limits: Limits, mark: bool = True) -> int | Literal[False] | Failure:
        """``w``'s id of the parsed ``text``; False when math-verify finds no expression in it (a
        decision); why not where the parse failed or passed ``limits`` (no decision), the text then
        marked, unless ``mark`` is False or no worker was to be had."""
        cached = w.parse_ids.get(text)
        if cached is not None:  # a parse that ended is the same under any limits
            return cached[0] if cached[1] else False
        if len(w.parse_ids) >= self.max_cached and self._call(w, {"op": "forget"}) is True:
            w.parse_ids.clear()
        pid = next(self._ids)
        self._count("parses")
        ok = self._call(w, {"op": "parse", "id": pid, "text": text}, limits)
        if not isinstance(ok, bool):
            if mark and ok != "unavailable":  # the text is to blame: never sent again under these limits
                with self._lock:
                    self._mark(limits, text)
            return ok
        if not ok:
            self._count("unparsed")
        if w.proc is not None and w.ready:
            w.parse_ids[text] = (pid, ok)
        return pid if ok else False

    def symbolic_equal(self, a: str, b: str, limits: Limits | None = None) -> Verdict:
        """math-verify's verdict on two normalised answers (``a`` is the gold side, parsed under
        the worker's own limits; ``b`` is parsed and the two verified under ``limits``, the worker's
        own when None). Different (False) without a check: an answer that cannot be a final answer.

        Under the worker's own limits (a label's, a vote's, a benchmark's gold) the worker reuses
        what it parsed before; unchecked (None): a pair whose verify failed, an answer marked after
        passing a limit (see :meth:`_blame`) or in two verifies that raised, and every pair once a
        budget of the check is spent (``out_of_budget``).

        Under limits of its own (one response's, :data:`RESPONSE`: the reward's) the verdict is a
        function of the pair (:meth:`_fresh_verify`): it draws on no budget, reads no mark another
        check left, and is remembered for the pair alone."""
        limits = limits or self.limits
        own = limits != self.limits
        with self._lock:
            if not (plausible_final_answer(a) and plausible_final_answer(b)):
                self.stats.skipped += 1
                return False
            known = self._pairs.get((a, b, limits), self._pairs.get((a, "", limits), _UNKNOWN))
            if known is _UNKNOWN and not own and ((a, self.limits) in self._bad or (b, limits) in self._bad):
                known = None
            if known is not _UNKNOWN:
                if known is None:
                    self.stats.skipped += 1
                else:
                    self.stats.fast += 1  # a response's verdict, remembered
                return known
            if not own and self._spent():
                self.stats.out_of_budget += 1
                return None
        w = self._acquire()
        try:
            return self._fresh_verify(w, a, b, limits) if own else self._verify(w, a, b)
        finally:
            self._release(w)

    def _fresh_verify(self, w: Worker, a: str, b: str, limits: Limits) -> Verdict:
        """One response's check, counted from the fork server's warm state: in a child that has
        served nothing (a ``fresh`` request ends one that has), the label parsed under the worker's
        own limits, then the response, and the two verified under ``limits``.

        Why: what an operation spends depends on what its process met before (ANTLR's prediction
        tables, sympy's caches beyond ``clear_cache``, the regex cache, math-verify's own), so
        whether an honest answer passed its limits depended on the answers checked before it (the
        same clean batch scored twice gave 28 different verdicts). From one state, in workers alike
        (:func:`~diagevo.curriculum.mathverify_worker._one_layout`), the calls are the same in any
        batch and order, and the verdict is remembered for the pair (for the label alone where the
        label's parse, which comes first, failed). Not the pair's, and not remembered: a worker
        that died or stopped answering (``lost``), or none at all. The price: a fork, the pages it
        copies and the label's parse, about 10-15 ms of CPU a pair."""
        if not w.fresh:
            if self._call(w, {"op": "fresh"}) is not True:
                return None
            w.parse_ids.clear()
        w.fresh = False
        ia = self._parse(w, a, self.limits, mark=False)
        if ia is False or isinstance(ia, str):
            return self._remember((a, "", limits), ia)
        ib = self._parse(w, b, limits, mark=False)
        if ib is False or isinstance(ib, str):
            return self._remember((a, b, limits), ib)
        self._count("verifies")
        return self._remember((a, b, limits), self._call(w, {"op": "verify", "a": ia, "b": ib}, limits))

    def _remember(self, key: tuple[str, str, Limits], found: bool | Failure) -> Verdict:
        """A response's verdict, remembered unless the worker rather than the pair was to blame."""
        if found in ("unavailable", "lost"):
            return None
        verdict = found if isinstance(found, bool) else None
        with self._lock:
            if self._pairs.add(key, verdict) and verdict is None:
                self.stats.marked += 1
        return verdict

    def _verify(self, w: Worker, a: str, b: str) -> Verdict:
        """A check under the worker's own limits, with the answers it parsed before."""
        for _ in range(2):  # a second round if the worker forgot or restarted while parsing b
            ia = self._parse(w, a, self.limits)
            if ia is False or isinstance(ia, str):
                return ia if ia is False else None
            ib = self._parse(w, b, self.limits)
            if ib is False or isinstance(ib, str):
                return ib if ib is False else None
            if w.parse_ids.get(a, (None, False))[0] == ia:
                break
        else:
            return None
        self._count("verifies")
        ok = self._call(w, {"op": "verify", "a": ia, "b": ib})
        if isinstance(ok, bool):
            with self._lock:
                if len(self._cleared) >= self.max_cached:
                    self._cleared.clear()
                self._cleared.update((a, b))
            return ok
        if ok == "unavailable":
            return None
        with self._lock:
            if len(self._verify_failures) > self.max_cached:
                self._verify_failures.clear()
            self._pairs.add((a, b, self.limits), None)
            if ok in ("over budget", "over limit"):
                self._mark(self.limits, *self._blame(a, b))
                return None
            for text in (a, b):
                self._verify_failures[text] = self._verify_failures.get(text, 0) + 1
                if self._verify_failures[text] >= 2:
                    self._mark(self.limits, text)
        return None

    def _blame(self, a: str, b: str) -> tuple[str, ...]:
        """The answers of a verify over a limit that are never sent again: those not known to be
        cheap (in a verify that ended within its limits); of two unknown ones, the heavier by
        :func:`~diagevo.curriculum.costs.weight` (both when they weigh the same). The label of a
        question is thus not marked because one hostile answer was checked against it."""
        suspects = [t for t in (a, b) if t not in self._cleared]
        if len(suspects) < 2:
            return tuple(suspects)
        wa, wb = weight(a), weight(b)
        return (a, b) if wa == wb else ((a,) if wa > wb else (b,))

    def check(self, a: str, b: str, limits: Limits | None = None) -> Verdict:
        """Whether two answers are the same mathematical object, None where unchecked (never
        raises; bounded work). ``limits``: see :meth:`symbolic_equal`. A check under the worker's
        own limits earns the batch budget its share (``batch_cpu_s / batch_checks``)."""
        if limits is None or limits == self.limits:
            with self._lock:
                self._in_hand = min(self.batch_cpu_s, self._in_hand + self._earned)
        ka, kb = answer_key(a), answer_key(b)
        if ka == kb:
            self._count("fast")
            return bool(ka)
        va, vb = simple_number(ka), simple_number(kb)
        # a decimal comma (1,22 or 0,111) is read as such against an answer written as a decimal
        if va is None and vb is not None and is_decimal(kb):
            va = decimal_comma(ka)
        elif vb is None and va is not None and is_decimal(ka):
            vb = decimal_comma(kb)
        if va is not None and vb is not None:
            if va == vb:
                self._count("fast")
                return True
            # math-verify compares a decimal with a number rounded to 6 places (1/12 = 0.0833333):
            # values further apart than 1e-6 never round equal; closer ones are left to it
            if not (is_decimal(ka) or is_decimal(kb)) or abs(va - vb) > ROUNDING_GAP:
                self._count("fast")
                return False
        return self.symbolic_equal(normalize_answer(a), normalize_answer(b), limits)

    def equivalent(self, a: str, b: str) -> bool:
        """Whether two answers are the same mathematical object: :meth:`check`, unchecked as
        different."""
        return self.check(a, b) is True


_default: EquivalenceChecker | None = None
_default_lock = threading.Lock()


def default_checker() -> EquivalenceChecker:
    """The process-wide checker used when none is passed."""
    global _default
    with _default_lock:
        if _default is None:
            _default = EquivalenceChecker()
            atexit.register(_default.close)
        return _default


def verdict(
    answer: str | None, label: str | None, checker: EquivalenceChecker | None = None, limits: Limits | None = None
) -> Verdict:
    """Whether a response's final answer agrees with a (pseudo-)label; None where its check passed
    a limit or a budget (unchecked). ``limits``: :data:`RESPONSE` for a reward, which charges the
    response alone; None, the worker's own, for a label or a benchmark's gold.

    The one decision behind a vote's label class, the stored reference trajectory and the
    solver's +-1 reward, so a response counted in the label's class is never punished.
    math-verify is asymmetric (gold ``0<x<1`` accepts ``(0,1)``, not the reverse); the label is
    always the gold side."""
    if answer is None or label is None or not answer.strip() or not label.strip():
        return False
    return (checker or default_checker()).check(label, answer, limits)


def agrees(answer: str | None, label: str | None, checker: EquivalenceChecker | None = None) -> bool:
    """:func:`verdict` under the worker's own limits, unchecked as different."""
    return verdict(answer, label, checker) is True
