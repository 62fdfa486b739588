"""Algebra: extraneous roots, domains of logarithms, inequalities whose sign flips, AM-GM's equality case."""

from __future__ import annotations

import math
import random
from fractions import Fraction

from diagevo.train.sim.questions.common import Draw, Writer, aggregate, combine
from diagevo.train.sim.text import lin, quad

# ----------------------------------------------------------------------------- extraneous roots


def radical_sign(rng: random.Random, d: int) -> Draw:
    while True:
        k = rng.randint(2, 3 + 2 * d)
        b = rng.randint(0, 2 + 2 * d)
        r = b + k
        a = k * k - r
        r2 = 2 * b + 1 - r
        agg = aggregate(rng)
        ans, trap = r, combine(agg, [r, r2])
        if r2 != 0 and trap != ans:
            break
    eq = f"\\sqrt{{{lin('x', a)}}} = {lin('x', -b)}"
    return Draw(
        ans,
        trap,
        agg=agg,
        eq=eq,
        x_plus_a=lin("x", a),
        x_minus_b=lin("x", -b),
        squared=quad(-(2 * b + 1), b * b - a),
        x_minus_r=lin("x", -r),
        x_minus_r2=lin("x", -r2),
        r=r,
        r2=r2,
        b=b,
    )


def rational_pole(rng: random.Random, d: int) -> Draw:
    while True:
        r = rng.randint(2, 4 + 2 * d) * rng.choice((1, -1))
        s = rng.randint(-5 - 2 * d, 6 + 2 * d)
        agg = aggregate(rng)
        ans, trap = s, combine(agg, [r, s])
        if s not in (0, r) and trap != ans:
            break
    eq = f"\\frac{{{quad(-(r + s), 0)}}}{{{lin('x', -r)}}} = \\frac{{{-r * s}}}{{{lin('x', -r)}}}"
    return Draw(
        ans,
        trap,
        agg=agg,
        eq=eq,
        x_minus_r=lin("x", -r),
        cleared_lhs=quad(-(r + s), 0),
        cleared=quad(-(r + s), r * s),
        x_minus_s=lin("x", -s),
        r=r,
        s=s,
    )


def abs_of_square(rng: random.Random, d: int) -> Draw:
    a = rng.randint(-4 - d, 6 + 2 * d)
    m = rng.randint(3, 8 + 4 * d)
    ans, trap = m + 1, 2 * m + 1
    eq = f"\\sqrt{{({lin('x', -a)})^2}} = {lin('x', -a)}"
    return Draw(ans, trap, eq=eq, x_minus_a=lin("x", -a), a=a, m=m)


def plus_minus_root(rng: random.Random, d: int) -> Draw:
    while True:
        b = rng.randint(-4 - d, 6 + 2 * d)
        k = rng.randint(2, 5 + 2 * d)
        agg = aggregate(rng)
        ans, trap = combine(agg, [b + k, b - k]), b + k
        if ans != trap:
            break
    eq = f"({lin('x', -b)})^2 = {k * k}"
    return Draw(ans, trap, agg=agg, eq=eq, b=b, x_minus_b=lin("x", -b), k=k)


# ----------------------------------------------------------------------------- log domain


def argument_positive(rng: random.Random, d: int) -> Draw:
    while True:
        a = rng.randint(-3, 4 + d)
        b = a + rng.randint(1, 3 + d)
        r = b + rng.randint(1, 4 + d)
        s = a + b - r
        c = (r - a) * (r - b)
        agg = aggregate(rng)
        ans, trap = r, combine(agg, [r, s])
        if s != 0 and trap != ans and s != r:
            break
    base = rng.choice(("2", "3", "10"))
    eq = f"\\log_{{{base}}}({lin('x', -a)}) + \\log_{{{base}}}({lin('x', -b)}) = \\log_{{{base}}} {c}"
    return Draw(
        ans,
        trap,
        agg=agg,
        eq=eq,
        x_minus_a=lin("x", -a),
        x_minus_b=lin("x", -b),
        c=c,
        combined=quad(-(a + b), a * b - c),
        x_minus_r=lin("x", -r),
        x_minus_s=lin("x", -s),
        r=r,
        s=s,
        a=a,
    )


def base_domain(rng: random.Random, d: int) -> Draw:
    s = rng.randint(2, 6 + 3 * d)
    e = 2 if d < 2 or rng.random() < 0.5 else 4
    c = s**e
    agg = aggregate(rng)
    ans, trap = s, combine(agg, [s, -s])
    return Draw(ans, trap, agg=agg, c=c, e=e, s=s)


def power_rule(rng: random.Random, d: int) -> Draw:
    base = rng.choice((2, 3) if d < 2 else (2, 3, 5))
    k = rng.randint(1, 2 + d)
    v = base**k
    agg = aggregate(rng)
    ans, trap = combine(agg, [v, -v]), v
    return Draw(ans, trap, agg=agg, base=base, v=v, k=k)


# ----------------------------------------------------------------------------- inequalities


def divide_negative(rng: random.Random, d: int) -> Draw:
    while True:
        a = rng.randint(2, 4 + d)
        t_ = rng.randint(2, 6 + 2 * d)
        rem = rng.randint(0, a - 1)
        c = rng.randint(-5, 10 + 3 * d)
        b = c + a * t_ + rem
        m = t_ + rng.randint(3, 8 + 2 * d)
        q = Fraction(b - c, a)
        ceil_q = math.ceil(q)
        trap = m - ceil_q + 1
        if trap != t_ and trap > 0:
            break
    ineq = (f"{b} - {a}x \\ge {c}", f"{c} \\le {b} - {a}x", f"-{a}x + {b} \\ge {c}")[rng.randrange(3)]
    return Draw(t_, trap, m=m, ineq=ineq, a=a, q=q, t_=t_, ceil_q=ceil_q, c=c, b=b)


def reciprocal(rng: random.Random, d: int) -> Draw:
    while True:
        c = rng.randint(3, 8 + 3 * d)
        m = c + rng.randint(2, 8 + 4 * d)
        ans, trap = m - c, c - 1
        if ans != trap:
            break
    ineq = rng.choice((f"\\frac{{1}}{{x}} < \\frac{{1}}{{{c}}}", f"\\frac{{1}}{{{c}}} > \\frac{{1}}{{x}}"))
    return Draw(ans, trap, m=m, ineq=ineq, c=c)


def square_bound(rng: random.Random, d: int) -> Draw:
    s = rng.randint(2, 4 + 2 * d)
    big = s * s + rng.randint(1, 2 * s + 1)
    m = s + rng.randint(2, 6 + 2 * d)
    ans, trap = 2 * s + 1, s + m + 1
    return Draw(ans, trap, m=m, big=big, s=s)


def abs_bound(rng: random.Random, d: int) -> Draw:
    a = rng.randint(-5, 8 + 3 * d)
    c = rng.randint(2, 5 + 2 * d)
    m = c + rng.randint(1, 5 + 2 * d)
    ans, trap = 2 * c - 1, m + c
    return Draw(ans, trap, x_minus_a=lin("x", -a), c=c, a=a, m=m)


# ----------------------------------------------------------------------------- AM-GM


def endpoint_lower(rng: random.Random, d: int) -> Draw:
    s = rng.randint(2, 4 + d)
    m = s + rng.randint(1, 3 + d)
    k = s * s
    ans = Fraction(m * m + k, m)
    return Draw(ans, 2 * s, k=k, m=m, s=s)


def endpoint_upper(rng: random.Random, d: int) -> Draw:
    s = rng.randint(3, 5 + d)
    m = rng.randint(1, s - 1)
    k = s * s
    ans = Fraction(m * m + k, m)
    return Draw(ans, 2 * s, k=k, m=m, s=s)


def integer_equality(rng: random.Random, d: int) -> Draw:
    a = rng.randint(2, 9 + 6 * d)
    total = 2 * a + 1
    ans, trap = a * (a + 1), Fraction(total * total, 4)
    return Draw(ans, trap, total=total, a=a)


def negative_terms(rng: random.Random, d: int) -> Draw:
    s = rng.randint(2, 6 + 3 * d)
    k = s * s
    return Draw(-2 * s, 2 * s, k=k, s=s)


FAMILIES: dict[str, tuple[Writer, ...]] = {
    "extraneous_roots": (radical_sign, rational_pole, abs_of_square, plus_minus_root),
    "sign_flip_inequality": (divide_negative, reciprocal, square_bound, abs_bound),
    "amgm_equality": (endpoint_lower, endpoint_upper, integer_equality, negative_terms),
    "log_domain": (argument_positive, base_domain, power_rule),
}
