"""Percentages: successive changes, and undoing a change to find the original amount.

One writer per trap variant (``WRITERS``, keyed ``"family.variant"`` as in ``families.toml``): each
draws a question at a difficulty level (0-3) and returns it with its true answer, the answer of a
solver that falls into the trap, and both solution paths as steps.
"""

from __future__ import annotations

import random
from fractions import Fraction

from diagevo.train.sim.questions.common import Raw, Writer, pick
from diagevo.train.sim.text import NAMES, fmt_num

# ----------------------------------------------------------------------------- successive changes


def _up_then_down(rng: random.Random, d: int) -> Raw:
    price = 100 * rng.randint(2, 9 + 5 * d)
    p = 10 * rng.randint(1, 5 + d)
    q = 10 * rng.randint(1, 5)
    p1 = Fraction(price * (100 + p), 100)
    ans = p1 * Fraction(100 - q, 100)
    trap = Fraction(price * (100 + p - q), 100)
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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


WRITERS: dict[str, Writer] = {
    "successive_percentages.up_then_down": _up_then_down,
    "successive_percentages.compound_years": _compound_years,
    "successive_percentages.points_vs_percent": _points_vs_percent,
    "reverse_percentage.undo_discount": _undo_discount,
    "reverse_percentage.undo_raise": _undo_raise,
    "reverse_percentage.tax_inclusive": _tax_inclusive,
    "reverse_percentage.percent_less": _percent_less,
}
