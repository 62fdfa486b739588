"""Probability and rates: drawing without replacement, average speeds and work rates."""

from __future__ import annotations

import random
from fractions import Fraction

from diagevo.train.sim.questions.common import Draw, Writer
from diagevo.train.sim.text import NAMES

# ----------------------------------------------------------------------------- sampling without replacement


def _urn(rng: random.Random, d: int) -> tuple[int, int, int, str]:
    r = rng.randint(2, 6 + 2 * d)
    b = rng.randint(2, 6 + 2 * d)
    return r, b, r + b, rng.choice(("marbles", "balls", "cards", "tokens"))


def both_same(rng: random.Random, d: int) -> Draw:
    r, b, n, obj = _urn(rng, d)
    ans, trap = Fraction(r * (r - 1), n * (n - 1)), Fraction(r * r, n * n)
    return Draw(ans, trap, r=r, b=b, obj=obj, n=n)


def one_of_each(rng: random.Random, d: int) -> Draw:
    r, b, n, obj = _urn(rng, d)
    ans, trap = Fraction(2 * r * b, n * (n - 1)), Fraction(r * b, n * (n - 1))
    return Draw(ans, trap, r=r, b=b, obj=obj, n=n)


def at_least_one(rng: random.Random, d: int) -> Draw:
    r, b, n, obj = _urn(rng, d)
    ans, trap = 1 - Fraction(b * (b - 1), n * (n - 1)), 1 - Fraction(b * b, n * n)
    return Draw(ans, trap, r=r, b=b, obj=obj, n=n)


def second_draw(rng: random.Random, d: int) -> Draw:
    r, b, n, obj = _urn(rng, d)
    ans, trap = Fraction(r, n), Fraction(r - 1, n - 1)
    return Draw(ans, trap, r=r, b=b, obj=obj, one_obj=obj[:-1], n=n)


# ----------------------------------------------------------------------------- average rates


def _two_speeds(rng: random.Random, d: int) -> tuple[int, int]:
    while True:
        v1 = rng.randint(2, 12 + 4 * d) * 5
        v2 = rng.randint(2, 12 + 4 * d) * 5
        if v1 != v2:
            return v1, v2


def round_trip(rng: random.Random, d: int) -> Draw:
    v1, v2 = _two_speeds(rng, d)
    ans, trap = Fraction(2 * v1 * v2, v1 + v2), Fraction(v1 + v2, 2)
    return Draw(ans, trap, v1=v1, v2=v2)


def equal_times(rng: random.Random, d: int) -> Draw:
    v1, v2 = _two_speeds(rng, d)
    h = rng.randint(1, 4 + d)
    ans, trap = Fraction(v1 + v2, 2), Fraction(2 * v1 * v2, v1 + v2)
    return Draw(ans, trap, h=h, v1=v1, v2=v2)


def unequal_legs(rng: random.Random, d: int) -> Draw:
    v1, v2 = _two_speeds(rng, d)
    while True:
        d1, d2 = rng.randint(1, 6 + 2 * d) * 10, rng.randint(1, 6 + 2 * d) * 10
        if d1 != d2:
            break
    time = Fraction(d1, v1) + Fraction(d2, v2)
    ans, trap = (d1 + d2) / time, Fraction(d1 * v1 + d2 * v2, d1 + d2)
    return Draw(ans, trap, d1=d1, v1=v1, d2=d2, v2=v2, time=time)


def work_rate(rng: random.Random, d: int) -> Draw:
    while True:
        a = rng.randint(2, 8 + 4 * d)
        b = rng.randint(2, 8 + 4 * d)
        if a != b:
            break
    ans, trap = Fraction(a * b, a + b), Fraction(a + b, 2)
    x, y = rng.sample(NAMES, 2)
    return Draw(ans, trap, x=x, a=a, y=y, b=b, rate_sum=Fraction(a + b, a * b))


FAMILIES: dict[str, tuple[Writer, ...]] = {
    "sampling_without_replacement": (both_same, one_of_each, at_least_one, second_draw),
    "harmonic_average_speed": (round_trip, equal_times, unequal_legs, work_rate),
}
