"""What every question writer returns, and the small draws several of them share."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from fractions import Fraction

# answer and trap are exact numbers: ints, or Fractions where the result is not whole
Num = int | Fraction
# (template, text, answer, trap, lead, right, wrong): the surface template drawn, the question, the
# true answer, the trapped answer, the steps both paths share, and where the right and wrong paths go
Raw = tuple[int, str, Num, Num, tuple[str, ...], tuple[str, ...], tuple[str, ...]]
# a writer draws one question of its variant from the generator at a difficulty level (0-3)
Writer = Callable[[random.Random, int], Raw]


def aggregate(rng: random.Random) -> str:
    """Whether the question asks for the sum or the product of the values it finds."""
    return rng.choice(("sum", "product"))


def combine(agg: str, xs: list[int]) -> int:
    return sum(xs) if agg == "sum" else math.prod(xs)


def pick(rng: random.Random, texts: tuple[str, ...]) -> tuple[int, str]:
    """One surface template and its index (the index is the question's "context" for transfer)."""
    t = rng.randrange(len(texts))
    return t, texts[t]
