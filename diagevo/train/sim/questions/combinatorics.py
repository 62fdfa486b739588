"""Combinatorics: inclusion-exclusion, circular arrangements, diagonals of polygons.

One writer per trap variant (``WRITERS``, keyed ``"family.variant"`` as in ``families.toml``): each
draws a question at a difficulty level (0-3) and returns it with its true answer, the answer of a
solver that falls into the trap, and both solution paths as steps.
"""

from __future__ import annotations

import math
import random

from diagevo.train.sim.questions.common import Raw, Writer, pick
from diagevo.train.sim.text import NAMES, OBJECTS

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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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


WRITERS: dict[str, Writer] = {
    "inclusion_exclusion.union_two": _union_two,
    "inclusion_exclusion.neither_complement": _neither,
    "inclusion_exclusion.three_sets": _three_sets,
    "inclusion_exclusion.exactly_one": _exactly_one,
    "circular_arrangements.round_table": _round_table,
    "circular_arrangements.adjacent_block": _adjacent_block,
    "circular_arrangements.necklace_reflection": _necklace,
    "circular_arrangements.numbered_seats": _numbered_seats,
    "polygon_diagonals.sides_excluded": _sides_excluded,
    "polygon_diagonals.one_vertex": _one_vertex,
    "polygon_diagonals.double_count": _ordered_ends,
}
