"""Skill families: procedural generators of questions with one trap each.

A family knows how to write a question at a difficulty level (0-3), its true answer, the answer
of a solver that misapplies the family's skill (the trap), and both solution paths as steps.
The two paths share ``lead`` steps and diverge at the first step of ``right`` / ``wrong``; that
divergence is what the simulated diagnostician looks for. Steps carry no context words, only
numbers, so two steps of one family differ only numerically unless the reasoning differs.

Every family also carries the texts the language side of the world needs: a skill description
(what the challenger matches a cause text against through the embedding model) and 10-20 word
verb-object cause paraphrases (what the simulated diagnostician reports, Appendix J). Areas are
the knowledge areas skill nodes correspond to; each has several 10-20 word node labels.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from diagevo.train.sim.text import NAMES, OBJECTS, fmt_num, lin, quad


@dataclass(frozen=True, slots=True)
class Instance:
    family: str
    template: int  # surface template used (a "context" for transfer)
    text: str
    answer: Fraction
    trap: Fraction
    lead: tuple[str, ...]
    right: tuple[str, ...]
    wrong: tuple[str, ...]


Maker = Callable[[random.Random, int], Instance]


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    area: str
    skill: str
    causes: tuple[str, ...]
    make: Maker
    templates: int


def _agg(rng: random.Random) -> str:
    return rng.choice(("sum", "product"))


def _combine(agg: str, xs: list[int]) -> int:
    return sum(xs) if agg == "sum" else math.prod(xs)


# ----------------------------------------------------------------------------- algebra


def _extraneous(rng: random.Random, d: int) -> Instance:
    while True:
        k = rng.randint(2, 3 + 2 * d)
        b = rng.randint(0, 2 + 2 * d)
        r = b + k
        a = k * k - r
        r2 = 2 * b + 1 - r
        agg = _agg(rng)
        ans, trap = r, _combine(agg, [r, r2])
        if r2 != 0 and trap != ans:
            break
    eq = f"\\sqrt{{{lin('x', a)}}} = {lin('x', -b)}"
    t = rng.randrange(4)
    text = (
        f"Find the {agg} of all real numbers x satisfying {eq}.",
        f"Solve the equation {eq} over the real numbers and report the {agg} of every solution.",
        f"{rng.choice(NAMES)} is asked for the {agg} of all real values of x that make {eq} true. What is it?",
        f"Determine the {agg} of the real roots of the radical equation {eq}.",
    )[t]
    lead = (
        f"Square both sides: {lin('x', a)} = ({lin('x', -b)})^2, so {quad(-(2 * b + 1), b * b - a)} = 0.",
        f"Factor: ({lin('x', -r)})({lin('x', -r2)}) = 0, which gives the candidates x = {r} and x = {r2}.",
    )
    right = (
        f"Check each candidate in the original radical equation: at x = {r2} the right side is {r2 - b}, "
        f"negative, while a square root is never negative, so x = {r2} is extraneous.",
        f"Only x = {r} survives, so the {agg} of the solutions is {ans}.",
    )
    wrong = (
        f"Both candidates of the squared equation, x = {r} and x = {r2}, are taken as roots of the radical equation.",
        f"So the {agg} of the solutions is {trap}.",
    )
    return Instance("extraneous_roots", t, text, Fraction(ans), Fraction(trap), lead, right, wrong)


def _log_domain(rng: random.Random, d: int) -> Instance:
    while True:
        a = rng.randint(-3, 4 + d)
        b = a + rng.randint(1, 3 + d)
        r = b + rng.randint(1, 4 + d)
        s = a + b - r
        c = (r - a) * (r - b)
        agg = _agg(rng)
        ans, trap = r, _combine(agg, [r, s])
        if s != 0 and trap != ans and s != r:
            break
    base = rng.choice(("2", "3", "10"))
    eq = f"\\log_{{{base}}}({lin('x', -a)}) + \\log_{{{base}}}({lin('x', -b)}) = \\log_{{{base}}} {c}"
    t = rng.randrange(3)
    text = (
        f"Find the {agg} of all real solutions of {eq}.",
        f"All real numbers x with {eq} are collected. What is their {agg}?",
        f"Consider the logarithmic equation {eq}. Compute the {agg} of its real solutions.",
    )[t]
    lead = (
        f"Combine the logarithms: ({lin('x', -a)})({lin('x', -b)}) = {c}, so {quad(-(a + b), a * b - c)} = 0.",
        f"Factor: ({lin('x', -r)})({lin('x', -s)}) = 0, giving x = {r} or x = {s}.",
    )
    right = (
        f"Check the domain of each logarithm: at x = {s} the argument {lin('x', -a)} equals {s - a}, "
        f"which is not positive, so the logarithm is undefined and x = {s} is rejected.",
        f"The only solution is x = {r}, so the {agg} is {ans}.",
    )
    wrong = (
        f"Keep both values x = {r} and x = {s} from the quadratic as solutions of the logarithmic equation.",
        f"Their {agg} is {trap}.",
    )
    return Instance("log_domain", t, text, Fraction(ans), Fraction(trap), lead, right, wrong)


def _sign_flip(rng: random.Random, d: int) -> Instance:
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
    t = rng.randrange(3)
    ineq = (f"{b} - {a}x \\ge {c}", f"{c} \\le {b} - {a}x", f"-{a}x + {b} \\ge {c}")[rng.randrange(3)]
    text = (
        f"How many integers x with 1 \\le x \\le {m} satisfy {ineq}?",
        f"Count the integers x between 1 and {m} inclusive for which {ineq} holds.",
        f"{rng.choice(NAMES)} lists every integer x from 1 to {m} that satisfies {ineq}. How many integers are on the list?",
    )[t]
    lead = (f"Move the constant term: -{a}x \\ge {c - b}.",)
    right = (
        f"Divide by the negative number -{a} and reverse the inequality sign: x \\le {fmt_num(q)}.",
        f"The integers 1 through {t_} qualify, so the count is {t_}.",
    )
    wrong = (
        f"Divide by -{a} keeping the same inequality direction: x \\ge {fmt_num(q)}.",
        f"The integers from {ceil_q} to {m} qualify, so the count is {trap}.",
    )
    return Instance("sign_flip_inequality", t, text, Fraction(t_), Fraction(trap), lead, right, wrong)


def _amgm(rng: random.Random, d: int) -> Instance:
    s = rng.randint(2, 4 + d)
    m = s + rng.randint(1, 3 + d)
    k = s * s
    ans = Fraction(m * m + k, m)
    t = rng.randrange(3)
    text = (
        f"Find the minimum value of f(x) = x + {k}/x over all real x \\ge {m}.",
        f"For real numbers x with x \\ge {m}, what is the smallest possible value of x + \\frac{{{k}}}{{x}}?",
        f"A quantity depends on x \\ge {m} as x + {k}/x. Determine its least value on this range.",
    )[t]
    lead = (f"By AM-GM, x + {k}/x \\ge 2\\sqrt{{{k}}} = {2 * s}, with equality exactly when x = {s}.",)
    right = (
        f"The equality point x = {s} lies outside the allowed range x \\ge {m}, so the bound is not attained; "
        f"the function increases for x \\ge {s}, so the minimum is at the endpoint x = {m}.",
        f"The minimum value is {m} + {k}/{m} = {fmt_num(ans)}.",
    )
    wrong = (
        "Take the AM-GM lower bound as the minimum without checking whether its equality condition is allowed.",
        f"The minimum value is {2 * s}.",
    )
    return Instance("amgm_equality", t, text, ans, Fraction(2 * s), lead, right, wrong)


# ----------------------------------------------------------------------------- number theory


def _neg_remainder(rng: random.Random, d: int) -> Instance:
    while True:
        n = rng.randint(10, 60 * (d + 1))
        m = rng.randint(3, 9 + 2 * d)
        if n % m:
            break
    q, r = divmod(n, m)
    ans, trap = (-n) % m, -r
    t = rng.randrange(4)
    text = (
        f"What is the remainder when -{n} is divided by {m}?",
        f"Find the remainder r with 0 \\le r < {m} in the division of -{n} by {m}.",
        f"A pointer on a dial with positions 0 to {m - 1} starts at 0 and moves {n} steps backwards. "
        f"At which position does it stop?",
        f"Compute -{n} \\bmod {m}, the remainder given by the division algorithm.",
    )[t]
    lead = (f"Divide: {n} = {m} \\cdot {q} + {r}, so -{n} = -{m} \\cdot {q} - {r}.",)
    right = (
        f"A remainder must lie between 0 and {m - 1}, so borrow one more multiple: -{n} = {m} \\cdot (-{q + 1}) + {m - r}.",
        f"The remainder is {ans}.",
    )
    wrong = (f"Take the remainder of -{n} to be the negated remainder -{r} directly.", f"The remainder is {trap}.")
    return Instance("negative_remainder", t, text, Fraction(ans), Fraction(trap), lead, right, wrong)


_CYCLES = {2: (2, 4, 8, 6), 3: (3, 9, 7, 1), 7: (7, 9, 3, 1), 8: (8, 4, 2, 6)}


def _units_cycle(rng: random.Random, d: int) -> Instance:
    digit = rng.choice(tuple(_CYCLES))
    base = digit + 10 * rng.randint(0, 2 + 3 * d)
    n = rng.randint(5, 40 + 60 * d)
    cyc = _CYCLES[digit]
    r = n % 4
    ans, trap = cyc[(n - 1) % 4], cyc[r]
    t = rng.randrange(3)
    text = (
        f"What is the units digit of {base}^{{{n}}}?",
        f"Find the last digit of the number {base} raised to the power {n}.",
        f"{rng.choice(NAMES)} multiplies {base} by itself repeatedly until there are {n} factors. "
        f"Which digit ends the product?",
    )[t]
    lead = (
        f"The units digits of powers of {base} repeat with period 4: {cyc[0]}, {cyc[1]}, {cyc[2]}, {cyc[3]}.",
        f"The exponent {n} leaves remainder {r} when divided by 4.",
    )
    right = (
        f"The cycle starts at exponent 1, so remainder {r} picks position {(n - 1) % 4 + 1} of the cycle "
        f"(remainder 0 meaning the last position).",
        f"The units digit is {ans}.",
    )
    wrong = (
        f"Use the remainder {r} as a zero-based index into the listed cycle, landing on position {r + 1}.",
        f"The units digit is {trap}.",
    )
    return Instance("units_digit_cycle", t, text, Fraction(ans), Fraction(trap), lead, right, wrong)


def _inclusive(rng: random.Random, d: int) -> Instance:
    step = 1 if d < 2 else rng.randint(2, 3 + d)
    a = step * rng.randint(2, 20 + 20 * d)
    b = a + step * rng.randint(5, 30 + 40 * d)
    span = (b - a) // step
    ans, trap = span + 1, span
    name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
    if step == 1:
        t = rng.randrange(4)
        text = (
            f"{name} reads a book from page {a} through page {b}, inclusive. How many pages does {name} read?",
            f"How many integers are there from {a} to {b}, including both ends?",
            f"Seats in a hall are numbered consecutively; {name}'s group occupies seats {a} through {b}. "
            f"How many seats is that?",
            f"{name} labels {obj} with every whole number from {a} up to and including {b}. How many labels are used?",
        )[t]
    else:
        t = 4 + rng.randrange(2)
        text = (
            f"How many multiples of {step} lie between {a} and {b}, inclusive?",
            f"{name} paints every {step}th fence post, starting with post {a} and ending with post {b}. "
            f"How many posts are painted?",
        )[t - 4]
    lead = (f"The distance from {a} to {b} measured in steps of {step} is ({b} - {a})/{step} = {span}.",)
    right = (f"Both endpoints are included, so the count is one more than the number of gaps: {span} + 1 = {ans}.",)
    wrong = (f"Take the number of gaps as the count of items, giving {trap}.",)
    return Instance("inclusive_counting", t, text, Fraction(ans), Fraction(trap), lead, right, wrong)


# ----------------------------------------------------------------------------- combinatorics


def _incl_excl(rng: random.Random, d: int) -> Instance:
    while True:
        p = rng.randint(2, 6 + d)
        q = rng.randint(p + 1, 9 + 2 * d)
        n = rng.randint(30, 100 + 150 * d)
        lcm = p * q // math.gcd(p, q)
        if n // lcm > 0:
            break
    a, b, c = n // p, n // q, n // lcm
    neither = rng.random() < 0.4
    ans, trap = a + b - c, a + b
    if neither:
        ans, trap = n - ans, n - trap
    t = rng.randrange(3) + (3 if neither else 0)
    text = (
        f"How many integers from 1 to {n} are divisible by {p} or by {q}?",
        f"Among the whole numbers 1, 2, ..., {n}, count those that are multiples of {p} or of {q}.",
        f"{rng.choice(NAMES)} marks every number up to {n} that is a multiple of {p} or a multiple of {q}. How many are marked?",
        f"How many integers from 1 to {n} are divisible by neither {p} nor {q}?",
        f"Among 1, 2, ..., {n}, how many numbers are multiples of neither {p} nor {q}?",
        f"{rng.choice(NAMES)} crosses out every multiple of {p} and every multiple of {q} up to {n}. How many numbers remain?",
    )[t]
    lead = (f"Multiples of {p} up to {n}: {a}. Multiples of {q} up to {n}: {b}.",)
    tail = f" Numbers that are neither: {n} minus that, {ans}." if neither else ""
    tail_w = f" Numbers that are neither: {n} minus that, {trap}." if neither else ""
    right = (
        f"Numbers divisible by both are the multiples of lcm({p}, {q}) = {lcm}, which were counted twice; "
        f"subtract them: {a} + {b} - {c} = {a + b - c}.{tail}",
    )
    wrong = (f"Add the two counts to get the size of the union: {a} + {b} = {a + b}.{tail_w}",)
    return Instance("inclusion_exclusion", t, text, Fraction(ans), Fraction(trap), lead, right, wrong)


def _circular(rng: random.Random, d: int) -> Instance:
    n = rng.randint(4, 6 + d)
    pair = rng.random() < 0.4 and n >= 5
    if pair:
        units = n - 1
        ans, trap = 2 * math.factorial(units - 1), 2 * math.factorial(units)
        t = 3 + rng.randrange(2)
        text = (
            f"In how many ways can {n} people sit around a round table if two particular people insist on sitting "
            f"next to each other? Rotations of a seating are considered the same.",
            f"{n} friends, including {rng.choice(NAMES)} and {rng.choice(NAMES)} who must be adjacent, sit at a "
            f"circular table. Counting rotations as identical, how many seatings are possible?",
        )[t - 3]
        lead = (f"Glue the adjacent pair into one block: {units} units to place, and the pair has 2 internal orders.",)
        right = (
            f"Around a circle rotations coincide, so fix one unit and arrange the rest: 2 \\cdot ({units} - 1)! = {ans}.",
        )
        wrong = (f"Arrange the units as in a row: 2 \\cdot {units}! = {trap}.",)
    else:
        ans, trap = math.factorial(n - 1), math.factorial(n)
        t = rng.randrange(3)
        text = (
            f"In how many distinct ways can {n} people be seated around a round table, where seatings that are "
            f"rotations of each other count as the same?",
            f"{n} knights sit at a circular table. Two arrangements are identical if one is a rotation of the other. "
            f"How many arrangements exist?",
            f"How many ways are there to place {n} different {rng.choice(OBJECTS)} in a ring, up to rotation?",
        )[t]
        lead = (f"There are {n} distinct people to place.",)
        right = (f"Around a circle rotations coincide, so fix one person and arrange the rest: ({n} - 1)! = {ans}.",)
        wrong = (f"Arrange them as in a row: {n}! = {trap}.",)
    return Instance("circular_arrangements", t, text, Fraction(ans), Fraction(trap), lead, right, wrong)


def _diagonals(rng: random.Random, d: int) -> Instance:
    n = rng.randint(5, 10 + 6 * d)
    seg = n * (n - 1) // 2
    ans, trap = seg - n, seg
    t = rng.randrange(3)
    text = (
        f"How many diagonals does a convex polygon with {n} sides have?",
        f"A convex {n}-gon is drawn. Count the line segments joining two non-adjacent vertices.",
        f"{rng.choice(NAMES)} connects every pair of non-adjacent corners of a convex polygon with {n} corners. "
        f"How many segments are drawn?",
    )[t]
    lead = (f"Any two of the {n} vertices determine a segment: {n} \\cdot {n - 1}/2 = {seg}.",)
    right = (f"Of these, {n} are sides of the polygon, not diagonals; remove them: {seg} - {n} = {ans}.",)
    wrong = (f"Count every vertex-to-vertex segment as a diagonal: {trap}.",)
    return Instance("polygon_diagonals", t, text, Fraction(ans), Fraction(trap), lead, right, wrong)


# ----------------------------------------------------------------------------- probability


def _without_replacement(rng: random.Random, d: int) -> Instance:
    r = rng.randint(2, 6 + 2 * d)
    b = rng.randint(2, 6 + 2 * d)
    n = r + b
    mixed = rng.random() < 0.4
    obj = rng.choice(("marbles", "balls", "cards", "tokens"))
    if mixed:
        ans, trap = Fraction(2 * r * b, n * (n - 1)), Fraction(2 * r * b, n * n)
        t = 3 + rng.randrange(2)
        text = (
            f"A bag holds {r} red and {b} blue {obj}. Two are drawn at random without replacement. "
            f"What is the probability that they have different colours?",
            f"From a box of {r} red and {b} blue {obj}, {rng.choice(NAMES)} takes two at once. "
            f"Find the probability of getting one of each colour.",
        )[t - 3]
        lead = (f"There are {n} {obj} in total, and the two orders red-blue and blue-red both count.",)
        right = (
            f"Without replacement the second draw comes from {n - 1}: 2 \\cdot ({r}/{n}) \\cdot ({b}/{n - 1}) = {fmt_num(ans)}.",
        )
        wrong = (f"Treat both draws as independent with unchanged odds: 2 \\cdot ({r}/{n}) \\cdot ({b}/{n}) = {fmt_num(trap)}.",)
    else:
        ans, trap = Fraction(r * (r - 1), n * (n - 1)), Fraction(r * r, n * n)
        t = rng.randrange(3)
        text = (
            f"A bag holds {r} red and {b} blue {obj}. Two are drawn at random without replacement. "
            f"What is the probability that both are red?",
            f"{rng.choice(NAMES)} picks two {obj} from a jar of {r} red and {b} blue ones, without putting the "
            f"first back. Find the probability that both picks are red.",
            f"Two {obj} are taken, one after the other and not returned, from {r} red and {b} blue. "
            f"How likely is it that both are red?",
        )[t]
        lead = (f"There are {n} {obj} in total, {r} of them red.",)
        right = (
            f"Without replacement the second draw comes from {n - 1} with {r - 1} red left: "
            f"({r}/{n}) \\cdot ({r - 1}/{n - 1}) = {fmt_num(ans)}.",
        )
        wrong = (f"Treat both draws as independent with unchanged odds: ({r}/{n})^2 = {fmt_num(trap)}.",)
    return Instance("sampling_without_replacement", t, text, ans, trap, lead, right, wrong)


def _avg_speed(rng: random.Random, d: int) -> Instance:
    while True:
        v1 = rng.randint(2, 12 + 4 * d) * 5
        v2 = rng.randint(2, 12 + 4 * d) * 5
        if v1 != v2:
            break
    ans, trap = Fraction(2 * v1 * v2, v1 + v2), Fraction(v1 + v2, 2)
    name = rng.choice(NAMES)
    t = rng.randrange(3)
    text = (
        f"{name} drives to a town at {v1} km/h and returns along the same road at {v2} km/h. "
        f"What is the average speed for the round trip, in km/h?",
        f"A cyclist covers a route at {v1} km/h and then covers the same route back at {v2} km/h. "
        f"Find the average speed over the whole journey.",
        f"A drone flies a fixed distance out at {v1} units per hour and the same distance back at {v2} units "
        f"per hour. What is its average speed?",
    )[t]
    lead = ("Let each leg have the same distance D.",)
    right = (
        f"Average speed is total distance over total time: 2D / (D/{v1} + D/{v2}) = {fmt_num(ans)}.",
    )
    wrong = (f"Average the two speeds directly: ({v1} + {v2})/2 = {fmt_num(trap)}.",)
    return Instance("harmonic_average_speed", t, text, ans, trap, lead, right, wrong)


# ----------------------------------------------------------------------------- percentages


def _successive(rng: random.Random, d: int) -> Instance:
    price = 100 * rng.randint(2, 9 + 5 * d)
    p = 10 * rng.randint(1, 5 + d)
    q = 10 * rng.randint(1, 5)
    p1 = Fraction(price * (100 + p), 100)
    ans = p1 * Fraction(100 - q, 100)
    trap = Fraction(price * (100 + p - q), 100)
    name = rng.choice(NAMES)
    t = rng.randrange(3)
    text = (
        f"A jacket costs {price} dollars. Its price is raised by {p}% and the new price is then cut by {q}%. "
        f"What is the final price in dollars?",
        f"{name}'s rent of {price} rises by {p}% one year and falls by {q}% the next. What is the rent after both changes?",
        f"A stock worth {price} gains {p}% on Monday and loses {q}% of its new value on Tuesday. What is it worth after Tuesday?",
    )[t]
    lead = (f"After the {p}% increase the value is {price} \\cdot {100 + p}/100 = {fmt_num(p1)}.",)
    right = (f"The {q}% decrease applies to this new value: {fmt_num(p1)} \\cdot {100 - q}/100 = {fmt_num(ans)}.",)
    wrong = (
        f"Combine the two changes into one net change of {p} - {q} = {p - q}%, applied to the original: "
        f"{price} \\cdot {100 + p - q}/100 = {fmt_num(trap)}.",
    )
    return Instance("successive_percentages", t, text, ans, trap, lead, right, wrong)


def _reverse_pct(rng: random.Random, d: int) -> Instance:
    p = 5 * rng.randint(2, 8 + d)
    orig = 20 * rng.randint(3, 30 + 20 * d)
    rise = rng.random() < 0.4
    final = Fraction(orig * (100 + p if rise else 100 - p), 100)
    trap = final * Fraction(100 - p if rise else 100 + p, 100)
    name = rng.choice(NAMES)
    if rise:
        t = 3 + rng.randrange(2)
        text = (
            f"After a {p}% raise, {name}'s salary is {fmt_num(final)}. What was it before the raise?",
            f"A town's population grew by {p}% to {fmt_num(final)}. What was the population before the growth?",
        )[t - 3]
        lead = (f"The new value {fmt_num(final)} already includes the {p}% increase.",)
        right = (f"The increase is a percentage of the original x: x \\cdot {100 + p}/100 = {fmt_num(final)}, so x = {orig}.",)
        wrong = (f"Remove {p}% of the new value: {fmt_num(final)} \\cdot {100 - p}/100 = {fmt_num(trap)}.",)
    else:
        t = rng.randrange(3)
        text = (
            f"After a {p}% discount, a bicycle sells for {fmt_num(final)} dollars. What was its original price?",
            f"{name} paid {fmt_num(final)} for a lamp during a sale offering {p}% off. What was the price before the sale?",
            f"A price was reduced by {p}% and now stands at {fmt_num(final)}. Find the price before the reduction.",
        )[t]
        lead = (f"The sale price {fmt_num(final)} is what remains after a {p}% discount.",)
        right = (f"The discount is a percentage of the original x: x \\cdot {100 - p}/100 = {fmt_num(final)}, so x = {orig}.",)
        wrong = (f"Add {p}% of the sale price back: {fmt_num(final)} \\cdot {100 + p}/100 = {fmt_num(trap)}.",)
    return Instance("reverse_percentage", t, text, Fraction(orig), trap, lead, right, wrong)


# ----------------------------------------------------------------------------- catalogue

AREAS: dict[str, tuple[str, ...]] = {
    "algebra": (
        "solves equations and inequalities while respecting domains, sign changes and conditions introduced by transformations",
        "handles algebraic manipulations of equations and inequalities including squaring, logarithms and bounds correctly",
        "keeps track of validity conditions when transforming algebraic equations, inequalities and optimisation bounds",
        "applies algebraic transformation rules carefully when solving equations, inequalities and extremal problems",
    ),
    "number_theory": (
        "reasons correctly about integers, remainders, divisibility, periodic patterns and counts of consecutive values",
        "handles modular arithmetic, cyclic patterns of digits and endpoint counting in integer ranges accurately",
        "applies integer and modular reasoning precisely, including remainder conventions, cycles and inclusive ranges",
    ),
    "combinatorics": (
        "counts arrangements and selections correctly without double counting, overcounting symmetries or miscounting sets",
        "applies counting principles such as inclusion-exclusion, circular symmetry and subset removal accurately",
        "avoids overcounting and undercounting when enumerating unions, arrangements and geometric configurations",
    ),
    "probability": (
        "computes probabilities and averages correctly by modelling dependence between events and weighting by time",
        "models random draws and rate averages faithfully, accounting for dependence and unequal durations",
        "reasons about sampling probabilities and weighted averages with the correct dependence structure",
    ),
    "percentages": (
        "reasons correctly about chained and reversed percentage changes by tracking which base each percentage uses",
        "handles successive and inverse percentage calculations by applying each percentage to its correct base value",
        "computes compound and reverse percentage changes accurately by identifying the reference quantity each time",
    ),
}

FAMILIES: tuple[Family, ...] = (
    Family(
        "extraneous_roots", "algebra",
        "squaring both sides of a radical equation introduces extraneous roots that must be checked in the original equation",
        (
            "fails to check candidate solutions in the original radical equation after squaring both sides of it",
            "accepts extraneous roots introduced by squaring a square root equation without verifying them afterwards",
            "omits verification of solutions of the squared equation against the sign condition of the radical",
            "treats every root of the squared equation as a root of the original radical equation",
            "neglects that a square root is nonnegative when solving equations by squaring both sides",
        ),
        _extraneous, 4,
    ),
    Family(
        "negative_remainder", "number_theory",
        "a remainder in integer division must be nonnegative even when the dividend is negative",
        (
            "reports a negative remainder when dividing a negative integer instead of adjusting into the valid range",
            "negates the remainder of the absolute value rather than finding the nonnegative remainder of a negative number",
            "ignores that division algorithm remainders must lie between zero and the divisor minus one",
            "mishandles modular reduction of negative integers by keeping a negative residue as the final remainder",
            "applies the remainder convention incorrectly for negative dividends and fails to add the modulus back",
        ),
        _neg_remainder, 4,
    ),
    Family(
        "inclusion_exclusion", "combinatorics",
        "counting a union of overlapping sets requires subtracting the intersection counted twice, inclusion-exclusion",
        (
            "adds the sizes of overlapping sets without subtracting their intersection when counting a union",
            "double counts elements that belong to both sets instead of applying the inclusion-exclusion principle",
            "forgets to remove common multiples counted twice when counting numbers divisible by either of two values",
            "omits the intersection correction term of inclusion exclusion when counting elements satisfying either condition",
            "treats overlapping divisibility conditions as disjoint events and sums their counts directly without correction",
        ),
        _incl_excl, 6,
    ),
    Family(
        "sampling_without_replacement", "probability",
        "drawing without replacement changes the probabilities of later draws, so draws are dependent",
        (
            "treats draws without replacement as independent events with unchanged probabilities for the second draw",
            "ignores that removing an item changes the remaining population when computing probabilities of successive draws",
            "uses the same probability for every draw even though sampled items are not returned to the pool",
            "models dependent draws without replacement as if sampling with replacement from an unchanged population",
            "fails to update the numerator and denominator after each draw when computing probabilities without replacement",
        ),
        _without_replacement, 5,
    ),
    Family(
        "successive_percentages", "percentages",
        "successive percentage changes multiply, each applied to the new value, rather than adding",
        (
            "adds successive percentage changes as if they applied to the same base instead of compounding them",
            "combines an increase and a decrease into one net percentage rather than applying them multiplicatively",
            "applies the second percentage change to the original value instead of the already changed value",
            "treats consecutive percentage changes as additive and ignores that each one uses a different base",
            "computes a net percentage by subtraction of rates rather than multiplying the successive growth factors",
        ),
        _successive, 3,
    ),
    Family(
        "sign_flip_inequality", "algebra",
        "dividing or multiplying an inequality by a negative number reverses the direction of the inequality",
        (
            "keeps the inequality direction when dividing both sides by a negative coefficient instead of reversing it",
            "forgets to flip the inequality sign after multiplying or dividing by a negative quantity",
            "solves linear inequalities with negative coefficients as if they were equations without reversing direction",
            "mishandles the sign rule for inequalities when isolating a variable with a negative coefficient",
            "fails to reverse the inequality symbol when dividing through by a negative number during solving",
        ),
        _sign_flip, 3,
    ),
    Family(
        "units_digit_cycle", "number_theory",
        "finding the last digit of a power uses the period of the units-digit cycle with correct indexing",
        (
            "misindexes the repeating cycle of units digits by treating the exponent remainder as a zero based position",
            "maps a zero remainder of the exponent to the first cycle entry instead of the last one",
            "applies the periodicity of last digits of powers with an off by one error in cycle position",
            "reads the wrong entry of the units digit cycle after reducing the exponent modulo the period",
            "confuses remainder positions when using cyclic patterns of final digits to evaluate large powers",
        ),
        _units_cycle, 3,
    ),
    Family(
        "circular_arrangements", "combinatorics",
        "arrangements around a circle count rotations once, so n objects give (n-1)! arrangements",
        (
            "counts circular arrangements as linear permutations without dividing out the equivalent rotations of the circle",
            "ignores rotational symmetry when seating people around a round table and overcounts the arrangements",
            "uses the full factorial for arrangements in a ring instead of fixing one position first",
            "treats rotations of a circular seating as distinct arrangements, overcounting by the number of positions",
            "fails to account for rotational equivalence when counting arrangements of distinct objects around a circle",
        ),
        _circular, 5,
    ),
    Family(
        "harmonic_average_speed", "probability",
        "average speed over equal distances is total distance over total time, the harmonic mean of the speeds",
        (
            "averages two speeds arithmetically instead of dividing total distance by total time for the whole trip",
            "ignores that slower legs take more time when averaging speeds over equal distances travelled",
            "uses the arithmetic mean of rates where the harmonic mean weighted by time is required",
            "computes an average rate by averaging the rates directly rather than from total quantity over total time",
            "fails to weight each speed by the time spent when finding the average speed of a round trip",
        ),
        _avg_speed, 3,
    ),
    Family(
        "reverse_percentage", "percentages",
        "to undo a percentage change, divide by the change factor of the original base, not apply the opposite percentage",
        (
            "reverses a percentage change by applying the opposite percentage to the new value instead of dividing",
            "computes an original amount by adding the discount percentage of the reduced price rather than dividing",
            "applies the percentage to the final value when the percentage was defined relative to the original value",
            "undoes a percentage increase or decrease with the wrong base, treating percentage changes as symmetric",
            "fails to divide by the growth factor when recovering an original quantity from a changed one",
        ),
        _reverse_pct, 5,
    ),
    Family(
        "inclusive_counting", "number_theory",
        "counting the integers in a range with both endpoints included needs the difference plus one",
        (
            "counts the integers in an inclusive range as the difference of the endpoints without adding one",
            "makes an off by one fencepost error by counting gaps instead of items between two endpoints",
            "forgets to include both endpoints when counting consecutive numbers, pages or labelled positions in a range",
            "confuses the number of intervals with the number of points when counting evenly spaced items",
            "undercounts elements of an inclusive interval by subtracting endpoints and omitting the final plus one",
        ),
        _inclusive, 6,
    ),
    Family(
        "amgm_equality", "algebra",
        "an AM-GM bound is the minimum only if its equality case is attainable within the constraints",
        (
            "takes the AM-GM lower bound as the minimum without checking that the equality case is attainable",
            "ignores domain restrictions that exclude the equality point when applying the arithmetic geometric mean inequality",
            "assumes an inequality bound is achieved without verifying the equality condition lies inside the feasible region",
            "misapplies AM-GM to a constrained optimisation by skipping the check of when equality holds",
            "reports an unattainable extremal value from an inequality bound instead of optimising at the domain boundary",
        ),
        _amgm, 3,
    ),
    Family(
        "log_domain", "algebra",
        "solutions of logarithmic equations must keep every logarithm argument positive, checking the domain",
        (
            "keeps solutions that make a logarithm argument nonpositive instead of checking the domain of each logarithm",
            "fails to verify the domain of logarithms after combining them into a single polynomial equation",
            "accepts roots of the derived quadratic that lie outside the domain of the original logarithmic equation",
            "omits the positivity condition on logarithm arguments when solving equations with sums of logarithms",
            "neglects domain restrictions introduced by logarithms and reports invalid roots of the transformed equation",
        ),
        _log_domain, 3,
    ),
    Family(
        "polygon_diagonals", "combinatorics",
        "diagonals join non-adjacent vertices, so the polygon sides must be excluded from all vertex pairs",
        (
            "counts every segment between two vertices as a diagonal without excluding the sides of the polygon",
            "forgets to subtract polygon edges from the number of vertex pairs when counting diagonals",
            "includes adjacent vertex pairs in the diagonal count instead of only non adjacent pairs of vertices",
            "overcounts geometric configurations by failing to remove the cases excluded by the definition of diagonal",
            "uses the total number of vertex pairs for diagonals and ignores that sides are not diagonals",
        ),
        _diagonals, 3,
    ),
)

FAMILY_BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}


def families(n: int) -> tuple[Family, ...]:
    """The first ``n`` families of the catalogue (ordered so that any prefix of 5 or more spans
    every knowledge area)."""
    if not 1 <= n <= len(FAMILIES):
        raise ValueError(f"sim.n_families must be between 1 and {len(FAMILIES)}")
    return FAMILIES[:n]
