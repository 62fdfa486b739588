"""Answer equivalence with a deterministic budget.

Order of checks, cheapest first: identical normalised keys; two plain rationals compared by
value; otherwise math-verify ``parse`` + ``verify`` in a child process
(:mod:`diagevo.curriculum.mathverify_worker`). Each operation there runs under a budget counted
in work (Python calls made, and limits on the sizes of powers and factorials), not in seconds,
so the same pair gets the same verdict on an idle or a saturated machine; an operation over its
budget answers "different" and is counted in :class:`CheckStats` (``over_budget``).

``timeout_s`` is only a liveness backstop for a worker that stops answering altogether (it would
have to hang in a C call that no size limit caught): the worker is then killed and the check
counted in ``timeouts``. It is set far above what any budgeted operation takes, so it decides
no verdict in practice. A check that raises or cannot reach the worker answers "different" too;
nothing raises into the caller.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from diagevo.curriculum.answers import answer_key, decimal_comma, is_decimal, normalize_answer, simple_number
from diagevo.curriculum.mathverify_worker import PARSE_STEPS, VERIFY_STEPS

ROUNDING_GAP = Fraction(1, 10**6)
MAX_ANSWER_CHARS = 2000  # longer answers are compared as strings only


@dataclass
class CheckStats:
    """Counters of the equivalence checks (a metric: read with :meth:`snapshot`)."""

    fast: int = 0  # equivalent() calls decided by key or rational value, no math-verify
    parses: int = 0  # math-verify parse operations sent
    verifies: int = 0  # math-verify verify operations sent
    unparsed: int = 0  # math-verify found no expression (compared as strings only)
    over_budget: int = 0  # an operation spent its work budget (deterministic; worker kept)
    timeouts: int = 0  # the worker stopped answering (liveness backstop); it was killed
    errors: int = 0  # math-verify raised, or the worker died / could not start
    skipped: int = 0  # not attempted: answer too long, failed before, or votes() budget spent
    starts: int = 0  # workers started (the first start included)

    @property
    def failures(self) -> int:
        """Checks that answered "different" because of a problem rather than a decision."""
        return self.over_budget + self.timeouts + self.errors + self.skipped

    def snapshot(self) -> dict[str, int]:
        return {**asdict(self), "failures": self.failures}


class _WorkerGone(Exception):
    pass


class EquivalenceChecker:
    """math-verify behind a killable child process; parsed answers are cached in the child.

    Thread-safe (one lock); meant to be shared, e.g. through :func:`default_checker`.
    """

    def __init__(
        self,
        timeout_s: float = 120.0,
        start_timeout_s: float = 60.0,
        max_cached: int = 20000,
        command: list[str] | None = None,
        parse_steps: int = PARSE_STEPS,
        verify_steps: int = VERIFY_STEPS,
    ):
        """``parse_steps``/``verify_steps`` are the work budgets of one operation (Python calls);
        ``timeout_s`` is the liveness backstop of one operation, ``start_timeout_s`` of a worker
        start; ``command`` replaces the worker command line (tests use fakes that hang or fail)."""
        # run by path: "-m diagevo..." would import the whole package (sklearn, scipy) first
        worker = str(Path(__file__).with_name("mathverify_worker.py"))
        self.command = command or [sys.executable, worker, str(parse_steps), str(verify_steps)]
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_cached = max_cached
        self.max_start_failures = 3  # then symbolic checks fail fast for retry_after_s
        self.retry_after_s = 60.0
        self.stats = CheckStats()
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = 0  # the process that started the worker (a forked child must not use it)
        self._ready = False
        self._buf = b""
        self._parse_ids: dict[str, tuple[int, bool]] = {}  # text -> (id, parsed ok) in this worker
        self._bad: set[str] = set()  # texts whose parse timed out or raised: never retried
        self._next_id = 0
        self._blamed = False
        self._budget = False  # the last failure was a spent work budget
        self._bad_pairs: set[tuple[str, str]] = set()
        self._verify_failures: dict[str, int] = {}
        self._start_failures = 0  # consecutive worker starts that never became ready
        self._retry_after = 0.0

    # -- worker management -------------------------------------------------------------
    def _start(self) -> bool:
        self._ready = False
        self._buf = b""
        self._parse_ids.clear()
        self._pid = os.getpid()
        try:
            self._proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
                close_fds=True,
            )
        except OSError:
            self._proc = None
            return False
        self.stats.starts += 1
        return True

    def close(self) -> None:
        """Kill the worker (it is restarted on the next symbolic check)."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is not None and self._pid == os.getpid():
                proc.kill()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                for stream in (proc.stdin, proc.stdout):
                    if stream is not None:
                        stream.close()
            self._ready = False
            self._parse_ids.clear()

    def _restart(self) -> None:
        self.close()
        self._start()  # begins importing math-verify in the background right away

    def _readline(self, deadline: float) -> dict[str, Any] | None:
        """The next reply, or None at the deadline. Raises _WorkerGone on EOF."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise _WorkerGone
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def _ensure_ready(self) -> bool:
        if self._start_failures >= self.max_start_failures and time.monotonic() < self._retry_after:
            self.stats.errors += 1  # the worker keeps failing to start: do not wait for it again
            return False
        if self._proc is None or self._pid != os.getpid() or self._proc.poll() is not None:
            if self._proc is not None and self._pid == os.getpid():
                self.close()
            if not self._start():
                self.stats.errors += 1
                return False
        if self._ready:
            return True
        try:
            reply = self._readline(time.monotonic() + self.start_timeout_s)
        except (_WorkerGone, ValueError):
            reply = None
        if not reply or not reply.get("ready"):
            self.stats.errors += 1
            self._start_failures += 1
            self._retry_after = time.monotonic() + self.retry_after_s
            self._restart()
            return False
        self._ready = True
        self._start_failures = 0
        return True

    def _call(self, request: dict[str, Any]) -> bool | None:
        """Send one operation; True/False is its answer, None a counted failure. After a
        failure, ``_blamed`` says whether the request itself timed out or raised."""
        self._blamed = False
        self._budget = False
        if not self._ensure_ready():
            return None
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            reply = self._readline(time.monotonic() + self.timeout_s)
        except (_WorkerGone, OSError, ValueError):
            self.stats.errors += 1
            self._blamed = True
            self._restart()
            return None
        if reply is None:
            self.stats.timeouts += 1
            self._blamed = True
            self._restart()
            return None
        if "error" in reply:
            if reply["error"] == "budget":
                self.stats.over_budget += 1
                self._budget = True
            else:
                self.stats.errors += 1
            self._blamed = True
            return None
        return bool(reply["ok"])

    # -- checks ----------------------------------------------------------------------------
    def _parse(self, text: str) -> int | None:
        """Worker-side id of the parsed ``text``; None when it does not parse or failed."""
        if text in self._bad:
            self.stats.skipped += 1
            return None
        if len(text) > MAX_ANSWER_CHARS:
            self.stats.skipped += 1
            return None
        cached = self._parse_ids.get(text)
        if cached is not None:
            return cached[0] if cached[1] else None
        if len(self._parse_ids) >= self.max_cached and self._call({"op": "forget"}):
            self._parse_ids.clear()
        pid = self._next_id
        self._next_id += 1
        self.stats.parses += 1
        ok = self._call({"op": "parse", "id": pid, "text": text})
        if ok is None:
            if not self._blamed:
                return None  # no worker: the text is not to blame, try it again next time
            self._bad.add(text)
            if len(self._bad) > self.max_cached:
                self._bad.clear()
            return None
        if not ok:
            self.stats.unparsed += 1
        if self._proc is not None and self._ready:
            self._parse_ids[text] = (pid, ok)
        return pid if ok else None

    def symbolic_equal(self, a: str, b: str) -> bool:
        """math-verify's verdict on two normalised answers (``a`` is the gold side).

        A pair whose verify failed is not tried again (its verdict would be the same). An answer
        involved in two verifies that timed out or raised is not tried again against any other
        answer (a sympy-hostile expression would otherwise cost a worker restart against every
        other answer); a spent work budget does not count here, so that a pair's verdict never
        depends on which pairs were checked before it."""
        with self._lock:
            if (a, b) in self._bad_pairs:
                self.stats.skipped += 1
                return False
            for _ in range(2):  # a second round if the worker restarted while parsing b
                ia = self._parse(a)
                ib = None if ia is None else self._parse(b)
                if ia is None or ib is None:
                    return False
                if self._parse_ids.get(a, (None, False))[0] == ia:
                    break
            else:
                return False
            self.stats.verifies += 1
            ok = self._call({"op": "verify", "a": ia, "b": ib})
            if ok is None and self._blamed:
                if len(self._bad_pairs) > self.max_cached:
                    self._bad_pairs.clear()
                    self._verify_failures.clear()
                self._bad_pairs.add((a, b))
                for text in () if self._budget else (a, b):
                    self._verify_failures[text] = self._verify_failures.get(text, 0) + 1
                    if self._verify_failures[text] >= 2:
                        self._bad.add(text)
            return bool(ok)

    def equivalent(self, a: str, b: str) -> bool:
        """Whether two answers are the same mathematical object (never raises; bounded work)."""
        ka, kb = answer_key(a), answer_key(b)
        if ka == kb:
            self.stats.fast += 1
            return bool(ka)
        va, vb = simple_number(ka), simple_number(kb)
        # a decimal comma (1,22 or 0,111) is read as such against an answer written as a decimal
        if va is None and vb is not None and is_decimal(kb):
            va = decimal_comma(ka)
        elif vb is None and va is not None and is_decimal(ka):
            vb = decimal_comma(kb)
        if va is not None and vb is not None:
            if va == vb:
                self.stats.fast += 1
                return True
            # math-verify compares a decimal with a number rounded to 6 places (1/12 = 0.0833333):
            # values further apart than 1e-6 never round equal; closer ones are left to it
            if not (is_decimal(ka) or is_decimal(kb)) or abs(va - vb) > ROUNDING_GAP:
                self.stats.fast += 1
                return False
        return self.symbolic_equal(normalize_answer(a), normalize_answer(b))


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


def answers_equivalent(a: str, b: str, checker: EquivalenceChecker | None = None) -> bool:
    """Budgeted equivalence of two answers, ``a`` as math-verify's gold side; failures count
    as different (see CheckStats). To ask whether a response agrees with a label, use :func:`agrees`."""
    return (checker or default_checker()).equivalent(a, b)


def agrees(answer: str | None, label: str | None, checker: EquivalenceChecker | None = None) -> bool:
    """Whether a response's final answer agrees with a (pseudo-)label.

    The one decision behind a vote's label class, the stored reference trajectory and the
    solver's +-1 reward, so a response counted in the label's class is never punished. math-verify
    is asymmetric (gold ``0<x<1`` accepts ``(0,1)``, gold ``(0,1)`` rejects ``0<x<1``); the label
    is always the gold side."""
    if answer is None or label is None or not answer.strip() or not label.strip():
        return False
    return (checker or default_checker()).equivalent(label, answer)


def check_stats() -> dict[str, int]:
    """Counters of the default checker."""
    return default_checker().stats.snapshot()
