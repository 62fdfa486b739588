"""Number theory: remainders of negative numbers, cycles of units digits, counting with inclusive ends."""

from __future__ import annotations

import random

from diagevo.train.sim.questions.common import Draw, Writer
from diagevo.train.sim.text import NAMES, OBJECTS

# ----------------------------------------------------------------------------- negative remainders


def _not_divisible(rng: random.Random, d: int) -> tuple[int, int, int, int]:
    """A number ``n`` and a divisor ``m`` that leaves a remainder, with ``n``'s quotient and remainder."""
    while True:
        n = rng.randint(10, 60 * (d + 1))
        m = rng.randint(3, 9 + 2 * d)
        if n % m:
            return n, m, *divmod(n, m)


def negated_residue(rng: random.Random, d: int) -> Draw:
    n, m, q, r = _not_divisible(rng, d)
    ans, trap = (-n) % m, -r
    return Draw(ans, trap, n=n, m=m, q=q, r=r)


def floor_quotient(rng: random.Random, d: int) -> Draw:
    n, m, q, r = _not_divisible(rng, d)
    return Draw(-(q + 1), -q, n=n, m=m, q=q, r=r)


def negative_congruence(rng: random.Random, d: int) -> Draw:
    while True:
        m = rng.randint(5, 11 + 3 * d)
        a = rng.randint(m + 1, 40 + 50 * d)
        q, r = divmod(a, m)
        if r and 2 * r != m:
            break
    return Draw(m - r, r, a=a, m=m, q=q, r=r)


# ----------------------------------------------------------------------------- units digits

_CYCLES = {2: (2, 4, 8, 6), 3: (3, 9, 7, 1), 7: (7, 9, 3, 1), 8: (8, 4, 2, 6)}


def cycle_index(rng: random.Random, d: int) -> Draw:
    digit = rng.choice(tuple(_CYCLES))
    base = digit + 10 * rng.randint(0, 2 + 3 * d)
    while True:
        n = rng.randint(5, 40 + 60 * d)
        if n % 4:
            break
    cyc = _CYCLES[digit]
    r = n % 4
    ans, trap = cyc[(n - 1) % 4], cyc[r]
    return Draw(ans, trap, base=base, n=n, cyc0=cyc[0], cyc1=cyc[1], cyc2=cyc[2], cyc3=cyc[3], r=r)


def zero_remainder(rng: random.Random, d: int) -> Draw:
    digit = rng.choice((2, 8))
    base = digit + 10 * rng.randint(0, 2 + 3 * d)
    n = 4 * rng.randint(2, 10 + 15 * d)
    c = rng.randint(1, 9 + 40 * d)
    cyc = _CYCLES[digit]
    ans, trap = (cyc[3] + c) % 10, (1 + c) % 10
    return Draw(ans, trap, base=base, n=n, c=c, cyc0=cyc[0], cyc1=cyc[1], cyc2=cyc[2], cyc3=cyc[3])


def exponent_mod_ten(rng: random.Random, d: int) -> Draw:
    digit = rng.choice(tuple(_CYCLES))
    base = digit + 10 * rng.randint(0, 2 + 3 * d)
    cyc = _CYCLES[digit]
    while True:
        n = rng.randint(11, 40 + 60 * d)
        r4, r10 = n % 4, n % 10
        ans, trap = cyc[(n - 1) % 4], cyc[(r10 - 1) % 4]
        if r10 and trap != ans:
            break
    return Draw(ans, trap, base=base, n=n, cyc0=cyc[0], cyc1=cyc[1], cyc2=cyc[2], cyc3=cyc[3], r4=r4, r10=r10)


# ----------------------------------------------------------------------------- inclusive counting


def inclusive_range(rng: random.Random, d: int) -> Draw:
    step = 1 if d < 2 or rng.random() < 0.5 else rng.randint(2, 3 + d)
    a = step * rng.randint(2, 20 + 20 * d)
    b = a + step * rng.randint(5, 30 + 40 * d)
    span = (b - a) // step
    name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
    among = range(4) if step == 1 else range(4, 6)  # the templates of steps of 1, of larger steps
    return Draw(span + 1, span, among=among, a=a, b=b, name=name, obj=obj, step=step, span=span)


def exclusive_range(rng: random.Random, d: int) -> Draw:
    a = rng.randint(2, 30 + 30 * d)
    b = a + rng.randint(5, 30 + 40 * d)
    span = b - a
    name = rng.choice(NAMES)
    return Draw(span - 1, span + 1, a=a, b=b, name=name, span=span)


def closed_loop(rng: random.Random, d: int) -> Draw:
    gap = rng.choice((2, 3, 4, 5, 6, 8, 10))
    n = rng.randint(6, 30 + 40 * d)
    length = gap * n
    return Draw(n, n + 1, gap=gap, length=length, n=n)


FAMILIES: dict[str, tuple[Writer, ...]] = {
    "negative_remainder": (negated_residue, floor_quotient, negative_congruence),
    "units_digit_cycle": (cycle_index, zero_remainder, exponent_mod_ten),
    "inclusive_counting": (inclusive_range, exclusive_range, closed_loop),
}
