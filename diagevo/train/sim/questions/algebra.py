"""Algebra: extraneous roots, domains of logarithms, inequalities whose sign flips, AM-GM's equality case.

One writer per trap variant (``WRITERS``, keyed ``"family.variant"`` as in ``families.toml``): each
draws a question at a difficulty level (0-3) and returns it with its true answer, the answer of a
solver that falls into the trap, and both solution paths as steps.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

from diagevo.train.sim.questions.common import Raw, Writer, aggregate, combine, pick
from diagevo.train.sim.text import NAMES, fmt_num, lin, quad

# ----------------------------------------------------------------------------- extraneous roots


def _radical_sign(rng: random.Random, d: int) -> Raw:
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
    t, text = pick(
        rng,
        (
            f"Find the {agg} of all real numbers x satisfying {eq}.",
            f"Solve the equation {eq} over the real numbers and report the {agg} of every solution.",
            f"{rng.choice(NAMES)} is asked for the {agg} of all real values of x that make {eq} true. What is it?",
            f"Determine the {agg} of the real roots of the radical equation {eq}.",
        ),
    )
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
    return t, text, ans, trap, lead, right, wrong


def _rational_pole(rng: random.Random, d: int) -> Raw:
    while True:
        r = rng.randint(2, 4 + 2 * d) * rng.choice((1, -1))
        s = rng.randint(-5 - 2 * d, 6 + 2 * d)
        agg = aggregate(rng)
        ans, trap = s, combine(agg, [r, s])
        if s not in (0, r) and trap != ans:
            break
    eq = f"\\frac{{{quad(-(r + s), 0)}}}{{{lin('x', -r)}}} = \\frac{{{-r * s}}}{{{lin('x', -r)}}}"
    t, text = pick(
        rng,
        (
            f"Find the {agg} of all real solutions of {eq}.",
            f"What is the {agg} of the real numbers x that satisfy the rational equation {eq}?",
            f"{rng.choice(NAMES)} solves {eq}. Report the {agg} of all its real solutions.",
        ),
    )
    lead = (
        f"Multiply both sides by {lin('x', -r)}: {quad(-(r + s), 0)} = {-r * s}, so {quad(-(r + s), r * s)} = 0.",
        f"Factor: ({lin('x', -r)})({lin('x', -s)}) = 0, giving x = {r} or x = {s}.",
    )
    right = (
        f"Check the denominators: at x = {r} the denominator {lin('x', -r)} is zero, so x = {r} is excluded.",
        f"Only x = {s} remains, so the {agg} is {ans}.",
    )
    wrong = (
        f"Both values x = {r} and x = {s} solve the cleared equation and are kept as solutions.",
        f"So the {agg} is {trap}.",
    )
    return t, text, ans, trap, lead, right, wrong


def _abs_of_square(rng: random.Random, d: int) -> Raw:
    a = rng.randint(-4 - d, 6 + 2 * d)
    m = rng.randint(3, 8 + 4 * d)
    ans, trap = m + 1, 2 * m + 1
    eq = f"\\sqrt{{({lin('x', -a)})^2}} = {lin('x', -a)}"
    t, text = pick(
        rng,
        (
            f"How many integers x with {a - m} \\le x \\le {a + m} satisfy {eq}?",
            f"Count the integers x from {a - m} to {a + m} inclusive for which {eq} holds.",
            (
                f"{rng.choice(NAMES)} tests every integer x between {a - m} and {a + m} in the equation {eq}. How "
                "many pass?"
            ),
        ),
    )
    lead = (f"The range contains the {2 * m + 1} integers x = {a - m}, ..., {a + m}.",)
    right = (
        f"The square root of a square is an absolute value: \\sqrt{{({lin('x', -a)})^2}} = |{lin('x', -a)}|, "
        f"which equals {lin('x', -a)} only when x \\ge {a}.",
        f"So x = {a}, ..., {a + m} qualify: {ans} integers.",
    )
    wrong = (
        f"Simplify \\sqrt{{({lin('x', -a)})^2}} to {lin('x', -a)}, which makes the equation hold for every x.",
        f"So all {trap} integers qualify.",
    )
    return t, text, ans, trap, lead, right, wrong


def _plus_minus_root(rng: random.Random, d: int) -> Raw:
    while True:
        b = rng.randint(-4 - d, 6 + 2 * d)
        k = rng.randint(2, 5 + 2 * d)
        agg = aggregate(rng)
        ans, trap = combine(agg, [b + k, b - k]), b + k
        if ans != trap:
            break
    eq = f"({lin('x', -b)})^2 = {k * k}"
    t, text = pick(
        rng,
        (
            f"Find the {agg} of all real x with {eq}.",
            f"Solve {eq} and give the {agg} of its real solutions.",
            f"{rng.choice(NAMES)} subtracts {b} from a number, squares the result and gets {k * k}. "
            f"What is the {agg} of all possible numbers?",
        ),
    )
    lead = (f"Both sides are squares: ({lin('x', -b)})^2 = {k}^2.",)
    right = (
        f"Take square roots keeping both signs: {lin('x', -b)} = \\pm {k}, so x = {b + k} or x = {b - k}.",
        f"The {agg} of the solutions is {ans}.",
    )
    wrong = (
        f"Take the positive square root only: {lin('x', -b)} = {k}, so x = {b + k}.",
        f"The {agg} of the solutions is {trap}.",
    )
    return t, text, ans, trap, lead, right, wrong


# ----------------------------------------------------------------------------- log domain


def _log_argument(rng: random.Random, d: int) -> Raw:
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
    t, text = pick(
        rng,
        (
            f"Find the {agg} of all real solutions of {eq}.",
            f"All real numbers x with {eq} are collected. What is their {agg}?",
            f"Consider the logarithmic equation {eq}. Compute the {agg} of its real solutions.",
        ),
    )
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
    return t, text, ans, trap, lead, right, wrong


def _log_base(rng: random.Random, d: int) -> Raw:
    s = rng.randint(2, 6 + 3 * d)
    e = 2 if d < 2 or rng.random() < 0.5 else 4
    c = s**e
    agg = aggregate(rng)
    ans, trap = s, combine(agg, [s, -s])
    t, text = pick(
        rng,
        (
            f"Find the {agg} of all real x satisfying \\log_{{x}} {c} = {e}.",
            f"For which real bases x does \\log_{{x}} {c} = {e} hold? Give the {agg} of all such x.",
            (
                f"{rng.choice(NAMES)} looks for every real number x with \\log_{{x}}({c}) = {e}. What is the {agg} of "
                "these numbers?"
            ),
        ),
    )
    lead = (f"Rewrite in exponential form: x^{e} = {c}, whose real solutions are x = {s} and x = -{s}.",)
    right = (
        f"A logarithm base must be positive and different from 1, so x = -{s} is not an allowed base.",
        f"Only x = {s} remains, so the {agg} is {ans}.",
    )
    wrong = (f"Keep both x = {s} and x = -{s} as bases of the logarithm.", f"So the {agg} is {trap}.")
    return t, text, ans, trap, lead, right, wrong


def _log_power(rng: random.Random, d: int) -> Raw:
    base = rng.choice((2, 3) if d < 2 else (2, 3, 5))
    k = rng.randint(1, 2 + d)
    v = base**k
    agg = aggregate(rng)
    ans, trap = combine(agg, [v, -v]), v
    t, text = pick(
        rng,
        (
            f"Find the {agg} of all real solutions of \\log_{{{base}}}(x^2) = {2 * k}.",
            f"What is the {agg} of every real x with \\log_{{{base}}}(x^2) = {2 * k}?",
            (
                f"The equation \\log_{{{base}}}(x^2) = {2 * k} is solved over the reals. Report the {agg} of its "
                "solutions."
            ),
        ),
    )
    lead = (f"The right side equals \\log_{{{base}}} {v * v}.",)
    right = (
        f"Equate arguments: x^2 = {v * v}, so x = {v} or x = -{v}, and both give the positive argument {v * v}.",
        f"The {agg} of the solutions is {ans}.",
    )
    wrong = (
        f"Use the power rule to write 2\\log_{{{base}}} x = {2 * k}, so \\log_{{{base}}} x = {k} and x = {v} only.",
        f"The {agg} of the solutions is {trap}.",
    )
    return t, text, ans, trap, lead, right, wrong


# ----------------------------------------------------------------------------- inequalities


def _divide_negative(rng: random.Random, d: int) -> Raw:
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
    t, text = pick(
        rng,
        (
            f"How many integers x with 1 \\le x \\le {m} satisfy {ineq}?",
            f"Count the integers x between 1 and {m} inclusive for which {ineq} holds.",
            (
                f"{rng.choice(NAMES)} lists every integer x from 1 to {m} that satisfies {ineq}. How many integers "
                "are on the list?"
            ),
        ),
    )
    lead = (f"Move the constant term: -{a}x \\ge {c - b}.",)
    right = (
        f"Divide by the negative number -{a} and reverse the inequality sign: x \\le {fmt_num(q)}.",
        f"The integers 1 through {t_} qualify, so the count is {t_}.",
    )
    wrong = (
        f"Divide by -{a} keeping the same inequality direction: x \\ge {fmt_num(q)}.",
        f"The integers from {ceil_q} to {m} qualify, so the count is {trap}.",
    )
    return t, text, t_, trap, lead, right, wrong


def _reciprocal(rng: random.Random, d: int) -> Raw:
    while True:
        c = rng.randint(3, 8 + 3 * d)
        m = c + rng.randint(2, 8 + 4 * d)
        ans, trap = m - c, c - 1
        if ans != trap:
            break
    ineq = rng.choice((f"\\frac{{1}}{{x}} < \\frac{{1}}{{{c}}}", f"\\frac{{1}}{{{c}}} > \\frac{{1}}{{x}}"))
    t, text = pick(
        rng,
        (
            f"How many integers x with 1 \\le x \\le {m} satisfy {ineq}?",
            f"Count the integers x from 1 to {m} for which {ineq}.",
            (
                f"{rng.choice(NAMES)} checks the integers 1, 2, ..., {m} against the inequality {ineq}. How many "
                "satisfy it?"
            ),
        ),
    )
    lead = (f"For 1 \\le x \\le {m} both sides of 1/x < 1/{c} are positive.",)
    right = (
        f"Taking reciprocals of positive numbers reverses the inequality: x > {c}.",
        f"The integers {c + 1} through {m} qualify, so the count is {ans}.",
    )
    wrong = (
        f"Take reciprocals with the inequality direction unchanged: x < {c}.",
        f"The integers 1 through {c - 1} qualify, so the count is {trap}.",
    )
    return t, text, ans, trap, lead, right, wrong


def _square_bound(rng: random.Random, d: int) -> Raw:
    s = rng.randint(2, 4 + 2 * d)
    big = s * s + rng.randint(1, 2 * s + 1)
    m = s + rng.randint(2, 6 + 2 * d)
    ans, trap = 2 * s + 1, s + m + 1
    t, text = pick(
        rng,
        (
            f"How many integers x with -{m} \\le x \\le {m} satisfy x^2 < {big}?",
            f"Count the integers x in the range from -{m} to {m} whose square is less than {big}.",
            (
                f"{rng.choice(NAMES)} squares every integer from -{m} to {m}. For how many of them is the square "
                f"below {big}?"
            ),
        ),
    )
    lead = (f"Take square roots of x^2 < {big}, where \\sqrt{{{big}}} lies between {s} and {s + 1}.",)
    right = (
        f"The square root gives a two-sided bound |x| < \\sqrt{{{big}}}, so -{s} \\le x \\le {s}.",
        f"That is {ans} integers.",
    )
    wrong = (
        f"The square root gives the one-sided bound x < \\sqrt{{{big}}}, so every integer from -{m} to {s} qualifies.",
        f"That is {trap} integers.",
    )
    return t, text, ans, trap, lead, right, wrong


def _abs_bound(rng: random.Random, d: int) -> Raw:
    a = rng.randint(-5, 8 + 3 * d)
    c = rng.randint(2, 5 + 2 * d)
    m = c + rng.randint(1, 5 + 2 * d)
    ans, trap = 2 * c - 1, m + c
    t, text = pick(
        rng,
        (
            f"How many integers x with {a - m} \\le x \\le {a + m} satisfy |{lin('x', -a)}| < {c}?",
            f"Count the integers from {a - m} to {a + m} whose distance from {a} is less than {c}, "
            f"that is, |{lin('x', -a)}| < {c}.",
            f"{rng.choice(NAMES)} marks the integers x between {a - m} and {a + m} with |{lin('x', -a)}| < {c}. "
            f"How many are marked?",
        ),
    )
    lead = (f"The range holds the integers {a - m} through {a + m}.",)
    right = (
        f"An absolute value bound is two-sided: -{c} < {lin('x', -a)} < {c}, so {a - c + 1} \\le x \\le {a + c - 1}.",
        f"That is {ans} integers.",
    )
    wrong = (
        f"Drop the absolute value bars: {lin('x', -a)} < {c}, so every integer from {a - m} to {a + c - 1} qualifies.",
        f"That is {trap} integers.",
    )
    return t, text, ans, trap, lead, right, wrong


# ----------------------------------------------------------------------------- AM-GM


def _amgm_lower(rng: random.Random, d: int) -> Raw:
    s = rng.randint(2, 4 + d)
    m = s + rng.randint(1, 3 + d)
    k = s * s
    ans = Fraction(m * m + k, m)
    t, text = pick(
        rng,
        (
            f"Find the minimum value of f(x) = x + {k}/x over all real x \\ge {m}.",
            f"For real numbers x with x \\ge {m}, what is the smallest possible value of x + \\frac{{{k}}}{{x}}?",
            f"A quantity depends on x \\ge {m} as x + {k}/x. Determine its least value on this range.",
        ),
    )
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
    return t, text, ans, 2 * s, lead, right, wrong


def _amgm_upper(rng: random.Random, d: int) -> Raw:
    s = rng.randint(3, 5 + d)
    m = rng.randint(1, s - 1)
    k = s * s
    ans = Fraction(m * m + k, m)
    t, text = pick(
        rng,
        (
            f"Find the minimum value of x + {k}/x over real x with 0 < x \\le {m}.",
            f"For 0 < x \\le {m}, what is the least value of x + \\frac{{{k}}}{{x}}?",
            f"{rng.choice(NAMES)} may choose any real x in the interval (0, {m}]. How small can x + {k}/x be?",
        ),
    )
    lead = (f"By AM-GM, x + {k}/x \\ge 2\\sqrt{{{k}}} = {2 * s}, with equality exactly when x = {s}.",)
    right = (
        f"The equality point x = {s} exceeds the upper limit {m}, and the function decreases on 0 < x \\le {s}, "
        f"so the minimum is at the endpoint x = {m}.",
        f"The minimum value is {m} + {k}/{m} = {fmt_num(ans)}.",
    )
    wrong = (
        f"Accept the AM-GM bound {2 * s} as the minimum on 0 < x \\le {m} without comparing {s} with the upper limit.",
        f"The minimum value is {2 * s}.",
    )
    return t, text, ans, 2 * s, lead, right, wrong


def _amgm_integer(rng: random.Random, d: int) -> Raw:
    a = rng.randint(2, 9 + 6 * d)
    total = 2 * a + 1
    ans, trap = a * (a + 1), Fraction(total * total, 4)
    t, text = pick(
        rng,
        (
            f"Positive integers x and y satisfy x + y = {total}. What is the largest possible value of xy?",
            f"A rectangle has whole-number side lengths and perimeter {2 * total}. What is its largest possible area?",
            (
                f"{rng.choice(NAMES)} splits {total} into two positive whole numbers and multiplies them. What is the "
                "largest product?"
            ),
        ),
    )
    lead = (
        f"By AM-GM, xy \\le ((x + y)/2)^2 = ({total}/2)^2 = {fmt_num(trap)}, with equality when x = y = {total}/2.",
    )
    right = (
        f"Since {total} is odd, x = y = {total}/2 is not a whole number; the closest split is {a} and {a + 1}.",
        f"The largest product is {a} \\cdot {a + 1} = {ans}.",
    )
    wrong = (
        f"Take the AM-GM bound ({total}/2)^2 as the maximum even though it needs values that are not whole numbers.",
        f"The largest product is {fmt_num(trap)}.",
    )
    return t, text, ans, trap, lead, right, wrong


def _amgm_negative(rng: random.Random, d: int) -> Raw:
    s = rng.randint(2, 6 + 3 * d)
    k = s * s
    t, text = pick(
        rng,
        (
            f"For negative real numbers x, what is the largest value of x + {k}/x?",
            f"Find the maximum of f(x) = x + \\frac{{{k}}}{{x}} over all real x < 0.",
            (
                f"{rng.choice(NAMES)} only uses negative values of x in the expression x + {k}/x. What is the "
                "greatest value it can take?"
            ),
        ),
    )
    lead = (f"Write f(x) = x + {k}/x on x < 0, where {k} = {s}^2.",)
    right = (
        f"AM-GM needs positive terms, so apply it to -x and -{k}/x: -x - {k}/x \\ge {2 * s}, hence "
        f"x + {k}/x \\le -{2 * s}, with equality at x = -{s}.",
        f"The largest value is -{2 * s}.",
    )
    wrong = (
        f"Apply AM-GM directly to the negative terms: x + {k}/x \\ge 2\\sqrt{{{k}}} = {2 * s}, and report that bound.",
        f"The largest value is {2 * s}.",
    )
    return t, text, -2 * s, 2 * s, lead, right, wrong


WRITERS: dict[str, Writer] = {
    "extraneous_roots.radical_sign": _radical_sign,
    "extraneous_roots.rational_pole": _rational_pole,
    "extraneous_roots.abs_of_square": _abs_of_square,
    "extraneous_roots.plus_minus_root": _plus_minus_root,
    "sign_flip_inequality.divide_negative": _divide_negative,
    "sign_flip_inequality.reciprocal": _reciprocal,
    "sign_flip_inequality.square_bound": _square_bound,
    "sign_flip_inequality.abs_bound": _abs_bound,
    "amgm_equality.endpoint_lower": _amgm_lower,
    "amgm_equality.endpoint_upper": _amgm_upper,
    "amgm_equality.integer_equality": _amgm_integer,
    "amgm_equality.negative_terms": _amgm_negative,
    "log_domain.argument_positive": _log_argument,
    "log_domain.base_domain": _log_base,
    "log_domain.power_rule": _log_power,
}
