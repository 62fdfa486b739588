"""Number theory: remainders of negative numbers, cycles of units digits, counting with inclusive ends.

One writer per trap variant (``WRITERS``, keyed ``"family.variant"`` as in ``families.toml``): each
draws a question at a difficulty level (0-3) and returns it with its true answer, the answer of a
solver that falls into the trap, and both solution paths as steps.
"""

from __future__ import annotations

import random

from diagevo.train.sim.questions.common import Raw, Writer, pick
from diagevo.train.sim.text import NAMES, OBJECTS

# ----------------------------------------------------------------------------- negative remainders


def _negated_residue(rng: random.Random, d: int) -> Raw:
    while True:
        n = rng.randint(10, 60 * (d + 1))
        m = rng.randint(3, 9 + 2 * d)
        if n % m:
            break
    q, r = divmod(n, m)
    ans, trap = (-n) % m, -r
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    return pick(
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
    t, text = pick(
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
        t, text = pick(
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
        t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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


WRITERS: dict[str, Writer] = {
    "negative_remainder.negated_residue": _negated_residue,
    "negative_remainder.floor_quotient": _floor_quotient,
    "negative_remainder.negative_congruence": _negative_congruence,
    "units_digit_cycle.cycle_index": _cycle_index,
    "units_digit_cycle.zero_remainder": _zero_remainder,
    "units_digit_cycle.exponent_mod_ten": _exponent_mod_ten,
    "inclusive_counting.inclusive_range": _inclusive_range,
    "inclusive_counting.exclusive_range": _exclusive_range,
    "inclusive_counting.closed_loop": _closed_loop,
}
