"""Probability and rates: drawing without replacement, average speeds and work rates.

One writer per trap variant (``WRITERS``, keyed ``"family.variant"`` as in ``families.toml``): each
draws a question at a difficulty level (0-3) and returns it with its true answer, the answer of a
solver that falls into the trap, and both solution paths as steps.
"""

from __future__ import annotations

import random
from fractions import Fraction

from diagevo.train.sim.questions.common import Raw, Writer, pick
from diagevo.train.sim.text import NAMES, fmt_num

# ----------------------------------------------------------------------------- sampling without replacement


def _urn(rng: random.Random, d: int) -> tuple[int, int, int, str]:
    r = rng.randint(2, 6 + 2 * d)
    b = rng.randint(2, 6 + 2 * d)
    return r, b, r + b, rng.choice(("marbles", "balls", "cards", "tokens"))


def _both_same(rng: random.Random, d: int) -> Raw:
    r, b, n, obj = _urn(rng, d)
    ans, trap = Fraction(r * (r - 1), n * (n - 1)), Fraction(r * r, n * n)
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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
    t, text = pick(
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


WRITERS: dict[str, Writer] = {
    "sampling_without_replacement.both_same": _both_same,
    "sampling_without_replacement.one_of_each": _one_of_each,
    "sampling_without_replacement.at_least_one": _at_least_one,
    "sampling_without_replacement.second_draw": _second_draw,
    "harmonic_average_speed.round_trip": _round_trip,
    "harmonic_average_speed.equal_times": _equal_times,
    "harmonic_average_speed.unequal_legs": _unequal_legs,
    "harmonic_average_speed.work_rate": _work_rate,
}
