"""Percentages: successive changes, and undoing a change to find the original amount."""

from __future__ import annotations

import random
from fractions import Fraction

from diagevo.train.sim.questions.common import Draw, Writer
from diagevo.train.sim.text import NAMES

# ----------------------------------------------------------------------------- successive changes


def up_then_down(rng: random.Random, d: int) -> Draw:
    price = 100 * rng.randint(2, 9 + 5 * d)
    p = 10 * rng.randint(1, 5 + d)
    q = 10 * rng.randint(1, 5)
    p1 = Fraction(price * (100 + p), 100)
    ans = p1 * Fraction(100 - q, 100)
    trap = Fraction(price * (100 + p - q), 100)
    return Draw(ans, trap, price=price, p=p, q=q, p1=p1)


def compound_years(rng: random.Random, d: int) -> Draw:
    price = 100 * rng.randint(1, 9 + 5 * d)
    p = 10 * rng.randint(1, 3 + d)
    n = 2 if d < 2 else rng.randint(2, 3)
    ans = Fraction(price * (100 + p) ** n, 100**n)
    trap = Fraction(price * (100 + n * p), 100)
    return Draw(ans, trap, price=price, p=p, n=n)


def points_vs_percent(rng: random.Random, d: int) -> Draw:
    a = rng.choice((4, 5, 8, 10, 12, 15, 20, 25, 30, 40))
    b = a + rng.randint(1, 10 + 5 * d)
    ans = Fraction(100 * (b - a), a)
    return Draw(ans, b - a, a=a, b=b)


# ----------------------------------------------------------------------------- reverse percentages


def undo_discount(rng: random.Random, d: int) -> Draw:
    p = 5 * rng.randint(2, 8 + d)
    orig = 20 * rng.randint(3, 30 + 20 * d)
    final = Fraction(orig * (100 - p), 100)
    trap = final * Fraction(100 + p, 100)
    return Draw(orig, trap, p=p, final=final, orig=orig)


def undo_raise(rng: random.Random, d: int) -> Draw:
    p = 5 * rng.randint(2, 8 + d)
    orig = 20 * rng.randint(3, 30 + 20 * d)
    final = Fraction(orig * (100 + p), 100)
    trap = final * Fraction(100 - p, 100)
    return Draw(orig, trap, p=p, final=final, orig=orig)


def tax_inclusive(rng: random.Random, d: int) -> Draw:
    p = 5 * rng.randint(1, 5 + d)
    orig = 20 * rng.randint(3, 30 + 20 * d)
    total = Fraction(orig * (100 + p), 100)
    ans, trap = Fraction(orig * p, 100), total * Fraction(p, 100)
    return Draw(ans, trap, total=total, p=p, orig=orig)


def percent_less(rng: random.Random, d: int) -> Draw:
    p = rng.choice((10, 20, 25, 30, 40, 50, 60, 75, 80, 100, 150, 200)[: 8 + 2 * d])
    ans = Fraction(100 * p, 100 + p)
    x, y = rng.sample(NAMES, 2)
    return Draw(ans, p, x=x, p=p, y=y)


FAMILIES: dict[str, tuple[Writer, ...]] = {
    "successive_percentages": (up_then_down, compound_years, points_vs_percent),
    "reverse_percentage": (undo_discount, undo_raise, tax_inclusive, percent_less),
}
