"""What every question writer returns, how its variant's templates word it, and the small draws
several writers share."""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from functools import cache
from string import Formatter
from types import CodeType
from typing import Any

from diagevo.train.sim.text import NAMES, OBJECTS

# answer and trap are exact numbers: ints, or Fractions where the result is not whole
Num = int | Fraction

# the fields of a question template that are drawn afresh at each mention, not by the writer
FRESH: dict[str, Sequence[str]] = {"someone": NAMES, "someone_else": NAMES, "some_objects": OBJECTS}


class Draw:
    """One question of a variant as its writer draws it: the true answer, the answer of a solver
    that falls into the trap, and the values its templates (``families.toml``) name. ``among``
    narrows the question templates it may be worded by (their indexes; every one by default)."""

    def __init__(self, answer: Num, trap: Num, /, *, among: range | None = None, **values: object) -> None:
        self.answer, self.trap, self.among = answer, trap, among
        self.values = {"ans": answer, "trap": trap, **values}


# a writer draws one question of its variant from the generator at a difficulty level (0-3)
Writer = Callable[[random.Random, int], Draw]


# what a template's field may hold besides whole numbers: names, minus, and these operators
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_ARITHMETIC = (ast.Expression, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, ast.USub, *_OPERATORS)


@cache
def field_expression(field: str) -> CodeType:
    """A template's field: a name the writer drew, or whole-number arithmetic of such names
    (``{a + b - c}``, ``{(n - 1) % 4 + 1}``), so a writer draws the numbers and the wording says
    how they combine; anything else is a ``ValueError``. Evaluated with no builtins, a field so
    checked can only read the values and compute with them."""
    try:
        tree = ast.parse(field, mode="eval")
    except SyntaxError:
        tree = None
    if tree is None or not all(
        isinstance(n, _ARITHMETIC) or (isinstance(n, ast.Constant) and type(n.value) is int) for n in ast.walk(tree)
    ):
        raise ValueError("a field is a name in braces, {name}, or whole-number arithmetic of names, {name + 1}")
    return compile(tree, field, "eval")


class _Filled(Formatter):
    """``str.format`` whose fields are :func:`field_expression`s of the values."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, str]:
        return eval(field_expression(field_name), {"__builtins__": {}}, kwargs), field_name


def fill(template: str, values: Mapping[str, Any]) -> str:
    """``template`` with each field's value computed from ``values``."""
    return _Filled().vformat(template, (), values)


def _fields(template: str) -> list[str]:
    return [field for _, field, _, _ in Formatter().parse(template) if field]


def worded(
    draw: Draw, rng: random.Random, questions: Sequence[str], steps: Sequence[Sequence[str]]
) -> tuple[int, str, list[tuple[str, ...]]]:
    """The question template drawn (its index is the question's "context" for transfer), the
    question and each of ``steps`` (lead, right, wrong) filled in with ``draw``'s values.

    Every template the question may be worded by draws its fresh names and objects (``FRESH``)
    before one is picked, in the order they are written: the generator's sequence, and so every
    simulated run, is fixed by that order."""
    among = draw.among or range(len(questions))
    fresh = [{f: rng.choice(FRESH[f]) for f in _fields(questions[i]) if f in FRESH} for i in among]
    n = rng.randrange(len(among))
    text = fill(questions[among[n]], {**draw.values, **fresh[n]})
    return among[n], text, [tuple(fill(s, draw.values) for s in step) for step in steps]


def aggregate(rng: random.Random) -> str:
    """Whether the question asks for the sum or the product of the values it finds."""
    return rng.choice(("sum", "product"))


def combine(agg: str, xs: list[int]) -> int:
    return sum(xs) if agg == "sum" else math.prod(xs)
