"""Surface text for the simulator world: number formatting, names, padding and distractors.

Padding (story sentences that change nothing) and distractors (sentences with irrelevant numbers)
are the challenger's cheap levers on length; their words are data, in ``words.toml``.
"""

from __future__ import annotations

import random
import re
import tomllib
from fractions import Fraction
from importlib import resources

_WORDS = tomllib.loads(resources.files("diagevo.train.sim").joinpath("words.toml").read_text(encoding="utf-8"))
NAMES: tuple[str, ...] = tuple(_WORDS["names"])
PLACES: tuple[str, ...] = tuple(_WORDS["places"])
OBJECTS: tuple[str, ...] = tuple(_WORDS["objects"])
_PADDING: tuple[str, ...] = tuple(_WORDS["padding"])
_DISTRACTORS: tuple[str, ...] = tuple(_WORDS["distractors"])
_COMPOSITE: tuple[str, ...] = tuple(_WORDS["pairs"])
_CHAIN: tuple[str, ...] = tuple(_WORDS["chains"])


def fmt_num(x: Fraction | int) -> str:
    """Plain text for a number: ``7``, ``-3``, ``5/4``."""
    x = Fraction(x)
    if x.denominator == 1:
        return str(x.numerator)
    return f"{x.numerator}/{x.denominator}"


def boxed(x: Fraction | int) -> str:
    """LaTeX box content for a final answer (``\\frac{p}{q}`` for non-integers)."""
    x = Fraction(x)
    if x.denominator == 1:
        return f"\\boxed{{{x.numerator}}}"
    sign = "-" if x < 0 else ""
    return f"\\boxed{{{sign}\\frac{{{abs(x.numerator)}}}{{{x.denominator}}}}}"


def lin(var: str, c: int) -> str:
    """``x + 5``, ``x - 3`` or ``x``."""
    if c == 0:
        return var
    return f"{var} + {c}" if c > 0 else f"{var} - {-c}"


def quad(b: int, c: int) -> str:
    """``x^2 - 5x + 6`` (leading coefficient one)."""
    s = "x^2"
    if b:
        coef = "" if abs(b) == 1 else str(abs(b))
        s += f" + {coef}x" if b > 0 else f" - {coef}x"
    if c:
        s += f" + {c}" if c > 0 else f" - {-c}"
    return s


def _fill(template: str, rng: random.Random, n: int | None = None) -> str:
    """``template`` with a place, a name and objects drawn, and ``n`` (drawn last if not given)."""
    place = rng.choice(PLACES)
    return template.format(
        name=rng.choice(NAMES),
        place=place,
        place_cap=place[0].upper() + place[1:],
        objects=rng.choice(OBJECTS),
        n=rng.randint(3, 97) if n is None else n,
    )


def padding(level: int, rng: random.Random) -> list[str]:
    """``level`` groups of story sentences (about 25 words a level)."""
    picks = rng.sample(range(len(_PADDING)), min(len(_PADDING), 2 * level))
    return [_fill(_PADDING[i], rng) for i in picks]


def distractors(count: int, rng: random.Random) -> list[tuple[str, int]]:
    """``count`` sentences each carrying an irrelevant number; returns (sentence, number)."""
    out = []
    for i in rng.sample(range(len(_DISTRACTORS)), min(count, len(_DISTRACTORS))):
        n = rng.randint(3, 97)
        out.append((_fill(_DISTRACTORS[i], rng, n), n))
    return out


def composite(texts: list[str], combo: str, rng: random.Random) -> str:
    """One question whose answer combines the answers of ``texts`` (two parts: the stitched form
    of Prompt 2; more: a chained question the free challenger composes)."""
    if len(texts) == 2:
        return rng.choice(_COMPOSITE).format(a=texts[0], b=texts[1], combo=combo)
    parts = " ".join(f"Let {chr(65 + i)} be the answer to this: {t}" for i, t in enumerate(texts))
    return rng.choice(_CHAIN).format(n=len(texts), parts=parts, combo=combo)


_NUM = re.compile(r"[-+]?\s?\d+(?:[./]\d+)?")
_WS = re.compile(r"\s+")


def signature(step: str) -> str:
    """A step with its numbers (and their signs) replaced by ``#``: two steps with the same
    signature differ only numerically."""
    return _WS.sub(" ", _NUM.sub(" # ", step)).strip()


def normalize_question(text: str) -> str:
    """Registry key of a question text: without ``<question>`` tags, whitespace collapsed."""
    t = text.strip()
    if t.startswith("<question>"):
        t = t[len("<question>") :]
    end = t.rfind("</question>")
    if end >= 0:
        t = t[:end]
    return _WS.sub(" ", t).strip()
