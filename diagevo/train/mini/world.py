"""The mini world: short answer-only arithmetic a 0.8M-parameter character-level model can learn.

Questions are ``47+38=``, ``83-47=``, ``7*38=`` and ``83%7=``; the solver answers ``\\boxed{85}``
alone (no worked chain: a tiny model cannot write one). Skills, the warm-up mix that makes some
of them weak on purpose, and the named errors are data (``world.json``); this module holds the
rules that read them: which skill a question exercises (from its own digits), the fixed split of
every skill's questions into warm-up, validation and held-out ones, and how a failed answer is named.

Naming a failure reads the question and the failed answer against the pseudo-label, as a person
marking the work would (a units sum of ten or more with an answer ten short is a dropped carry);
it never reads which skill the question was generated for.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple

from diagevo.curriculum.answers import extract_answer
from diagevo.train.backend import Truth

_QUESTION = re.compile(r"^(\d{1,2})([-+*%])(\d{1,2})=$")
_DATA = Path(__file__).with_name("world.json")


@dataclass(frozen=True)
class WorldCause:
    """A named error: its rule key, the skill whose questions it shows on, its 10-20 word text."""

    key: str
    skill: str
    text: str


@dataclass(frozen=True)
class World:
    """The world's data: skill -> (family, warm-up weight), family -> node label, the causes."""

    skills: dict[str, tuple[str, float]]
    shared_offsets: dict[str, int]  # skill -> the offset of its systematic error's answer from the true one
    labels: dict[str, str]
    causes: dict[str, WorldCause]
    no_answer: WorldCause
    no_answer_label: str

    def label_of(self, cause: WorldCause) -> str:
        return self.no_answer_label if cause is self.no_answer else self.labels[self.skills[cause.skill][0]]


@cache
def world(path: Path = _DATA) -> World:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return World(
        skills={k: (v["family"], float(v["mix"])) for k, v in raw["skills"].items()},
        shared_offsets={k: int(v["shared_error"]["offset"]) for k, v in raw["skills"].items() if "shared_error" in v},
        labels=dict(raw["families"]),
        causes={k: WorldCause(k, v["skill"], v["text"]) for k, v in raw["causes"].items()},
        no_answer=WorldCause("no_answer", "", raw["no_answer"]["text"]),
        no_answer_label=raw["no_answer"]["label"],
    )


def parse(question: str) -> tuple[int, str, int] | None:
    """(a, operator, b) of a well-formed question of this world, else None."""
    m = _QUESTION.match(question.strip())
    return (int(m[1]), m[2], int(m[3])) if m else None


def skill_of(question: str) -> str | None:
    """The skill a question exercises, read from its digits; None for anything else."""
    p = parse(question)
    if p is None:
        return None
    a, op, b = p
    if op == "+":
        if a % 10 + b % 10 >= 10:
            return "add_c"
        return "add_nc" if a + b < 100 else None  # a carry into the hundreds only: no skill of the world
    if op == "-":
        if a <= b:
            return None
        return "sub_b" if a % 10 < b % 10 else "sub_nb"
    if op == "*":
        return "mul" if 2 <= a <= 9 and 10 <= b <= 99 else None
    return "mod" if 10 <= a <= 99 and 2 <= b <= 9 else None


@cache
def pool(skill: str) -> tuple[str, ...]:
    """Every question of a skill (two-digit operands; a one-digit factor or divisor), sorted."""
    if skill == "mul":
        pairs = [(a, "*", b) for a in range(2, 10) for b in range(10, 100)]
    elif skill == "mod":
        pairs = [(a, "%", b) for a in range(10, 100) for b in range(2, 10)]
    else:
        op = "+" if skill.startswith("add") else "-"
        pairs = [(a, op, b) for a in range(10, 100) for b in range(10, 100)]
    if skill == "add_nc":  # no carry anywhere: the sum stays below 100
        pairs = [p for p in pairs if p[0] + p[2] < 100]
    qs = sorted(f"{a}{op}{b}=" for a, op, b in pairs)
    return tuple(q for q in qs if skill_of(q) == skill)


class Split(NamedTuple):
    """A skill's questions in three disjoint parts: warm-up (trained on), validation (what the
    warm-up mix is chosen by) and held-out (what the loop is measured on, never chosen by)."""

    warmup: list[str]
    validation: list[str]
    heldout: list[str]


def split(skill: str, heldout: int, seed: int, validation: int = 0) -> Split:
    """One shuffle of a skill's pool, cut into held-out, validation and warm-up questions, so no
    two parts share a question; the held-out part does not depend on the validation size."""
    qs = list(pool(skill))
    random.Random(f"{seed}/{skill}").shuffle(qs)
    cut = heldout + validation
    return Split(qs[cut:], qs[heldout:cut], qs[:heldout])


def answer(q: str) -> str:
    p = parse(q)
    if p is None:
        raise ValueError(f"not a question of the mini world: {q!r}")
    a, op, b = p
    return str({"+": a + b, "-": a - b, "*": a * b, "%": a % b if b else 0}[op])


def variants(question: str, count: int, rng: random.Random) -> list[str]:
    """Up to ``count`` distinct rewordings of a question with its answer, drawn uniformly from the
    world's answer-preserving rewrites: a sum's operands shifted in opposite directions, a
    difference's in the same one, a remainder's dividend by a multiple of the divisor (operands
    kept two-digit). None for a product (no rewrite of it stays a question of the world) or a
    text that is no question. What the shared-error check asks (``filter.shared_error_check``),
    as a challenger would reword a question; the draw never looks at which skill is weak, so a
    shift adds a carry as often as it removes one."""
    p = parse(question)
    if p is None:
        return []
    a, op, b = p
    two_digit = range(10, 100)
    if op == "+":
        pairs = [(a + k, b - k) for k in range(-89, 90) if k and a + k in two_digit and b - k in two_digit]
    elif op == "-":
        pairs = [(a + k, b + k) for k in range(-89, 90) if k and a + k in two_digit and b + k in two_digit]
    elif op == "%" and b > 1:
        pairs = [(a + b * j, b) for j in range(-49, 50) if j and a + b * j in two_digit]
    else:
        return []
    return [f"{x}{op}{y}=" for x, y in rng.sample(pairs, min(count, len(pairs)))]


def _integer(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def name_failure(q: str, response: str, pseudo_label: str) -> WorldCause | None:
    """The named error of a failed answer against the pseudo-label; None when the question is
    not one of this world's or the answer agrees (a slip the rules cannot name)."""
    w = world()
    got = extract_answer(response)
    if got is None:
        return w.no_answer
    p, skill, have, want = parse(q), skill_of(q), _integer(got), _integer(pseudo_label)
    if p is None or skill is None or want is None or have == want:
        return None
    a, _, b = p
    d = None if have is None else have - want
    c = w.causes
    rules = {
        "add_c": c["carry_dropped"] if d == -10 else c["sum_slip_carry"],
        "add_nc": c["carry_invented"] if d == 10 else c["sum_slip"],
        "sub_b": c["borrow_forgotten"] if d == 10 else c["difference_slip_borrow"],
        "sub_nb": c["borrow_invented"] if d == -10 else c["difference_slip"],
        "mul": (
            c["times_table_off_one_row"]
            if d is not None and abs(d) in (a, b)
            else c["product_tens_slip"]
            if d in (-20, -10, 10, 20)
            else c["product_slip"]
        ),
        "mod": (
            c["quotient_for_remainder"]
            if have == a // b
            else c["remainder_off_by_one"]
            if d in (-1, 1)
            else c["remainder_slip"]
        ),
    }
    return rules[skill]


def truth(question: str) -> Truth | None:
    """A question's true answer and skill (None: a sum, difference, product or remainder outside
    the world's skills, whose answer is still known), and the wrong answer of its skill's
    systematic error where ``world.json`` names one; None for a text that is no such question."""
    p = parse(question)
    if p is None or (p[1] == "%" and p[2] == 0):
        return None
    right, skill = answer(question), skill_of(question)
    offset = world().shared_offsets.get(skill) if skill else None
    return Truth(right, skill, None if offset is None else str(int(right) + offset))


class MiniErrors:
    """The world's named errors as the heuristic diagnostician reads them
    (:class:`diagevo.diagnosis.heuristic.NamedErrors`)."""

    def rules(self) -> dict[str, tuple[str, str]]:
        wd = world()
        return {c.key: (c.text, wd.label_of(c)) for c in [*wd.causes.values(), wd.no_answer]}

    def name(self, question: str, response: str, pseudo_label: str) -> str | None:
        cause = name_failure(question, response, pseudo_label)
        return cause.key if cause else None
