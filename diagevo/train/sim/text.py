"""Surface text for the simulator world: number formatting, names, padding and distractors.

Padding (story sentences that change nothing) and distractors (sentences with irrelevant numbers)
are the challenger's cheap levers on length; their pools are large enough that padded questions
stay lexically varied, so the BLEU repetition penalty of the challenger reward (Eq. 10) sees real
differences rather than one boilerplate paragraph.
"""

from __future__ import annotations

import random
import re
from fractions import Fraction

NAMES = (
    "Ada",
    "Bela",
    "Chen",
    "Dario",
    "Esme",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kemal",
    "Lina",
    "Marta",
    "Nils",
    "Oren",
    "Priya",
    "Quinn",
    "Rosa",
    "Sami",
    "Tomas",
    "Uma",
    "Vera",
    "Wes",
    "Yara",
    "Zeno",
)
PLACES = (
    "a seaside town",
    "the school library",
    "a mountain cabin",
    "the night market",
    "a train station",
    "an old observatory",
    "the city museum",
    "a bakery",
    "a chess club",
    "a harbour office",
    "a greenhouse",
    "a robotics lab",
    "the village fair",
    "a quiet campsite",
)
OBJECTS = (
    "notebooks",
    "lanterns",
    "postcards",
    "marbles",
    "seashells",
    "tickets",
    "pencils",
    "apples",
    "stamps",
    "buttons",
    "candles",
    "keys",
    "ribbons",
    "tiles",
)

_PADDING = (
    "{name} found this puzzle in {place} while waiting for a friend.",
    "The puzzle was written on a card that {name} kept for several years.",
    "It was posted on the board at {place} as part of a weekly challenge.",
    "{name} insists that the problem is easier than it looks, but nobody believes it.",
    "Several visitors at {place} tried it during a long afternoon without agreeing on a result.",
    "The card had faded a little, yet every symbol on it was still perfectly legible.",
    "A teacher at {place} likes to use it as a warm-up before longer exercises.",
    "{name} copied it carefully into a notebook next to a sketch of {place}.",
    "People who solved it were allowed to ring a small brass bell hanging by the door.",
    "According to {name}, the trick is to read every condition slowly before writing anything.",
    "The organisers printed it in large letters so that the whole room could follow along.",
    "Rain kept everyone inside {place}, so the puzzle received more attention than usual.",
    "{name} and a cousin argued about it over dinner and decided to settle it on paper.",
    "Nobody remembers who first proposed the question, but it has circulated for a long time.",
    "The statement below is reproduced exactly as it appeared, with no words changed.",
    "It came with a note asking solvers to explain each step rather than guess.",
    "{name} later said that the question taught more patience than mathematics.",
    "Visitors to {place} often photograph the board where the question is displayed.",
    "A small prize, a jar of {objects}, was promised to the first correct solver.",
    "The question appeared between a crossword and a recipe in a local newsletter.",
    "Some readers wrote letters claiming two different answers, which only added to its fame.",
    "{name} recommends drawing a quick diagram, even though none is strictly needed.",
    "The wording is a little old-fashioned because it was translated from another language.",
    "Before starting, {name} sharpened a pencil and cleared the table of {objects}.",
    "It is said that the problem was a favourite of a retired engineer from {place}.",
    "The puzzle belongs to a collection that {name} has been assembling since childhood.",
)

_DISTRACTORS = (
    "The card also mentions that {name} owns {n} {objects}, which plays no role here.",
    "{place_cap} opened {n} years ago, a fact printed in the corner of the card.",
    "A second line notes that {n} people attempted the puzzle last spring.",
    "Next to the question someone scribbled the number {n} for reasons nobody recalls.",
    "The board at {place} has {n} pins holding various notices.",
    "{name} spent {n} minutes on an unrelated riddle before turning to this one.",
    "The newsletter issue containing the puzzle was number {n}.",
    "A shelf nearby holds {n} jars of {objects}, all of them labelled.",
    "{name} remembers that the room temperature was {n} degrees that day.",
    "There were {n} chairs in the room, although only a few were occupied.",
    "The prize jar contained exactly {n} {objects}.",
    "The puzzle was printed on page {n} of the booklet.",
)

_COMPOSITE = (
    "This problem has two parts that feed a single answer. First: {a} Call that value A. Second: {b} "
    "Call that value B. Compute {combo}.",
    "Let A be the answer to the following question. {a} Let B be the answer to the next one. {b} "
    "What is the value of {combo}?",
    "Two quantities are defined by separate questions. The value A: {a} The value B: {b} "
    "Report the single number {combo}.",
    "Work out A and B, then combine them. For A: {a} For B: {b} The final answer is {combo}; what is it?",
)


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


def _fill(template: str, rng: random.Random) -> str:
    place = rng.choice(PLACES)
    return template.format(
        name=rng.choice(NAMES),
        place=place,
        place_cap=place[0].upper() + place[1:],
        objects=rng.choice(OBJECTS),
        n=rng.randint(3, 97),
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
        place = rng.choice(PLACES)
        out.append(
            (
                _DISTRACTORS[i].format(
                    name=rng.choice(NAMES),
                    place=place,
                    place_cap=place[0].upper() + place[1:],
                    objects=rng.choice(OBJECTS),
                    n=n,
                ),
                n,
            )
        )
    return out


_CHAIN = (
    "This problem has {n} parts that feed a single answer. {parts} Compute {combo}.",
    "Several quantities are defined by separate questions. {parts} What is the value of {combo}?",
    "Work out each lettered value, then combine them. {parts} Report the single number {combo}.",
)


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


def word_count(text: str) -> int:
    return len(text.split())
