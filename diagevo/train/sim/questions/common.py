"""What every question writer returns, how its variant's templates word it, and the small draws
several writers share."""

from __future__ import annotations

import ast
import math
import operator
import random
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from functools import cache
from string import Formatter
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


_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


@cache
def field_expression(field: str) -> ast.expr:
    """A template's field: a name the writer drew, or whole-number arithmetic of such names
    (``{a + b - c}``, ``{(n - 1) % 4 + 1}``), so a writer draws the numbers and the wording says
    how they combine; anything else is a ``ValueError``."""
    try:
        node = ast.parse(field, mode="eval").body
    except SyntaxError:
        node = None
    allowed = (ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, ast.USub, *_OPERATORS)
    if node is None or not all(
        isinstance(n, allowed) or (isinstance(n, ast.Constant) and type(n.value) is int) for n in ast.walk(node)
    ):
        raise ValueError("a field is a name in braces, {name}, or whole-number arithmetic of names, {name + 1}")
    return node


def _value(node: ast.expr, values: Mapping[str, Any]) -> Any:
    match node:
        case ast.Name(id=name):
            return values[name]
        case ast.Constant(value=number):
            return number
        case ast.UnaryOp(operand=operand):  # the one unary operator allowed: minus
            return -_value(operand, values)
        case ast.BinOp(left=left, op=op, right=right):
            return _OPERATORS[type(op)](_value(left, values), _value(right, values))
    raise ValueError(f"not a field: {ast.unparse(node)}")


class _Filled(Formatter):
    """``str.format`` whose fields are :func:`field_expression`s of the values."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, str]:
        return _value(field_expression(field_name), kwargs), field_name


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
