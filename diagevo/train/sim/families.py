"""Skill families and their trap variants: procedural generators of questions.

A family is a skill (extraneous roots, inclusion-exclusion, ...). It has several trap
*variants*: distinct ways a solver gets that skill wrong (keeping a root that makes the radical's
side negative, keeping a root that zeroes a denominator, dropping the negative square root, ...).
A variant is a sub-skill of its own: it writes its own kind of question at a difficulty level
(0-3), the true answer, the answer of a solver that falls into the variant's trap, and both
solution paths as steps. The two paths share ``lead`` steps and diverge at the first step of
``right`` / ``wrong``; that divergence is what the simulated diagnostician looks for. Steps carry
no context words, only numbers, so two steps of one variant differ only numerically unless the
reasoning differs, and the diverging steps of two variants always differ in wording.

Language side (what the challenger and the diagnostician read through the embedding model):

- every variant has a skill description and 10-20 word verb-object cause paraphrases (what the
  simulated diagnostician reports, Appendix J). Paraphrases of sibling variants share the
  family's vocabulary, so they are similar but distinct, as real fine-grained causes are;
- every family has several 10-20 word skill-node labels: skill nodes correspond to families, and
  a family named twice under different label wordings gives two nodes that consolidation merges.

Real error causes are this fine-grained (the paper's memory holds 151-244 causes under about 36
skill nodes), so a cause collects only the failures of its own mechanism.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from diagevo.errors import BadInput
from diagevo.train.sim.text import NAMES, OBJECTS, fmt_num, lin, quad


@dataclass(frozen=True, slots=True)
class Instance:
    skill: str  # variant key, "family.variant"
    family: str
    template: int  # surface template used (a "context" for transfer)
    text: str
    answer: Fraction
    trap: Fraction
    lead: tuple[str, ...]
    right: tuple[str, ...]
    wrong: tuple[str, ...]


# a generator returns (template, text, answer, trap, lead, right, wrong); answer and trap are
# exact numbers (ints, or Fractions where the result is not whole)
Num = int | Fraction
Raw = tuple[int, str, Num, Num, tuple[str, ...], tuple[str, ...], tuple[str, ...]]
Gen = Callable[[random.Random, int], Raw]


@dataclass(frozen=True, slots=True)
class Variant:
    key: str  # "family.variant"
    family: str
    skill: str  # what the challenger matches a cause text against
    causes: tuple[str, ...]  # the diagnostician's paraphrases of this trap
    gen: Gen

    def make(self, rng: random.Random, d: int) -> Instance:
        while True:  # the rare draw whose trap gives the true answer is redrawn
            t, text, ans, trap, lead, right, wrong = self.gen(rng, d)
            if Fraction(ans) != Fraction(trap):
                break
        return Instance(self.key, self.family, t, text, Fraction(ans), Fraction(trap), lead, right, wrong)


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    area: str
    skill: str
    labels: tuple[str, ...]  # 10-20 word skill-node labels
    variants: tuple[Variant, ...]

    @property
    def causes(self) -> tuple[str, ...]:
        return tuple(c for v in self.variants for c in v.causes)


def _agg(rng: random.Random) -> str:
    return rng.choice(("sum", "product"))


def _combine(agg: str, xs: list[int]) -> int:
    return sum(xs) if agg == "sum" else math.prod(xs)


def _pick(rng: random.Random, texts: tuple[str, ...]) -> tuple[int, str]:
    t = rng.randrange(len(texts))
    return t, texts[t]


# ============================================================================= algebra
# ----------------------------------------------------------------------------- extraneous roots


def _radical_sign(rng: random.Random, d: int) -> Raw:
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
    t, text = _pick(
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
        agg = _agg(rng)
        ans, trap = s, _combine(agg, [r, s])
        if s not in (0, r) and trap != ans:
            break
    eq = f"\\frac{{{quad(-(r + s), 0)}}}{{{lin('x', -r)}}} = \\frac{{{-r * s}}}{{{lin('x', -r)}}}"
    t, text = _pick(
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
    t, text = _pick(
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
        agg = _agg(rng)
        ans, trap = _combine(agg, [b + k, b - k]), b + k
        if ans != trap:
            break
    eq = f"({lin('x', -b)})^2 = {k * k}"
    t, text = _pick(
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
        agg = _agg(rng)
        ans, trap = r, _combine(agg, [r, s])
        if s != 0 and trap != ans and s != r:
            break
    base = rng.choice(("2", "3", "10"))
    eq = f"\\log_{{{base}}}({lin('x', -a)}) + \\log_{{{base}}}({lin('x', -b)}) = \\log_{{{base}}} {c}"
    t, text = _pick(
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
    agg = _agg(rng)
    ans, trap = s, _combine(agg, [s, -s])
    t, text = _pick(
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
    agg = _agg(rng)
    ans, trap = _combine(agg, [v, -v]), v
    t, text = _pick(
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
    t, text = _pick(
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
    t, text = _pick(
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
    t, text = _pick(
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
    t, text = _pick(
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
    t, text = _pick(
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
    t, text = _pick(
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
    t, text = _pick(
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
    t, text = _pick(
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


# ============================================================================= number theory
# ----------------------------------------------------------------------------- negative remainders


def _negated_residue(rng: random.Random, d: int) -> Raw:
    while True:
        n = rng.randint(10, 60 * (d + 1))
        m = rng.randint(3, 9 + 2 * d)
        if n % m:
            break
    q, r = divmod(n, m)
    ans, trap = (-n) % m, -r
    t, text = _pick(
        rng,
        (
            f"What is the remainder when -{n} is divided by {m}?",
            f"Find the remainder r with 0 \\le r < {m} in the division of -{n} by {m}.",
            f"A pointer on a dial with positions 0 to {m - 1} starts at 0 and moves {n} steps backwards. "
            f"At which position does it stop?",
            f"Compute -{n} \\bmod {m}, the remainder given by the division algorithm.",
        ),
    )
    lead = (f"Divide: {n} = {m} \\cdot {q} + {r}, so -{n} = -{m} \\cdot {q} - {r}.",)
    right = (
        (
            f"A remainder must lie between 0 and {m - 1}, so borrow one more multiple: -{n} = {m} \\cdot (-{q + 1}) + "
            f"{m - r}."
        ),
        f"The remainder is {ans}.",
    )
    wrong = (f"Take the remainder of -{n} to be the negated remainder -{r} directly.", f"The remainder is {trap}.")
    return t, text, ans, trap, lead, right, wrong


def _floor_quotient(rng: random.Random, d: int) -> Raw:
    while True:
        n = rng.randint(10, 60 * (d + 1))
        m = rng.randint(3, 9 + 2 * d)
        if n % m:
            break
    q, r = divmod(n, m)
    t, text = _pick(
        rng,
        (
            f"Find the integer q such that -{n} = {m}q + r with 0 \\le r < {m}.",
            f"Compute \\lfloor -{n}/{m} \\rfloor.",
            f"What is the quotient in the division algorithm when -{n} is divided by {m}?",
        ),
    )
    lead = (f"Divide: {n} = {m} \\cdot {q} + {r}, so -{n}/{m} = -{q} - {r}/{m}.",)
    right = (
        f"The floor rounds down, towards negative infinity: \\lfloor -{q} - {r}/{m} \\rfloor = -{q + 1}.",
        f"The quotient is -{q + 1}.",
    )
    wrong = (f"Drop the fractional part, truncating towards zero: -{q}.", f"The quotient is -{q}.")
    return t, text, -(q + 1), -q, lead, right, wrong


def _negative_congruence(rng: random.Random, d: int) -> Raw:
    while True:
        m = rng.randint(5, 11 + 3 * d)
        a = rng.randint(m + 1, 40 + 50 * d)
        q, r = divmod(a, m)
        if r and 2 * r != m:
            break
    t, text = _pick(
        rng,
        (
            f"What is the smallest positive integer x such that x + {a} is divisible by {m}?",
            f"Find the least positive integer x with x \\equiv -{a} \\pmod{{{m}}}.",
            f"{rng.choice(NAMES)} adds {a} to a positive whole number and gets a multiple of {m}. "
            f"What is the smallest number that works?",
        ),
    )
    lead = (f"The condition is x \\equiv -{a} \\pmod{{{m}}}, and {a} = {m} \\cdot {q} + {r}.",)
    right = (
        (
            f"So x \\equiv -{r} \\equiv {m} - {r} = {m - r} \\pmod{{{m}}}, turning the negative residue into a "
            "positive one."
        ),
        f"The smallest positive x is {m - r}.",
    )
    wrong = (
        f"So x \\equiv {r} \\pmod{{{m}}}, dropping the minus sign of the residue.",
        f"The smallest positive x is {r}.",
    )
    return t, text, m - r, r, lead, right, wrong


# ----------------------------------------------------------------------------- units digits

_CYCLES = {2: (2, 4, 8, 6), 3: (3, 9, 7, 1), 7: (7, 9, 3, 1), 8: (8, 4, 2, 6)}


def _units_text(rng: random.Random, base: int, n: int) -> tuple[int, str]:
    return _pick(
        rng,
        (
            f"What is the units digit of {base}^{{{n}}}?",
            f"Find the last digit of the number {base} raised to the power {n}.",
            f"{rng.choice(NAMES)} multiplies {base} by itself repeatedly until there are {n} factors. "
            f"Which digit ends the product?",
        ),
    )


def _cycle_index(rng: random.Random, d: int) -> Raw:
    digit = rng.choice(tuple(_CYCLES))
    base = digit + 10 * rng.randint(0, 2 + 3 * d)
    while True:
        n = rng.randint(5, 40 + 60 * d)
        if n % 4:
            break
    cyc = _CYCLES[digit]
    r = n % 4
    ans, trap = cyc[(n - 1) % 4], cyc[r]
    t, text = _units_text(rng, base, n)
    lead = (
        f"The units digits of powers of {base} repeat with period 4: {cyc[0]}, {cyc[1]}, {cyc[2]}, {cyc[3]}.",
        f"The exponent {n} leaves remainder {r} when divided by 4.",
    )
    right = (
        f"The cycle starts at exponent 1, so remainder {r} picks position {r} of the cycle.",
        f"The units digit is {ans}.",
    )
    wrong = (
        f"Use the remainder {r} as a zero-based index into the listed cycle, landing on position {r + 1}.",
        f"The units digit is {trap}.",
    )
    return t, text, ans, trap, lead, right, wrong


def _zero_remainder(rng: random.Random, d: int) -> Raw:
    digit = rng.choice((2, 8))
    base = digit + 10 * rng.randint(0, 2 + 3 * d)
    n = 4 * rng.randint(2, 10 + 15 * d)
    c = rng.randint(1, 9 + 40 * d)
    cyc = _CYCLES[digit]
    ans, trap = (cyc[3] + c) % 10, (1 + c) % 10
    t, text = _pick(
        rng,
        (
            f"What is the units digit of {base}^{{{n}}} + {c}?",
            f"Find the last digit of the number {base}^{{{n}}} + {c}.",
            (
                f"{rng.choice(NAMES)} computes {base} raised to the power {n} and then adds {c}. Which digit ends the "
                "result?"
            ),
        ),
    )
    lead = (
        f"The units digits of powers of {base} repeat with period 4: {cyc[0]}, {cyc[1]}, {cyc[2]}, {cyc[3]}.",
        f"The exponent {n} leaves remainder 0 when divided by 4.",
    )
    right = (
        f"Remainder 0 means a whole number of periods, which ends on the last entry of the cycle, {cyc[3]}.",
        f"Adding {c} gives the units digit of {cyc[3]} + {c}, which is {ans}.",
    )
    wrong = (
        "Read remainder 0 as the exponent 0, and any number to the power 0 is 1.",
        f"Adding {c} gives the units digit of 1 + {c}, which is {trap}.",
    )
    return t, text, ans, trap, lead, right, wrong


def _exponent_mod_ten(rng: random.Random, d: int) -> Raw:
    digit = rng.choice(tuple(_CYCLES))
    base = digit + 10 * rng.randint(0, 2 + 3 * d)
    cyc = _CYCLES[digit]
    while True:
        n = rng.randint(11, 40 + 60 * d)
        r4, r10 = n % 4, n % 10
        ans, trap = cyc[(n - 1) % 4], cyc[(r10 - 1) % 4]
        if r10 and trap != ans:
            break
    t, text = _units_text(rng, base, n)
    lead = (f"The units digits of powers of {base} repeat: {cyc[0]}, {cyc[1]}, {cyc[2]}, {cyc[3]}.",)
    right = (
        f"The cycle has length 4, so reduce the exponent modulo 4: {n} leaves remainder {r4}, "
        f"giving position {(n - 1) % 4 + 1}.",
        f"The units digit is {ans}.",
    )
    wrong = (
        f"Reduce the exponent modulo 10 instead: {n} leaves remainder {r10}, giving position {(r10 - 1) % 4 + 1}.",
        f"The units digit is {trap}.",
    )
    return t, text, ans, trap, lead, right, wrong


# ----------------------------------------------------------------------------- inclusive counting


def _inclusive_range(rng: random.Random, d: int) -> Raw:
    step = 1 if d < 2 or rng.random() < 0.5 else rng.randint(2, 3 + d)
    a = step * rng.randint(2, 20 + 20 * d)
    b = a + step * rng.randint(5, 30 + 40 * d)
    span = (b - a) // step
    name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
    if step == 1:
        t, text = _pick(
            rng,
            (
                f"{name} reads a book from page {a} through page {b}, inclusive. How many pages does {name} read?",
                f"How many integers are there from {a} to {b}, including both ends?",
                (
                    f"Seats in a hall are numbered consecutively; {name}'s group occupies seats {a} through {b}. How "
                    "many seats is that?"
                ),
                (
                    f"{name} labels {obj} with every whole number from {a} up to and including {b}. How many labels "
                    "are used?"
                ),
            ),
        )
    else:
        t, text = _pick(
            rng,
            (
                f"How many multiples of {step} lie between {a} and {b}, inclusive?",
                f"{name} paints every {step}th fence post, starting with post {a} and ending with post {b}. "
                f"How many posts are painted?",
            ),
        )
        t += 4
    lead = (f"The distance from {a} to {b} measured in steps of {step} is ({b} - {a})/{step} = {span}.",)
    right = (
        f"Both endpoints are included, so the count is one more than the number of gaps: {span} + 1 = {span + 1}.",
    )
    wrong = (f"Take the number of gaps as the count of items, giving {span}.",)
    return t, text, span + 1, span, lead, right, wrong


def _exclusive_range(rng: random.Random, d: int) -> Raw:
    a = rng.randint(2, 30 + 30 * d)
    b = a + rng.randint(5, 30 + 40 * d)
    span = b - a
    name = rng.choice(NAMES)
    t, text = _pick(
        rng,
        (
            f"How many integers lie strictly between {a} and {b}?",
            f"{name} lives at number {a} and a friend at number {b} on a street with consecutive house numbers. "
            f"How many houses stand between them, not counting their own?",
            f"How many whole numbers x satisfy {a} < x < {b}?",
        ),
    )
    lead = (f"From {a} to {b} there are {b} - {a} = {span} unit gaps.",)
    right = (
        f"Neither endpoint is included, so the count is one less than the number of gaps: {span} - 1 = {span - 1}.",
    )
    wrong = (f"Count the integers from {a} to {b} with both endpoints: {span} + 1 = {span + 1}.",)
    return t, text, span - 1, span + 1, lead, right, wrong


def _closed_loop(rng: random.Random, d: int) -> Raw:
    gap = rng.choice((2, 3, 4, 5, 6, 8, 10))
    n = rng.randint(6, 30 + 40 * d)
    length = gap * n
    t, text = _pick(
        rng,
        (
            (
                f"Posts are placed every {gap} metres around a circular track of length {length} metres. How many "
                "posts are there?"
            ),
            f"A round pond has a path of length {length} m around it, with a lamp every {gap} m along the path. "
            f"How many lamps are there?",
            f"{rng.choice(NAMES)} plants a tree every {gap} metres along the closed boundary of a park that is "
            f"{length} metres "
            f"around. How many trees are planted?",
        ),
    )
    lead = (f"The loop of length {length} splits into {length}/{gap} = {n} gaps.",)
    right = (
        f"On a closed loop the last gap ends at the first post, so the number of posts equals the number of gaps: {n}.",
    )
    wrong = (f"Add one post for the end of the last gap as on a straight fence: {n} + 1 = {n + 1}.",)
    return t, text, n, n + 1, lead, right, wrong


# ============================================================================= combinatorics
# ----------------------------------------------------------------------------- inclusion-exclusion


def _two_counts(rng: random.Random, d: int) -> tuple[int, int, int, int, int, int, int]:
    while True:
        p = rng.randint(2, 6 + d)
        q = rng.randint(p + 1, 9 + 2 * d)
        n = rng.randint(30, 100 + 150 * d)
        lcm = p * q // math.gcd(p, q)
        if n // lcm > 0:
            return p, q, n, lcm, n // p, n // q, n // lcm


def _union_two(rng: random.Random, d: int) -> Raw:
    p, q, n, lcm, a, b, c = _two_counts(rng, d)
    t, text = _pick(
        rng,
        (
            f"How many integers from 1 to {n} are divisible by {p} or by {q}?",
            f"Among the whole numbers 1, 2, ..., {n}, count those that are multiples of {p} or of {q}.",
            (
                f"{rng.choice(NAMES)} marks every number up to {n} that is a multiple of {p} or a multiple of {q}. "
                "How many are marked?"
            ),
        ),
    )
    lead = (f"Multiples of {p} up to {n}: {a}. Multiples of {q} up to {n}: {b}.",)
    right = (
        f"Numbers divisible by both are the multiples of lcm({p}, {q}) = {lcm}, which were counted twice; "
        f"subtract them: {a} + {b} - {c} = {a + b - c}.",
    )
    wrong = (f"Add the two counts to get the size of the union: {a} + {b} = {a + b}.",)
    return t, text, a + b - c, a + b, lead, right, wrong


def _neither(rng: random.Random, d: int) -> Raw:
    p, q, n, lcm, a, b, c = _two_counts(rng, d)
    u = a + b - c
    t, text = _pick(
        rng,
        (
            f"How many integers from 1 to {n} are divisible by neither {p} nor {q}?",
            f"Among 1, 2, ..., {n}, how many numbers are multiples of neither {p} nor {q}?",
            (
                f"{rng.choice(NAMES)} crosses out every multiple of {p} and every multiple of {q} up to {n}. How many "
                "numbers remain?"
            ),
        ),
    )
    lead = (
        (
            f"Multiples of {p}: {a}; of {q}: {b}; of both, lcm {lcm}: {c}; so {a} + {b} - {c} = {u} are divisible by "
            f"{p} or {q}."
        ),
    )
    right = (f"The question asks for the complement of that union: {n} - {u} = {n - u}.",)
    wrong = (f"Report the size of the union, {u}, as the count asked for.",)
    return t, text, n - u, u, lead, right, wrong


def _three_sets(rng: random.Random, d: int) -> Raw:
    p, q, r = sorted(rng.sample((2, 3, 5, 7), 3))
    n = rng.randint(p * q * r + 5, 2 * p * q * r + 100 * d)
    a, b, c = n // p, n // q, n // r
    ab, ac, bc, abc = n // (p * q), n // (p * r), n // (q * r), n // (p * q * r)
    trap = a + b + c - ab - ac - bc
    t, text = _pick(
        rng,
        (
            f"How many integers from 1 to {n} are divisible by at least one of {p}, {q} and {r}?",
            f"Count the numbers among 1, 2, ..., {n} that are multiples of {p}, of {q} or of {r}.",
            f"{rng.choice(NAMES)} circles every number up to {n} divisible by {p}, {q} or {r}. How many are circled?",
        ),
    )
    lead = (
        (
            f"Single counts: {a}, {b}, {c}. Pairwise overlaps, multiples of {p * q}, {p * r} and {q * r}: {ab}, {ac}, "
            f"{bc}."
        ),
    )
    right = (
        f"Multiples of {p * q * r} were added three times and removed three times, so add them back: "
        f"{trap} + {abc} = {trap + abc}.",
    )
    wrong = (f"Subtract the pairwise overlaps and stop there: {a} + {b} + {c} - {ab} - {ac} - {bc} = {trap}.",)
    return t, text, trap + abc, trap, lead, right, wrong


def _exactly_one(rng: random.Random, d: int) -> Raw:
    p, q, n, lcm, a, b, c = _two_counts(rng, d)
    t, text = _pick(
        rng,
        (
            f"How many integers from 1 to {n} are divisible by exactly one of {p} and {q}?",
            f"Among 1, 2, ..., {n}, count the numbers that are multiples of {p} or of {q} but not of both.",
            f"{rng.choice(NAMES)} keeps the numbers up to {n} divisible by {p} or by {q}, then discards those "
            "divisible by both. "
            f"How many are kept?",
        ),
    )
    lead = (f"Multiples of {p} up to {n}: {a}. Multiples of {q} up to {n}: {b}.",)
    right = (
        (
            f"The {c} multiples of lcm({p}, {q}) = {lcm} sit in both counts and must leave both: {a} + {b} - 2 \\cdot "
            f"{c} = {a + b - 2 * c}."
        ),
    )
    wrong = (f"Subtract the {c} common multiples once: {a} + {b} - {c} = {a + b - c}.",)
    return t, text, a + b - 2 * c, a + b - c, lead, right, wrong


# ----------------------------------------------------------------------------- circular arrangements


def _round_table(rng: random.Random, d: int) -> Raw:
    n = rng.randint(4, 6 + d)
    ans, trap = math.factorial(n - 1), math.factorial(n)
    t, text = _pick(
        rng,
        (
            f"In how many distinct ways can {n} people be seated around a round table, where seatings that are "
            f"rotations of each other count as the same?",
            f"{n} knights sit at a circular table. Two arrangements are identical if one is a rotation of the other. "
            f"How many arrangements exist?",
            f"How many ways are there to place {n} different {rng.choice(OBJECTS)} in a ring, up to rotation?",
        ),
    )
    lead = (f"There are {n} distinct people to place.",)
    right = (f"Around a circle rotations coincide, so fix one person and arrange the rest: ({n} - 1)! = {ans}.",)
    wrong = (f"Arrange them as in a row: {n}! = {trap}.",)
    return t, text, ans, trap, lead, right, wrong


def _adjacent_block(rng: random.Random, d: int) -> Raw:
    n = rng.randint(5, 7 + d)
    units = n - 1
    ans, trap = 2 * math.factorial(units - 1), math.factorial(units - 1)
    t, text = _pick(
        rng,
        (
            f"In how many ways can {n} people sit around a round table if two particular people insist on sitting "
            f"next to each other? Rotations of a seating are considered the same.",
            f"{n} friends, including {rng.choice(NAMES)} and {rng.choice(NAMES)} who must be adjacent, sit at a "
            f"circular table. Counting rotations as identical, how many seatings are possible?",
            (
                f"{n} distinct beads are arranged on a circle, up to rotation, with two given beads touching. How "
                "many arrangements are there?"
            ),
        ),
    )
    lead = (f"Glue the adjacent pair into one block, leaving {units} units to place around the circle.",)
    right = (
        f"Fix one unit to remove rotations, arrange the rest, and order the pair inside its block in 2 ways: "
        f"2 \\cdot ({units} - 1)! = {ans}.",
    )
    wrong = (f"Arrange the {units} units around the circle with the block as one fixed unit: ({units} - 1)! = {trap}.",)
    return t, text, ans, trap, lead, right, wrong


def _necklace(rng: random.Random, d: int) -> Raw:
    n = rng.randint(4, 6 + d)
    rot = math.factorial(n - 1)
    t, text = _pick(
        rng,
        (
            (
                f"How many different necklaces can be made from {n} distinct beads, if a necklace can be rotated and "
                "turned over?"
            ),
            f"{rng.choice(NAMES)} threads {n} different charms on a bracelet that can be rotated or flipped. "
            f"How many distinct bracelets are possible?",
            (
                f"Count the arrangements of {n} distinct keys on a key ring, where rotating or flipping the ring "
                "gives the same arrangement."
            ),
        ),
    )
    lead = (f"Fixing one bead removes rotations, leaving ({n} - 1)! = {rot} orders.",)
    right = (
        f"The necklace can also be turned over, so each order and its mirror image coincide: {rot}/2 = {rot // 2}.",
    )
    wrong = (f"Count each order and its mirror image separately: {rot}.",)
    return t, text, rot // 2, rot, lead, right, wrong


def _numbered_seats(rng: random.Random, d: int) -> Raw:
    n = rng.randint(4, 6 + d)
    ans, trap = math.factorial(n), math.factorial(n - 1)
    t, text = _pick(
        rng,
        (
            (
                f"A round table has {n} chairs numbered 1 to {n}. In how many ways can {n} guests be assigned to the "
                "chairs?"
            ),
            f"The seats around a circular table carry the numbers 1 to {n}. How many ways can {n} people take these "
            f"numbered seats, one person per seat?",
            (
                f"The {n} numbered cabins of a Ferris wheel receive {n} different passengers, one each. How many "
                "assignments are possible?"
            ),
        ),
    )
    lead = (f"There are {n} people and {n} numbered seats around the circle.",)
    right = (f"The seats are labelled, so rotating a seating changes who sits where: {n}! = {ans}.",)
    wrong = (f"Divide out rotations as for an unlabelled round table: ({n} - 1)! = {trap}.",)
    return t, text, ans, trap, lead, right, wrong


# ----------------------------------------------------------------------------- polygon diagonals


def _sides_excluded(rng: random.Random, d: int) -> Raw:
    n = rng.randint(5, 10 + 6 * d)
    seg = n * (n - 1) // 2
    t, text = _pick(
        rng,
        (
            f"How many diagonals does a convex polygon with {n} sides have?",
            f"A convex {n}-gon is drawn. Count the line segments joining two non-adjacent vertices.",
            f"{rng.choice(NAMES)} connects every pair of non-adjacent corners of a convex polygon with {n} corners. "
            f"How many segments are drawn?",
        ),
    )
    lead = (f"Any two of the {n} vertices determine a segment: {n} \\cdot {n - 1}/2 = {seg}.",)
    right = (f"Of these, {n} are sides of the polygon, not diagonals; remove them: {seg} - {n} = {seg - n}.",)
    wrong = (f"Count every vertex-to-vertex segment as a diagonal: {seg}.",)
    return t, text, seg - n, seg, lead, right, wrong


def _one_vertex(rng: random.Random, d: int) -> Raw:
    n = rng.randint(5, 12 + 10 * d)
    t, text = _pick(
        rng,
        (
            f"How many diagonals can be drawn from one vertex of a convex polygon with {n} sides?",
            f"From a single corner of a convex {n}-gon, how many diagonals start?",
            (
                f"{rng.choice(NAMES)} stands at one vertex of a convex {n}-gon and draws every diagonal from it. How "
                "many are drawn?"
            ),
        ),
    )
    lead = (f"A vertex can be joined to the other {n - 1} vertices.",)
    right = (f"Its two neighbours give sides, not diagonals, so remove them: {n - 1} - 2 = {n - 3}.",)
    wrong = (f"Take every one of the {n - 1} segments from the vertex as a diagonal: {n - 1}.",)
    return t, text, n - 3, n - 1, lead, right, wrong


def _ordered_ends(rng: random.Random, d: int) -> Raw:
    n = rng.randint(5, 10 + 6 * d)
    per = n - 3
    t, text = _pick(
        rng,
        (
            f"Every vertex of a convex {n}-gon sends a diagonal to each vertex that is not its neighbour. "
            f"How many distinct diagonals are drawn altogether?",
            (
                f"Each of the {n} corners of a convex polygon is joined to all non-neighbouring corners. How many "
                "different segments result?"
            ),
            (
                f"In a convex polygon with {n} vertices, {rng.choice(NAMES)} draws all diagonals vertex by vertex. "
                "How many diagonals exist in total?"
            ),
        ),
    )
    lead = (f"Each of the {n} vertices starts {per} diagonals, to all vertices except itself and its two neighbours.",)
    right = (f"Every diagonal has two ends and was counted from both: {n} \\cdot {per}/2 = {n * per // 2}.",)
    wrong = (f"Multiply to get the total: {n} \\cdot {per} = {n * per}.",)
    return t, text, n * per // 2, n * per, lead, right, wrong


# ============================================================================= probability
# ----------------------------------------------------------------------------- sampling without replacement


def _urn(rng: random.Random, d: int) -> tuple[int, int, int, str]:
    r = rng.randint(2, 6 + 2 * d)
    b = rng.randint(2, 6 + 2 * d)
    return r, b, r + b, rng.choice(("marbles", "balls", "cards", "tokens"))


def _both_same(rng: random.Random, d: int) -> Raw:
    r, b, n, obj = _urn(rng, d)
    ans, trap = Fraction(r * (r - 1), n * (n - 1)), Fraction(r * r, n * n)
    t, text = _pick(
        rng,
        (
            f"A bag holds {r} red and {b} blue {obj}. Two are drawn at random without replacement. "
            f"What is the probability that both are red?",
            f"{rng.choice(NAMES)} picks two {obj} from a jar of {r} red and {b} blue ones, without putting the "
            f"first back. Find the probability that both picks are red.",
            f"Two {obj} are taken, one after the other and not returned, from {r} red and {b} blue. "
            f"How likely is it that both are red?",
        ),
    )
    lead = (f"There are {n} {obj} in total, {r} of them red.",)
    right = (
        f"Without replacement the second draw comes from {n - 1} with {r - 1} red left: "
        f"({r}/{n}) \\cdot ({r - 1}/{n - 1}) = {fmt_num(ans)}.",
    )
    wrong = (f"Treat both draws as independent with unchanged odds: ({r}/{n})^2 = {fmt_num(trap)}.",)
    return t, text, ans, trap, lead, right, wrong


def _one_of_each(rng: random.Random, d: int) -> Raw:
    r, b, n, obj = _urn(rng, d)
    ans, trap = Fraction(2 * r * b, n * (n - 1)), Fraction(r * b, n * (n - 1))
    t, text = _pick(
        rng,
        (
            f"A bag holds {r} red and {b} blue {obj}. Two are drawn at random without replacement. "
            f"What is the probability that they have different colours?",
            f"From a box of {r} red and {b} blue {obj}, {rng.choice(NAMES)} takes two at once. "
            f"Find the probability of getting one of each colour.",
            (
                f"Two {obj} are drawn without replacement from {r} red and {b} blue. What is the chance of exactly "
                "one red?"
            ),
        ),
    )
    lead = (f"There are {n} {obj} in total, {r} red and {b} blue.",)
    right = (
        (
            f"Both orders red-blue and blue-red give one of each: 2 \\cdot ({r}/{n}) \\cdot ({b}/{n - 1}) = "
            f"{fmt_num(ans)}."
        ),
    )
    wrong = (f"Take the order red then blue only: ({r}/{n}) \\cdot ({b}/{n - 1}) = {fmt_num(trap)}.",)
    return t, text, ans, trap, lead, right, wrong


def _at_least_one(rng: random.Random, d: int) -> Raw:
    r, b, n, obj = _urn(rng, d)
    ans, trap = 1 - Fraction(b * (b - 1), n * (n - 1)), 1 - Fraction(b * b, n * n)
    t, text = _pick(
        rng,
        (
            f"A bag holds {r} red and {b} blue {obj}. Two are drawn without replacement. "
            f"What is the probability that at least one is red?",
            f"{rng.choice(NAMES)} draws two {obj}, not returning the first, from {r} red and {b} blue. "
            f"Find the probability of getting at least one red.",
            (
                f"From {r} red and {b} blue {obj}, two are removed one after the other. How likely is it that not "
                "both are blue?"
            ),
        ),
    )
    lead = (f"The complement of at least one red is that both draws are blue, with {b} blue among {n}.",)
    right = (f"Without replacement: 1 - ({b}/{n}) \\cdot ({b - 1}/{n - 1}) = {fmt_num(ans)}.",)
    wrong = (f"Treat the two blue draws as independent: 1 - ({b}/{n})^2 = {fmt_num(trap)}.",)
    return t, text, ans, trap, lead, right, wrong


def _second_draw(rng: random.Random, d: int) -> Raw:
    r, b, n, obj = _urn(rng, d)
    ans, trap = Fraction(r, n), Fraction(r - 1, n - 1)
    t, text = _pick(
        rng,
        (
            f"A bag holds {r} red and {b} blue {obj}. Two are drawn one after the other without replacement, and the "
            "first "
            f"is set aside unseen. What is the probability that the second is red?",
            f"{rng.choice(NAMES)} removes one {obj[:-1]} from a jar of {r} red and {b} blue without looking, then "
            "draws another. "
            f"Find the probability that this second one is red.",
            (
                f"From {r} red and {b} blue {obj}, one is discarded at random and a second is drawn. How likely is "
                "the second to be red?"
            ),
        ),
    )
    lead = (f"The colour of the first draw is never observed; there are {r} red among {n}.",)
    right = (
        (
            f"By symmetry the second draw is equally likely to be any of the {n}: the probability is {r}/{n} = "
            f"{fmt_num(ans)}."
        ),
    )
    wrong = (f"Assume the first draw removed a red one: ({r - 1})/({n - 1}) = {fmt_num(trap)}.",)
    return t, text, ans, trap, lead, right, wrong


# ----------------------------------------------------------------------------- average rates


def _two_speeds(rng: random.Random, d: int) -> tuple[int, int]:
    while True:
        v1 = rng.randint(2, 12 + 4 * d) * 5
        v2 = rng.randint(2, 12 + 4 * d) * 5
        if v1 != v2:
            return v1, v2


def _round_trip(rng: random.Random, d: int) -> Raw:
    v1, v2 = _two_speeds(rng, d)
    ans, trap = Fraction(2 * v1 * v2, v1 + v2), Fraction(v1 + v2, 2)
    t, text = _pick(
        rng,
        (
            f"{rng.choice(NAMES)} drives to a town at {v1} km/h and returns along the same road at {v2} km/h. "
            f"What is the average speed for the round trip, in km/h?",
            f"A cyclist covers a route at {v1} km/h and then covers the same route back at {v2} km/h. "
            f"Find the average speed over the whole journey.",
            f"A drone flies a fixed distance out at {v1} units per hour and the same distance back at {v2} units "
            f"per hour. What is its average speed?",
        ),
    )
    lead = ("Let each leg have the same distance D.",)
    right = (f"Average speed is total distance over total time: 2D / (D/{v1} + D/{v2}) = {fmt_num(ans)}.",)
    wrong = (f"Average the two speeds directly: ({v1} + {v2})/2 = {fmt_num(trap)}.",)
    return t, text, ans, trap, lead, right, wrong


def _equal_times(rng: random.Random, d: int) -> Raw:
    v1, v2 = _two_speeds(rng, d)
    h = rng.randint(1, 4 + d)
    ans, trap = Fraction(v1 + v2, 2), Fraction(2 * v1 * v2, v1 + v2)
    t, text = _pick(
        rng,
        (
            f"{rng.choice(NAMES)} drives for {h} hours at {v1} km/h and then for another {h} hours at {v2} km/h. "
            f"What is the average speed over the whole drive?",
            f"A boat moves at {v1} km/h for {h} hours and at {v2} km/h for the next {h} hours. Find its average speed.",
            (
                f"A runner keeps {v1} m/min for {h} minutes and then {v2} m/min for {h} more minutes. What is the "
                "average speed?"
            ),
        ),
    )
    lead = (f"Each part of the journey lasts the same {h} time units.",)
    right = (
        f"Total distance over total time: ({h} \\cdot {v1} + {h} \\cdot {v2})/{2 * h} = {fmt_num(ans)}, "
        f"the plain mean because the times are equal.",
    )
    wrong = (
        f"Use the harmonic mean as for equal distances: 2 \\cdot {v1} \\cdot {v2}/({v1} + {v2}) = {fmt_num(trap)}.",
    )
    return t, text, ans, trap, lead, right, wrong


def _unequal_legs(rng: random.Random, d: int) -> Raw:
    v1, v2 = _two_speeds(rng, d)
    while True:
        d1, d2 = rng.randint(1, 6 + 2 * d) * 10, rng.randint(1, 6 + 2 * d) * 10
        if d1 != d2:
            break
    time = Fraction(d1, v1) + Fraction(d2, v2)
    ans, trap = (d1 + d2) / time, Fraction(d1 * v1 + d2 * v2, d1 + d2)
    t, text = _pick(
        rng,
        (
            (
                f"{rng.choice(NAMES)} rides {d1} km at {v1} km/h and then {d2} km at {v2} km/h. What is the average "
                "speed for the trip?"
            ),
            (
                f"A train covers {d1} km at {v1} km/h, then {d2} km at {v2} km/h. Find its average speed over the "
                f"{d1 + d2} km."
            ),
            f"A courier travels {d1} km at {v1} km/h and a further {d2} km at {v2} km/h. What average speed results?",
        ),
    )
    lead = (f"The trip has two legs: {d1} km at {v1} km/h and {d2} km at {v2} km/h.",)
    right = (
        (
            f"Total time is {d1}/{v1} + {d2}/{v2} = {fmt_num(time)} hours, so the average speed is "
            f"{d1 + d2}/{fmt_num(time)} = {fmt_num(ans)}."
        ),
    )
    wrong = (f"Weight each speed by its distance: ({d1} \\cdot {v1} + {d2} \\cdot {v2})/{d1 + d2} = {fmt_num(trap)}.",)
    return t, text, ans, trap, lead, right, wrong


def _work_rate(rng: random.Random, d: int) -> Raw:
    while True:
        a = rng.randint(2, 8 + 4 * d)
        b = rng.randint(2, 8 + 4 * d)
        if a != b:
            break
    ans, trap = Fraction(a * b, a + b), Fraction(a + b, 2)
    x, y = rng.sample(NAMES, 2)
    t, text = _pick(
        rng,
        (
            f"{x} can paint a fence alone in {a} hours and {y} can paint it alone in {b} hours. "
            f"How many hours do they need working together?",
            (
                f"One pipe fills a tank in {a} hours and another fills it in {b} hours. How long do both pipes take "
                "together?"
            ),
            (
                f"A printer finishes a job in {a} minutes and a second printer in {b} minutes. Sharing the job, how "
                "long do they take?"
            ),
        ),
    )
    lead = (f"The two workers finish alone in {a} and {b} time units.",)
    right = (
        (
            f"Rates add: 1/{a} + 1/{b} = {fmt_num(Fraction(a + b, a * b))} of the job per unit, so together it takes "
            f"{fmt_num(ans)}."
        ),
    )
    wrong = (f"Average the two times: ({a} + {b})/2 = {fmt_num(trap)}.",)
    return t, text, ans, trap, lead, right, wrong


# ============================================================================= percentages
# ----------------------------------------------------------------------------- successive changes


def _up_then_down(rng: random.Random, d: int) -> Raw:
    price = 100 * rng.randint(2, 9 + 5 * d)
    p = 10 * rng.randint(1, 5 + d)
    q = 10 * rng.randint(1, 5)
    p1 = Fraction(price * (100 + p), 100)
    ans = p1 * Fraction(100 - q, 100)
    trap = Fraction(price * (100 + p - q), 100)
    t, text = _pick(
        rng,
        (
            f"A jacket costs {price} dollars. Its price is raised by {p}% and the new price is then cut by {q}%. "
            f"What is the final price in dollars?",
            (
                f"{rng.choice(NAMES)}'s rent of {price} rises by {p}% one year and falls by {q}% the next. What is "
                "the rent after both changes?"
            ),
            (
                f"A stock worth {price} gains {p}% on Monday and loses {q}% of its new value on Tuesday. What is it "
                "worth after Tuesday?"
            ),
        ),
    )
    lead = (f"After the {p}% increase the value is {price} \\cdot {100 + p}/100 = {fmt_num(p1)}.",)
    right = (f"The {q}% decrease applies to this new value: {fmt_num(p1)} \\cdot {100 - q}/100 = {fmt_num(ans)}.",)
    wrong = (
        f"Combine the two changes into one net change of {p} - {q} = {p - q}%, applied to the original: "
        f"{price} \\cdot {100 + p - q}/100 = {fmt_num(trap)}.",
    )
    return t, text, ans, trap, lead, right, wrong


def _compound_years(rng: random.Random, d: int) -> Raw:
    price = 100 * rng.randint(1, 9 + 5 * d)
    p = 10 * rng.randint(1, 3 + d)
    n = 2 if d < 2 else rng.randint(2, 3)
    ans = Fraction(price * (100 + p) ** n, 100**n)
    trap = Fraction(price * (100 + n * p), 100)
    t, text = _pick(
        rng,
        (
            (
                f"A savings account of {price} dollars grows by {p}% each year, compounded yearly. How much is in it "
                f"after {n} years?"
            ),
            f"A town of {price} people grows by {p}% every year. What is its population after {n} years?",
            (
                f"{rng.choice(NAMES)}'s collection of {price} stamps increases by {p}% per year. How many stamps "
                f"after {n} years?"
            ),
        ),
    )
    lead = (f"The value starts at {price} and grows by {p}% in each of {n} years.",)
    right = (
        (
            f"Each year multiplies the current value by {100 + p}/100: {price} \\cdot ({100 + p}/100)^{n} = "
            f"{fmt_num(ans)}."
        ),
    )
    wrong = (
        (
            f"Add the yearly rates to {n} \\cdot {p} = {n * p}% of the start: {price} \\cdot {100 + n * p}/100 = "
            f"{fmt_num(trap)}."
        ),
    )
    return t, text, ans, trap, lead, right, wrong


def _points_vs_percent(rng: random.Random, d: int) -> Raw:
    a = rng.choice((4, 5, 8, 10, 12, 15, 20, 25, 30, 40))
    b = a + rng.randint(1, 10 + 5 * d)
    ans = Fraction(100 * (b - a), a)
    t, text = _pick(
        rng,
        (
            f"An interest rate rises from {a}% to {b}%. By what percent did the rate increase?",
            (
                f"The share of students cycling to school went from {a}% to {b}%. What is the percent increase in "
                "that share?"
            ),
            (
                f"{rng.choice(NAMES)}'s test pass rate improved from {a}% to {b}%. By what percentage did the pass "
                "rate grow?"
            ),
        ),
    )
    lead = (f"The rate moves from {a}% to {b}%, a difference of {b - a} percentage points.",)
    right = (f"A percent change is relative to the starting rate: ({b} - {a})/{a} \\cdot 100 = {fmt_num(ans)}.",)
    wrong = (f"Report the difference of the two rates, {b - a}, as the percent increase.",)
    return t, text, ans, b - a, lead, right, wrong


# ----------------------------------------------------------------------------- reverse percentages


def _undo_discount(rng: random.Random, d: int) -> Raw:
    p = 5 * rng.randint(2, 8 + d)
    orig = 20 * rng.randint(3, 30 + 20 * d)
    final = Fraction(orig * (100 - p), 100)
    trap = final * Fraction(100 + p, 100)
    t, text = _pick(
        rng,
        (
            f"After a {p}% discount, a bicycle sells for {fmt_num(final)} dollars. What was its original price?",
            (
                f"{rng.choice(NAMES)} paid {fmt_num(final)} for a lamp during a sale offering {p}% off. What was the "
                "price before the sale?"
            ),
            f"A price was reduced by {p}% and now stands at {fmt_num(final)}. Find the price before the reduction.",
        ),
    )
    lead = (f"The sale price {fmt_num(final)} is what remains after a {p}% discount.",)
    right = (
        f"The discount is a percentage of the original x: x \\cdot {100 - p}/100 = {fmt_num(final)}, so x = {orig}.",
    )
    wrong = (f"Add {p}% of the sale price back: {fmt_num(final)} \\cdot {100 + p}/100 = {fmt_num(trap)}.",)
    return t, text, orig, trap, lead, right, wrong


def _undo_raise(rng: random.Random, d: int) -> Raw:
    p = 5 * rng.randint(2, 8 + d)
    orig = 20 * rng.randint(3, 30 + 20 * d)
    final = Fraction(orig * (100 + p), 100)
    trap = final * Fraction(100 - p, 100)
    t, text = _pick(
        rng,
        (
            f"After a {p}% raise, {rng.choice(NAMES)}'s salary is {fmt_num(final)}. What was it before the raise?",
            f"A town's population grew by {p}% to {fmt_num(final)}. What was the population before the growth?",
            f"A price went up by {p}% and is now {fmt_num(final)}. What was it before the increase?",
        ),
    )
    lead = (f"The new value {fmt_num(final)} already includes the {p}% increase.",)
    right = (
        f"The increase is a percentage of the original x: x \\cdot {100 + p}/100 = {fmt_num(final)}, so x = {orig}.",
    )
    wrong = (f"Remove {p}% of the new value: {fmt_num(final)} \\cdot {100 - p}/100 = {fmt_num(trap)}.",)
    return t, text, orig, trap, lead, right, wrong


def _tax_inclusive(rng: random.Random, d: int) -> Raw:
    p = 5 * rng.randint(1, 5 + d)
    orig = 20 * rng.randint(3, 30 + 20 * d)
    total = Fraction(orig * (100 + p), 100)
    ans, trap = Fraction(orig * p, 100), total * Fraction(p, 100)
    t, text = _pick(
        rng,
        (
            (
                f"A bill of {fmt_num(total)} dollars includes {p}% sales tax on the pre-tax price. How much of the "
                "bill is tax?"
            ),
            f"{rng.choice(NAMES)} paid {fmt_num(total)} for a radio, tax of {p}% included. What was the tax amount?",
            (
                f"A receipt shows a total of {fmt_num(total)}, which contains a {p}% service charge on the base "
                "price. Find the service charge."
            ),
        ),
    )
    lead = (f"The total {fmt_num(total)} is the pre-tax price plus {p}% of the pre-tax price.",)
    right = (
        (
            f"The pre-tax price is {fmt_num(total)} \\cdot 100/{100 + p} = {orig}, so the tax is {orig} \\cdot "
            f"{p}/100 = {fmt_num(ans)}."
        ),
    )
    wrong = (f"Take {p}% of the tax-inclusive total: {fmt_num(total)} \\cdot {p}/100 = {fmt_num(trap)}.",)
    return t, text, ans, trap, lead, right, wrong


def _percent_less(rng: random.Random, d: int) -> Raw:
    p = rng.choice((10, 20, 25, 30, 40, 50, 60, 75, 80, 100, 150, 200)[: 8 + 2 * d])
    ans = Fraction(100 * p, 100 + p)
    x, y = rng.sample(NAMES, 2)
    t, text = _pick(
        rng,
        (
            f"{x} earns {p}% more than {y}. By what percent is {y}'s pay less than {x}'s?",
            f"Tower A is {p}% taller than tower B. By what percentage is B shorter than A?",
            (
                f"A new phone costs {p}% more than the old model. By what percent is the old model cheaper than the "
                "new one?"
            ),
        ),
    )
    lead = (f"Write the larger amount as the smaller one times {100 + p}/100.",)
    right = (f"Compared with the larger amount, the gap is {p}/{100 + p} of it, that is {fmt_num(ans)}%.",)
    wrong = (f"The same gap read the other way is also {p}%.",)
    return t, text, ans, p, lead, right, wrong


# ============================================================================= catalogue


def _family(
    name: str, area: str, skill: str, labels: tuple[str, ...], *variants: tuple[str, str, tuple[str, ...], Gen]
) -> Family:
    return Family(
        name,
        area,
        skill,
        labels,
        tuple(Variant(f"{name}.{v}", name, s, c, g) for v, s, c, g in variants),
    )


FAMILIES: tuple[Family, ...] = (
    _family(
        "extraneous_roots",
        "algebra",
        "transformations such as squaring or clearing denominators can add or lose roots, so solutions must be checked",
        (
            (
                "solves equations whose transformations such as squaring or clearing denominators can create or lose "
                "solutions"
            ),
            (
                "checks candidate roots of radical and rational equations against the original equation after "
                "transforming it"
            ),
            (
                "keeps exactly the valid solutions when squaring, taking square roots or multiplying through by "
                "expressions"
            ),
        ),
        (
            "radical_sign",
            (
                "squaring a radical equation adds roots where the other side is negative, so each candidate must be "
                "checked"
            ),
            (
                "fails to check candidate solutions in the original radical equation after squaring both sides of it",
                (
                    "accepts extraneous roots introduced by squaring a square root equation without verifying their "
                    "sign afterwards"
                ),
                "treats every root of the squared equation as a root of the original radical equation",
                "neglects that a square root is nonnegative when solving a radical equation by squaring both sides",
            ),
            _radical_sign,
        ),
        (
            "rational_pole",
            "clearing denominators of a rational equation can add a root that makes a denominator zero",
            (
                "keeps a root that makes a denominator zero after multiplying a rational equation through by it",
                "fails to exclude values where the denominator vanishes when solving an equation with fractions",
                "accepts a solution of the cleared polynomial equation that is not allowed in the original fraction",
                "forgets the restriction that denominators are nonzero after clearing fractions in a rational equation",
            ),
            _rational_pole,
        ),
        (
            "abs_of_square",
            "the square root of a square is an absolute value, so it equals the expression only when it is nonnegative",
            (
                (
                    "simplifies the square root of a squared expression to the expression itself instead of its "
                    "absolute value"
                ),
                "treats the square root of x squared as x, losing the absolute value and its sign condition",
                (
                    "drops the absolute value when undoing a square under a root, ignoring negative values of the "
                    "expression"
                ),
                (
                    "assumes that a square root and a square cancel for every real value instead of giving the "
                    "absolute value"
                ),
            ),
            _abs_of_square,
        ),
        (
            "plus_minus_root",
            "a squared expression equal to a number has a positive and a negative square root, so both roots count",
            (
                "takes only the positive square root when solving a squared equation and loses the negative solution",
                "drops the minus sign option after taking square roots of both sides of an equation",
                "forgets the plus or minus when undoing a square, so one of the two roots is missing",
                "keeps only the principal root when solving an equation of the form square equals a number",
            ),
            _plus_minus_root,
        ),
    ),
    _family(
        "negative_remainder",
        "number_theory",
        "division with a negative dividend must follow the division algorithm: nonnegative remainder, floored quotient",
        (
            (
                "reduces negative integers modulo a divisor using the division algorithm conventions for quotient and "
                "remainder"
            ),
            "handles remainders, quotients and congruences of negative numbers with the correct nonnegative convention",
            "applies modular arithmetic to negative dividends and residues following the division algorithm precisely",
        ),
        (
            "negated_residue",
            "a remainder in integer division must be nonnegative even when the dividend is negative",
            (
                (
                    "reports a negative remainder when dividing a negative integer instead of adjusting it into the "
                    "valid range"
                ),
                (
                    "negates the remainder of the absolute value rather than finding the nonnegative remainder of a "
                    "negative number"
                ),
                (
                    "ignores that division algorithm remainders must lie between zero and the divisor minus one for "
                    "negative dividends"
                ),
                "keeps a negative residue as the final remainder instead of adding the modulus back to it",
            ),
            _negated_residue,
        ),
        (
            "floor_quotient",
            (
                "the quotient of a negative number in the division algorithm is the floor, rounding towards negative "
                "infinity"
            ),
            (
                (
                    "truncates the quotient of a negative dividend towards zero instead of taking the floor of the "
                    "division"
                ),
                "rounds a negative quotient up towards zero when the division algorithm requires rounding down",
                "computes the integer quotient of a negative number by dropping the fraction rather than flooring it",
                "confuses truncation with the floor function when dividing a negative integer by a positive divisor",
            ),
            _floor_quotient,
        ),
        (
            "negative_congruence",
            "a congruence to a negative number is reduced to a positive residue by adding the modulus",
            (
                "drops the minus sign of a negative residue when solving a congruence for the least positive solution",
                "reduces a congruence to a negative number by ignoring the sign instead of adding the modulus",
                "treats x congruent to minus a modulo m as x congruent to a modulo m",
                (
                    "solves a divisibility condition with an added constant using the residue of the constant with "
                    "the wrong sign"
                ),
            ),
            _negative_congruence,
        ),
    ),
    _family(
        "inclusion_exclusion",
        "combinatorics",
        (
            "counting unions, complements and exact memberships of overlapping sets requires the inclusion-exclusion "
            "corrections"
        ),
        (
            (
                "counts elements of overlapping sets, unions, complements and exact memberships with inclusion "
                "exclusion corrections"
            ),
            (
                "applies the inclusion exclusion principle to divisibility counts of unions and intersections of "
                "several sets"
            ),
            (
                "keeps track of overlaps when counting numbers satisfying at least one, exactly one or none of "
                "several conditions"
            ),
        ),
        (
            "union_two",
            "counting a union of two overlapping sets requires subtracting the intersection counted twice",
            (
                "adds the sizes of two overlapping sets without subtracting their intersection when counting the union",
                "double counts elements that belong to both sets instead of applying the inclusion exclusion principle",
                (
                    "forgets to remove common multiples counted twice when counting numbers divisible by either of "
                    "two values"
                ),
                (
                    "treats overlapping divisibility conditions as disjoint and sums their counts directly without "
                    "any correction"
                ),
            ),
            _union_two,
        ),
        (
            "neither_complement",
            "counting elements in neither set means taking the complement of the union within the whole range",
            (
                "reports the size of the union when the question asks for elements belonging to neither of the sets",
                "forgets to subtract the union from the total when counting numbers divisible by neither value",
                "omits the complement step and answers with the count of elements in at least one set",
                "confuses counting elements outside both sets with counting the elements inside their union",
            ),
            _neither,
        ),
        (
            "three_sets",
            "a union of three sets must add back the elements in all three after subtracting pairwise overlaps",
            (
                "omits adding back the triple intersection when applying inclusion exclusion to three overlapping sets",
                "subtracts the pairwise overlaps of three sets and forgets the elements common to all three",
                "stops the inclusion exclusion formula for three sets after the pairwise correction terms",
                "undercounts a union of three divisibility conditions by dropping the term for all three at once",
            ),
            _three_sets,
        ),
        (
            "exactly_one",
            "elements in exactly one of two sets exclude the intersection from both sets, subtracting it twice",
            (
                "subtracts the intersection only once when counting elements that belong to exactly one of two sets",
                (
                    "counts numbers divisible by exactly one of two values as the union size instead of removing the "
                    "overlap twice"
                ),
                "confuses elements in exactly one set with elements in at least one set when correcting for overlap",
                "leaves the common multiples in one of the two counts when only exclusive membership should be counted",
            ),
            _exactly_one,
        ),
    ),
    _family(
        "sampling_without_replacement",
        "probability",
        "drawing without replacement changes the population for later draws, so draws are dependent",
        (
            (
                "computes probabilities of successive draws without replacement with the correct dependence between "
                "the draws"
            ),
            "models random draws from an urn that are not returned, tracking the changing population and orders",
            (
                "reasons about dependent sampling probabilities for urns and cards drawn one after another without "
                "replacement"
            ),
        ),
        (
            "both_same",
            "the probability that two draws without replacement are both of one colour uses the reduced counts",
            (
                (
                    "treats draws without replacement as independent events with unchanged probabilities for the "
                    "second draw"
                ),
                "uses the same probability for both picks even though the first item is not returned to the pool",
                "squares the single draw probability for two draws without replacement instead of reducing the counts",
                "fails to update the numerator and denominator after the first draw when both draws must match",
            ),
            _both_same,
        ),
        (
            "one_of_each",
            "two draws of different colours can happen in two orders, both of which must be counted",
            (
                "counts only one order of drawing two different colours and misses the reversed order",
                "forgets the factor two for the two orders in which one item of each colour can be drawn",
                "computes the probability of one of each colour from a single ordered sequence of draws",
                "treats red then blue as the only way to get one of each colour when drawing two items",
            ),
            _one_of_each,
        ),
        (
            "at_least_one",
            "the complement of at least one is none, and the no-success draws without replacement are dependent",
            (
                (
                    "computes the complement of at least one success with independent draws although items are not "
                    "replaced"
                ),
                (
                    "uses the squared probability of a failure for two draws without replacement in a complement "
                    "calculation"
                ),
                "treats both failures as independent when subtracting from one for draws that are not returned",
                "ignores the reduced pool in the complement probability of drawing no red item in two draws",
            ),
            _at_least_one,
        ),
        (
            "second_draw",
            "when the first draw is unseen, the second draw has the same distribution as the first by symmetry",
            (
                "conditions the second draw on an unobserved first outcome instead of using symmetry of the draws",
                (
                    "assumes the unseen first draw removed a favourable item when computing the probability for the "
                    "second draw"
                ),
                "reduces the favourable count for the second draw although the colour of the first draw is unknown",
                "treats an unknown first draw as a known removal when finding the probability of the next draw",
            ),
            _second_draw,
        ),
    ),
    _family(
        "successive_percentages",
        "percentages",
        "successive and repeated percentage changes compound, each applied to the current value, relative to a base",
        (
            "chains percentage changes correctly by applying each one to the current value rather than adding rates",
            "handles compound growth, successive increases and decreases, and percent changes of percentage rates",
            "computes results of repeated or consecutive percentage changes relative to the correct base each time",
        ),
        (
            "up_then_down",
            "an increase followed by a decrease multiplies two factors; the second applies to the new value",
            (
                "adds an increase and a decrease as one net percentage instead of applying them one after the other",
                "applies the second percentage change to the original value instead of the already changed value",
                "combines a rise and a fall into their difference of rates rather than multiplying the two factors",
                "treats consecutive percentage changes as additive and ignores that the second change uses a new base",
            ),
            _up_then_down,
        ),
        (
            "compound_years",
            "growth by a fixed percentage each year compounds, raising the yearly factor to the number of years",
            (
                "adds the yearly growth rates as simple interest instead of compounding them over the years",
                (
                    "multiplies the annual percentage by the number of years rather than raising the growth factor to "
                    "that power"
                ),
                "ignores compounding when a quantity grows by the same percentage in each of several years",
                "applies every yearly percentage to the starting value instead of to the value reached the year before",
            ),
            _compound_years,
        ),
        (
            "points_vs_percent",
            "a percent change of a rate is relative to the starting rate, not the difference in percentage points",
            (
                "confuses a change in percentage points with a percent change of the rate itself",
                "reports the difference between two percentages as the relative percent increase of the rate",
                "forgets to divide the change in a rate by the starting rate when asked for a percent change",
                (
                    "treats the gap between two percentage rates as a percent change without using the original rate "
                    "as base"
                ),
            ),
            _points_vs_percent,
        ),
    ),
    _family(
        "sign_flip_inequality",
        "algebra",
        (
            "operations on inequalities can reverse them or make them two-sided: negative factors, reciprocals, "
            "squares, absolute values"
        ),
        (
            (
                "solves inequalities correctly through negative factors, reciprocals, squares and absolute values "
                "with direction changes"
            ),
            "transforms inequalities while tracking when the direction reverses and when a bound becomes two sided",
            "handles the direction and sidedness of inequality bounds when isolating the variable in different forms",
        ),
        (
            "divide_negative",
            "dividing or multiplying an inequality by a negative number reverses the direction of the inequality",
            (
                (
                    "keeps the inequality direction when dividing both sides by a negative coefficient instead of "
                    "reversing it"
                ),
                "forgets to flip the inequality sign after multiplying or dividing by a negative quantity",
                (
                    "solves a linear inequality with a negative coefficient as if it were an equation without "
                    "reversing direction"
                ),
                "fails to reverse the inequality symbol when dividing through by a negative number during solving",
            ),
            _divide_negative,
        ),
        (
            "reciprocal",
            "taking reciprocals of both sides of an inequality between positive numbers reverses its direction",
            (
                (
                    "keeps the inequality direction when taking reciprocals of both sides of an inequality between "
                    "positive numbers"
                ),
                (
                    "forgets that inverting both sides of an inequality of positive quantities reverses the "
                    "inequality sign"
                ),
                "solves one over x less than a constant as if x were less than the constant's inverse",
                "mishandles reciprocal inequalities by inverting both sides without flipping the direction",
            ),
            _reciprocal,
        ),
        (
            "square_bound",
            "taking the square root of x squared below a bound gives a two-sided bound on x, negative side included",
            (
                "turns a squared inequality into a one sided bound and forgets the negative lower limit on x",
                "takes square roots of x squared less than a number and keeps only x below the root",
                "loses the lower bound minus the root when solving a quadratic inequality by square roots",
                "treats x squared below a constant as x below its square root without the absolute value",
            ),
            _square_bound,
        ),
        (
            "abs_bound",
            "an absolute value inequality below a bound is two-sided, constraining the expression from both sides",
            (
                "drops the absolute value bars in an inequality and keeps only the upper one sided bound",
                "solves an absolute value less than a constant as a single linear inequality without the lower bound",
                "forgets that a bound on an absolute value restricts the expression from below as well as above",
                (
                    "treats the distance condition in an absolute value inequality as one sided, ignoring negative "
                    "deviations"
                ),
            ),
            _abs_bound,
        ),
    ),
    _family(
        "units_digit_cycle",
        "number_theory",
        "finding the last digit of a power uses the period of the units-digit cycle and the right position in it",
        (
            (
                "evaluates last digits of large powers through the period of units digit cycles and correct cycle "
                "positions"
            ),
            "reduces exponents modulo the cycle length of final digits and reads the matching entry of the cycle",
            "uses periodic patterns of units digits of powers, including exponents divisible by the period",
        ),
        (
            "cycle_index",
            "the units-digit cycle starts at exponent one, so remainder r of the exponent picks the r-th entry",
            (
                (
                    "misindexes the repeating cycle of units digits by treating the exponent remainder as a zero "
                    "based position"
                ),
                "reads the entry after the correct one in the units digit cycle because of an off by one index",
                "applies the periodicity of last digits of powers with an off by one error in the cycle position",
                (
                    "counts cycle positions from exponent zero instead of exponent one when locating the last digit "
                    "of a power"
                ),
            ),
            _cycle_index,
        ),
        (
            "zero_remainder",
            "an exponent divisible by the period corresponds to the last entry of the units-digit cycle, not to one",
            (
                "reads an exponent remainder of zero as the zeroth power and reports a units digit of one",
                "maps a zero remainder of the exponent to the power zero instead of the last entry of the cycle",
                "treats an exponent divisible by four as giving last digit one for every base",
                "mishandles the case where the exponent is a multiple of the cycle length when finding the last digit",
            ),
            _zero_remainder,
        ),
        (
            "exponent_mod_ten",
            "the exponent must be reduced modulo the length of the units-digit cycle, four, not modulo ten",
            (
                (
                    "reduces the exponent modulo ten instead of modulo the cycle length when finding the last digit "
                    "of a power"
                ),
                (
                    "uses the last digit of the exponent rather than its remainder modulo four to locate the cycle "
                    "position"
                ),
                (
                    "confuses the base ten of the digits with the period of the units digit cycle when reducing the "
                    "exponent"
                ),
                "takes the exponent's final digit as its position in the cycle of last digits of powers",
            ),
            _exponent_mod_ten,
        ),
    ),
    _family(
        "circular_arrangements",
        "combinatorics",
        "arrangements around a circle identify rotations, and reflections for necklaces, unless the seats are labelled",
        (
            (
                "counts arrangements of objects around circles, tables and necklaces with the right symmetry "
                "identifications"
            ),
            "handles rotational and reflective symmetry, labelled seats and adjacency blocks in circular permutations",
            "counts seatings around round tables and rings by deciding which rotations or reflections are identical",
        ),
        (
            "round_table",
            "seating people around a round table is not like a straight row: rotations are one seating, (n-1)!",
            (
                (
                    "counts circular arrangements as linear permutations without dividing out the equivalent "
                    "rotations of the circle"
                ),
                "ignores rotational symmetry when seating people around a round table and overcounts the arrangements",
                "uses the full factorial for arrangements in a ring instead of fixing one position first",
                (
                    "treats rotations of a circular seating as distinct arrangements, overcounting by the number of "
                    "positions"
                ),
            ),
            _round_table,
        ),
        (
            "adjacent_block",
            "when two people must sit together around a circle, the glued block can be ordered internally in two ways",
            (
                "forgets that the glued pair of adjacent people can be ordered two ways inside their block",
                "treats a block of two neighbours as a single fixed unit and misses its internal arrangements",
                "omits the factor two for swapping the two people who must sit next to each other at a round table",
                "counts circular seatings with an adjacency condition without permuting the members of the glued block",
            ),
            _adjacent_block,
        ),
        (
            "necklace_reflection",
            "a necklace or bracelet can be flipped over, so mirror-image circular arrangements are the same",
            (
                "ignores reflections when counting necklaces that can be turned over and counts mirror images twice",
                (
                    "counts bracelet arrangements up to rotation only although flipping the bracelet gives the same "
                    "arrangement"
                ),
                "forgets to divide by two for mirror images when arranging distinct beads on a necklace",
                "treats a circular arrangement and its reflection as different for a ring that can be flipped",
            ),
            _necklace,
        ),
        (
            "numbered_seats",
            "numbered or labelled chairs make every assignment of people to chairs distinct, so all n! count",
            (
                "divides by the number of people although the chairs carry numbers and every assignment is distinct",
                "applies the unlabelled circle formula to numbered chairs where each assignment of guests counts",
                "treats assignments to labelled chairs or cabins as identical when they differ by a shift of numbers",
                (
                    "undercounts assignments of people to numbered positions by fixing one person as if seats were "
                    "unlabelled"
                ),
            ),
            _numbered_seats,
        ),
    ),
    _family(
        "harmonic_average_speed",
        "probability",
        "average rates are total quantity over total time, weighting each rate by its time, and rates of work add",
        (
            "computes average speeds and combined work rates from total quantity over total time with correct weights",
            "averages rates by weighting them with time spent, distinguishing equal distances from equal times",
            "reasons about average speed and joint work rates without averaging rates or times arithmetically",
        ),
        (
            "round_trip",
            "average speed over equal distances is total distance over total time, the harmonic mean of the speeds",
            (
                "averages two speeds arithmetically instead of dividing total distance by total time for a round trip",
                "ignores that the slower leg takes more time when averaging speeds over equal distances",
                "uses the arithmetic mean of two speeds where the harmonic mean for equal distances is required",
                "fails to weight each speed by the time spent when finding the average speed of a return journey",
            ),
            _round_trip,
        ),
        (
            "equal_times",
            "average speed over equal times is the plain arithmetic mean of the speeds",
            (
                "uses the harmonic mean of speeds although the two parts of the trip last equal times",
                "applies the equal distance formula to a journey split into equal time intervals",
                "weights speeds as if the distances were equal when the durations of both parts are the same",
                "computes the average speed over equal durations with the harmonic mean instead of the simple mean",
            ),
            _equal_times,
        ),
        (
            "unequal_legs",
            "with legs of different lengths, average speed divides total distance by the summed times of the legs",
            (
                (
                    "weights each speed by its distance instead of by its time when averaging over legs of different "
                    "lengths"
                ),
                (
                    "averages speeds with distance weights rather than dividing the total distance by the total "
                    "travel time"
                ),
                (
                    "computes a distance weighted mean of speeds for unequal legs instead of total distance over "
                    "total time"
                ),
                "uses lengths of the legs as weights for the speeds rather than the times spent on each leg",
            ),
            _unequal_legs,
        ),
        (
            "work_rate",
            "workers together add their rates, the reciprocals of their times, rather than averaging times",
            (
                "averages the individual completion times instead of adding the work rates of people working together",
                "finds the joint time for two workers as the mean of their times rather than from summed rates",
                "ignores that rates of work add when two machines share a job and averages their durations",
                (
                    "combines two completion times arithmetically instead of adding their reciprocals to get the "
                    "joint rate"
                ),
            ),
            _work_rate,
        ),
    ),
    _family(
        "reverse_percentage",
        "percentages",
        (
            "undoing or comparing percentage changes divides by the factor of the original base, percentages are not "
            "symmetric"
        ),
        (
            "recovers original amounts and compares quantities after percentage changes using the correct base value",
            "reverses percentage increases, discounts and included taxes by dividing by the change factor",
            "handles inverse percentage problems where the percentage refers to an original value not given directly",
        ),
        (
            "undo_discount",
            "to undo a discount, divide the sale price by the remaining fraction, not add the percentage back",
            (
                "recovers a price before a discount by adding the discount percentage of the sale price back",
                "reverses a percentage decrease by applying the same percentage increase to the reduced value",
                "computes an original price from a discounted one with the sale price as base instead of dividing",
                "fails to divide by the remaining fraction when finding the price before a percentage discount",
            ),
            _undo_discount,
        ),
        (
            "undo_raise",
            "to undo a percentage increase, divide the new value by the growth factor, not subtract the percentage",
            (
                "recovers an original value after an increase by removing the same percentage of the new value",
                (
                    "reverses a percentage raise by subtracting that percentage of the increased amount instead of "
                    "dividing"
                ),
                "undoes a percentage growth with the new value as base, treating increases and decreases as symmetric",
                "fails to divide by the growth factor when finding the value before a percentage increase",
            ),
            _undo_raise,
        ),
        (
            "tax_inclusive",
            "tax included in a total is a percentage of the pre-tax price, found by first dividing out the tax factor",
            (
                "computes tax as a percentage of the tax inclusive total instead of the price before tax",
                "takes the tax rate of the final amount when the rate applies to the pre tax base",
                (
                    "applies an included percentage charge to the total rather than dividing the total by the tax "
                    "factor first"
                ),
                "forgets that a percentage already included in a total refers to the smaller base amount",
            ),
            _tax_inclusive,
        ),
        (
            "percent_less",
            "if A is p percent more than B, then B is less than A by p over 100 plus p, a different percentage",
            (
                "assumes percentage differences are symmetric, so being p percent more implies being p percent less",
                "uses the same percentage for comparing B to A as for comparing A to B",
                "reverses a percentage comparison without changing the base to the larger quantity",
                "treats more than and less than percentage comparisons as interchangeable with the same rate",
            ),
            _percent_less,
        ),
    ),
    _family(
        "inclusive_counting",
        "number_theory",
        (
            "counting the integers or posts in a range depends on whether endpoints are included and whether the path "
            "closes"
        ),
        (
            "counts integers, pages and posts in ranges with the right endpoint convention and no fencepost errors",
            "avoids off by one errors when counting elements of inclusive, exclusive and circular ranges",
            "decides correctly whether to add or subtract one when counting items between two endpoints",
        ),
        (
            "inclusive_range",
            "counting the integers in a range with both endpoints included needs the difference plus one",
            (
                "counts the integers in an inclusive range as the difference of the endpoints without adding one",
                "makes an off by one fencepost error by counting gaps instead of items between two included endpoints",
                (
                    "forgets to include both endpoints when counting consecutive numbers, pages or labelled positions "
                    "in a range"
                ),
                "undercounts an inclusive interval by subtracting the endpoints and omitting the final plus one",
            ),
            _inclusive_range,
        ),
        (
            "exclusive_range",
            "counting the integers strictly between two endpoints excludes both, giving the difference minus one",
            (
                "includes both endpoints when the question asks for integers strictly between two numbers",
                "counts numbers strictly between two values with the inclusive formula, overcounting by two",
                "fails to exclude the endpoints when counting houses or integers lying between two given ones",
                "adds one to the difference of endpoints for an exclusive range instead of subtracting one",
            ),
            _exclusive_range,
        ),
        (
            "closed_loop",
            "on a closed loop the number of posts equals the number of gaps, with no extra post at the end",
            (
                "adds an extra post at the end when counting evenly spaced posts around a closed loop",
                "uses the straight fence formula with plus one for posts placed around a circular path",
                "forgets that the last gap of a closed loop ends at the first post when counting posts",
                "overcounts items spaced evenly around a circle by treating the loop as a line segment",
            ),
            _closed_loop,
        ),
    ),
    _family(
        "amgm_equality",
        "algebra",
        "an AM-GM bound is an extremum only if its equality case is attainable and the terms are positive",
        (
            (
                "uses the arithmetic geometric mean inequality for extremal problems while checking equality and "
                "positivity conditions"
            ),
            (
                "optimises expressions with AM-GM bounds only after confirming the equality case is attainable in the "
                "domain"
            ),
            "finds minima and maxima of sums and products by inequality bounds with their attainability conditions",
        ),
        (
            "endpoint_lower",
            "when x must be at least m and the AM-GM equality point is below m, the minimum is at x = m",
            (
                "takes the AM-GM lower bound as the minimum although the equality point lies below the allowed range",
                "ignores a lower limit on x that excludes the AM-GM equality point and reports the unattainable bound",
                (
                    "assumes the inequality bound is achieved without checking the equality point against the lower "
                    "endpoint"
                ),
                "skips comparing the AM-GM equality point with the lower end of the domain when minimising",
            ),
            _amgm_lower,
        ),
        (
            "endpoint_upper",
            "when x is at most m and the AM-GM equality point exceeds m, the minimum is at the endpoint x = m",
            (
                "reports the AM-GM bound as the minimum although the equality point exceeds the upper limit on x",
                "ignores an upper bound on the variable that rules out the equality case of the AM-GM inequality",
                "fails to optimise at the upper endpoint when the AM-GM equality point lies outside the interval",
                "accepts an AM-GM minimum whose equality point is larger than the largest allowed value",
            ),
            _amgm_upper,
        ),
        (
            "integer_equality",
            (
                "for whole-number variables with an odd sum, the AM-GM equality x = y is impossible, so the bound is "
                "not reached"
            ),
            (
                "uses the real AM-GM bound for a product of integers whose equality case needs non integer values",
                "ignores that whole number variables cannot be equal when their sum is odd and reports the real bound",
                "takes the square of half the sum as the maximum product of two integers with an odd sum",
                "forgets the integrality constraint when maximising a product of two whole numbers with AM-GM",
            ),
            _amgm_integer,
        ),
        (
            "negative_terms",
            "AM-GM holds only for positive terms; for negative x the expression is bounded above by minus the bound",
            (
                "applies the AM-GM inequality to negative quantities where it does not hold",
                "uses AM-GM on terms that are negative and reports the positive bound as the extremum",
                "forgets that AM-GM requires positive terms and gets the wrong sign for the extremal value",
                "ignores the sign of the variable when bounding x plus a constant over x with AM-GM",
            ),
            _amgm_negative,
        ),
    ),
    _family(
        "log_domain",
        "algebra",
        "logarithmic equations restrict arguments to positive values and bases to positive values other than one",
        (
            "solves logarithmic equations while respecting domains of arguments and bases and the limits of log rules",
            "checks positivity of logarithm arguments and admissibility of bases when solving equations with logs",
            "handles domain conditions and the power rule of logarithms correctly when finding all real solutions",
        ),
        (
            "argument_positive",
            "solutions of logarithmic equations must keep every logarithm argument positive, checking the domain",
            (
                (
                    "keeps solutions that make a logarithm argument nonpositive instead of checking the domain of "
                    "each logarithm"
                ),
                "fails to verify the domain of logarithms after combining them into a single polynomial equation",
                "accepts roots of the derived quadratic that make an argument of the original logarithms negative",
                (
                    "omits the positivity condition on logarithm arguments when solving an equation with a sum of "
                    "logarithms"
                ),
            ),
            _log_argument,
        ),
        (
            "base_domain",
            (
                "a logarithm base must be positive and different from one, so negative candidates for the base are "
                "rejected"
            ),
            (
                "accepts a negative value as the base of a logarithm when solving for an unknown base",
                "forgets that a logarithm base must be positive and not one when solving an exponential form",
                "keeps both square roots as possible bases of a logarithm without checking base restrictions",
                "ignores the admissibility conditions on the base of a logarithm after rewriting it as a power",
            ),
            _log_base,
        ),
        (
            "power_rule",
            "the power rule log(x^2) = 2 log x only holds for positive x, so applying it loses negative solutions",
            (
                "applies the power rule to the logarithm of a square and loses the negative solutions",
                "rewrites log of x squared as twice log x, which silently restricts x to positive values",
                "drops the negative root because the power rule for logarithms was used outside its domain",
                "uses a logarithm identity valid only for positive arguments and misses solutions with negative x",
            ),
            _log_power,
        ),
    ),
    _family(
        "polygon_diagonals",
        "combinatorics",
        "diagonals join non-adjacent vertices: exclude sides and neighbours, and count each diagonal once",
        (
            "counts diagonals of convex polygons by excluding sides and adjacent vertices and avoiding double counting",
            "enumerates segments between polygon vertices, separating sides from diagonals and counting each once",
            "applies counting principles to diagonals of polygons, from one vertex or in total, without overcounting",
        ),
        (
            "sides_excluded",
            "diagonals join non-adjacent vertices, so the polygon sides must be excluded from all vertex pairs",
            (
                "counts every segment between two vertices as a diagonal without excluding the sides of the polygon",
                "forgets to subtract the polygon edges from the number of vertex pairs when counting diagonals",
                "includes adjacent vertex pairs in the total diagonal count instead of only non adjacent pairs",
                "uses the total number of vertex pairs for diagonals and ignores that sides are not diagonals",
            ),
            _sides_excluded,
        ),
        (
            "one_vertex",
            "from one vertex, diagonals go to all vertices except itself and its two neighbours, n - 3 of them",
            (
                "counts the segments to the two neighbouring vertices as diagonals from a single vertex",
                "excludes only the vertex itself, not its two neighbours, when counting diagonals from one corner",
                "takes all other vertices as diagonal endpoints from one vertex and forgets the adjacent sides",
                "overcounts diagonals from a single vertex by including the two edges that meet there",
            ),
            _one_vertex,
        ),
        (
            "double_count",
            "counting diagonals vertex by vertex counts each diagonal from both ends, so the product is halved",
            (
                "counts each diagonal twice, once from each endpoint, and forgets to divide the product by two",
                "multiplies vertices by diagonals per vertex without halving for the two ends of every diagonal",
                "double counts diagonals when summing over the vertices they start from",
                "forgets that a diagonal counted from each of its endpoints appears twice in the total",
            ),
            _ordered_ends,
        ),
    ),
)

FAMILY_BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}
VARIANT_BY_KEY: dict[str, Variant] = {v.key: v for f in FAMILIES for v in f.variants}


def families(n: int) -> tuple[Family, ...]:
    """The first ``n`` families of the catalogue (ordered so that any prefix of 5 or more spans
    every knowledge area)."""
    if not 1 <= n <= len(FAMILIES):
        raise BadInput(f"sim.n_families must be between 1 and {len(FAMILIES)}")
    return FAMILIES[:n]


def variants_of(fams: tuple[Family, ...] | list[Family]) -> tuple[Variant, ...]:
    return tuple(v for f in fams for v in f.variants)
