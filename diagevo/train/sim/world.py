"""Questions of the simulator world: specs, rendering, and the registry of texts seen so far.

A :class:`Spec` is what the challenger decides (the trap variants a question exercises -- one, or
two for a stitched question --, difficulty, padding, distractors, a seed);
rendering it is deterministic, so a checkpoint only stores specs. The registry maps every
question text the challenger wrote back to its spec, so ``sample()`` can answer texts the loop
hands back (possibly after a restart).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache, partial
from itertools import product

from diagevo.train.sim import text as tx
from diagevo.train.sim.families import Instance, Variant

MAX_DIFFICULTY = 3
MAX_PAD = 4
MAX_DISTRACT = 3
MAX_PARTS = 3  # a free question chains at most this many sub-problems (composition switch)
WRONG_VALUES = 3  # distinct wrong values a misapplied sub-skill can land on (sim.wrong_answer_spread)
_WRONG_OFFSETS = (1, -1, 2, -2, 3, 10, -10)


@dataclass(frozen=True, slots=True)
class Spec:
    skills: tuple[str, ...]  # variant keys ("family.variant"): one, two (stitched) or up to MAX_PARTS (chained)
    difficulty: int
    pad: int
    distract: int
    seed: int

    def to_list(self) -> list:
        return [list(self.skills), self.difficulty, self.pad, self.distract, self.seed]

    @classmethod
    def from_list(cls, data: list) -> Spec:
        skills, d, p, x, s = data
        return cls(tuple(skills), int(d), int(p), int(x), int(s))


@dataclass(frozen=True, slots=True)
class SimQuestion:
    """A rendered question with everything the solver and the evaluation need."""

    spec: Spec
    text: str  # normalised (registry key)
    words: int
    parts: tuple[Instance, ...]
    coef: tuple[int, ...]
    answer: Fraction
    misread: Fraction  # the shared systematic wrong answer of label noise (b)
    # solution text per outcome (which parts applied their skill correctly), without the final step
    paths: dict[tuple[bool, ...], tuple[str, ...]]
    values: dict[tuple[bool, ...], Fraction]
    # per part, the values a misapplied sub-skill lands on: its trap first, then near misses of
    # the same mechanism (an off-by-one count, a sign); which one is drawn depends on the sub-skill
    wrong: tuple[tuple[Fraction, ...], ...] = ()

    @property
    def trap(self) -> Fraction:
        """The answer when every needed skill is misapplied."""
        return self.values[tuple(False for _ in self.parts)]


def _combo_text(coef: tuple[int, ...]) -> str:
    return " + ".join(f"{'' if c == 1 else c}{chr(65 + i)}" for i, c in enumerate(coef))


def build(spec: Spec, variants: Mapping[str, Variant]) -> SimQuestion:
    rng = random.Random(spec.seed)
    parts = tuple(variants[k].make(rng, spec.difficulty) for k in spec.skills)
    if len(parts) == 1:
        coef: tuple[int, ...] = (1,)
        core = parts[0].text
    else:
        coef = tuple(rng.randint(1, 3) for _ in parts)
        core = tx.composite([p.text for p in parts], _combo_text(coef), rng)
    pad = tx.padding(spec.pad, rng)
    dis = tx.distractors(spec.distract, rng)
    extra = pad + [s for s, _ in dis]
    rng.shuffle(extra)
    body = " ".join([*extra, core])
    key = tx.normalize_question(body)

    paths: dict[tuple[bool, ...], tuple[str, ...]] = {}
    values: dict[tuple[bool, ...], Fraction] = {}
    for ok in product((True, False), repeat=len(parts)):
        steps: list[str] = []
        vals = []
        for part, good in zip(parts, ok, strict=True):
            steps.extend(part.lead)
            steps.extend(part.right if good else part.wrong)
            vals.append(part.answer if good else part.trap)
        value = sum((c * v for c, v in zip(coef, vals, strict=True)), Fraction(0))
        if len(parts) >= 2:
            letters = " + ".join(f"{c} \\cdot {chr(65 + i)}" for i, c in enumerate(coef))
            numbers = " + ".join(f"{c} \\cdot {tx.fmt_num(v)}" for c, v in zip(coef, vals, strict=True))
            steps.append(f"Combine the parts: {letters} = {numbers} = {tx.fmt_num(value)}.")
        paths[ok] = tuple(steps)
        values[ok] = value
    answer = values[tuple(True for _ in parts)]
    delta = (dis[0][1] % 5 + 1) if dis else rng.choice((1, -1, 2))
    misread = answer + delta
    if misread in values.values():
        misread += 1 if delta > 0 else -1
        if misread in values.values():
            misread = answer + 10 * delta + 7
    wrong = tuple(_wrong_values(p, spec.seed, j) for j, p in enumerate(parts))
    return SimQuestion(spec, key, len(key.split()), parts, coef, answer, misread, paths, values, wrong)


def _wrong_values(part: Instance, seed: int, j: int) -> tuple[Fraction, ...]:
    """The trap and ``WRONG_VALUES - 1`` near misses, distinct and never the part's answer (own
    random stream, so the question text is the same as without them)."""
    rng = random.Random(f"wrong:{seed}:{j}")
    offsets = list(_WRONG_OFFSETS)
    rng.shuffle(offsets)
    out = [Fraction(part.trap)]
    for d in offsets:
        v = out[0] + d
        if len(out) == WRONG_VALUES:
            break
        if v != part.answer and v not in out:
            out.append(v)
    return tuple(out)


def render_response(steps: tuple[str, ...], value: Fraction | int) -> str:
    """A numbered solution ending in the boxed final answer."""
    lines = [f"Step {i}: {s}" for i, s in enumerate(steps, 1)]
    lines.append(f"Step {len(steps) + 1}: Therefore, the final answer is {tx.boxed(value)}.")
    return "\n".join(lines)


class Registry:
    """Question text -> spec, plus a bounded cache of rendered questions."""

    def __init__(self, variants: Mapping[str, Variant]) -> None:
        self.specs: dict[str, Spec] = {}
        self.question: Callable[[Spec], SimQuestion] = lru_cache(maxsize=20_000)(partial(build, variants=variants))

    def register(self, spec: Spec) -> SimQuestion:
        q = self.question(spec)
        self.specs[q.text] = spec
        return q

    def lookup(self, text: str) -> SimQuestion | None:
        spec = self.specs.get(tx.normalize_question(text))
        return self.question(spec) if spec is not None else None
