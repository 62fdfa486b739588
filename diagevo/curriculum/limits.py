"""What one math-verify operation may spend: Python calls for its parse and for its verify, and
CPU seconds.

Its own module because two processes read it: the checker (:mod:`diagevo.curriculum.equivalence`)
sends limits with a request, and the worker (:mod:`diagevo.curriculum.mathverify_worker`) applies
them. The worker imports sympy and math-verify at its top; the checker must not.
"""

from __future__ import annotations

from typing import NamedTuple

PARSE_STEPS = 2_000_000  # Python calls one parse may make (answers of the test pairs: < 60k)
VERIFY_STEPS = 4_000_000  # Python calls one verify may make (test pairs: < 600k)
CPU_LIMIT_S = 2.0  # CPU seconds one operation may use before the worker is ended


class Limits(NamedTuple):
    """What one operation may spend: Python calls for a parse and for a verify, and CPU seconds
    (0: no CPU-time limit). The worker's defaults come from its command line; a request may carry
    its own (``"steps"``, ``"cpu_s"``)."""

    parse_steps: int = PARSE_STEPS
    verify_steps: int = VERIFY_STEPS
    cpu_s: float = CPU_LIMIT_S
