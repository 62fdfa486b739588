"""Combinatorics: inclusion-exclusion, circular arrangements, diagonals of polygons."""

from __future__ import annotations

import math
import random

from diagevo.train.sim.questions.common import Draw, Writer

# ----------------------------------------------------------------------------- inclusion-exclusion


def _two_counts(rng: random.Random, d: int) -> tuple[int, int, int, int, int, int, int]:
    while True:
        p = rng.randint(2, 6 + d)
        q = rng.randint(p + 1, 9 + 2 * d)
        n = rng.randint(30, 100 + 150 * d)
        lcm = p * q // math.gcd(p, q)
        if n // lcm > 0:
            return p, q, n, lcm, n // p, n // q, n // lcm


def union_two(rng: random.Random, d: int) -> Draw:
    p, q, n, lcm, a, b, c = _two_counts(rng, d)
    return Draw(a + b - c, a + b, n=n, p=p, q=q, a=a, b=b, lcm=lcm, c=c)


def neither_complement(rng: random.Random, d: int) -> Draw:
    p, q, n, lcm, a, b, c = _two_counts(rng, d)
    u = a + b - c
    return Draw(n - u, u, n=n, p=p, q=q, a=a, b=b, lcm=lcm, c=c, u=u)


def three_sets(rng: random.Random, d: int) -> Draw:
    p, q, r = sorted(rng.sample((2, 3, 5, 7), 3))
    n = rng.randint(p * q * r + 5, 2 * p * q * r + 100 * d)
    a, b, c = n // p, n // q, n // r
    ab, ac, bc, abc = n // (p * q), n // (p * r), n // (q * r), n // (p * q * r)
    trap = a + b + c - ab - ac - bc
    return Draw(trap + abc, trap, n=n, p=p, q=q, r=r, a=a, b=b, c=c, ab=ab, ac=ac, bc=bc, abc=abc)


def exactly_one(rng: random.Random, d: int) -> Draw:
    p, q, n, lcm, a, b, c = _two_counts(rng, d)
    return Draw(a + b - 2 * c, a + b - c, n=n, p=p, q=q, a=a, b=b, c=c, lcm=lcm)


# ----------------------------------------------------------------------------- circular arrangements


def round_table(rng: random.Random, d: int) -> Draw:
    n = rng.randint(4, 6 + d)
    ans, trap = math.factorial(n - 1), math.factorial(n)
    return Draw(ans, trap, n=n)


def adjacent_block(rng: random.Random, d: int) -> Draw:
    n = rng.randint(5, 7 + d)
    units = n - 1
    ans, trap = 2 * math.factorial(units - 1), math.factorial(units - 1)
    return Draw(ans, trap, n=n, units=units)


def necklace_reflection(rng: random.Random, d: int) -> Draw:
    n = rng.randint(4, 6 + d)
    rot = math.factorial(n - 1)
    return Draw(rot // 2, rot, n=n, rot=rot)


def numbered_seats(rng: random.Random, d: int) -> Draw:
    n = rng.randint(4, 6 + d)
    ans, trap = math.factorial(n), math.factorial(n - 1)
    return Draw(ans, trap, n=n)


# ----------------------------------------------------------------------------- polygon diagonals


def sides_excluded(rng: random.Random, d: int) -> Draw:
    n = rng.randint(5, 10 + 6 * d)
    seg = n * (n - 1) // 2
    return Draw(seg - n, seg, n=n, seg=seg)


def one_vertex(rng: random.Random, d: int) -> Draw:
    n = rng.randint(5, 12 + 10 * d)
    return Draw(n - 3, n - 1, n=n)


def double_count(rng: random.Random, d: int) -> Draw:
    n = rng.randint(5, 10 + 6 * d)
    per = n - 3
    return Draw(n * per // 2, n * per, n=n, per=per)


FAMILIES: dict[str, tuple[Writer, ...]] = {
    "inclusion_exclusion": (union_two, neither_complement, three_sets, exactly_one),
    "circular_arrangements": (round_table, adjacent_block, necklace_reflection, numbered_seats),
    "polygon_diagonals": (sides_excluded, one_vertex, double_count),
}
