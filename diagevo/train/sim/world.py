"""Questions of the simulator world: specs, rendering, and the registry of texts seen so far.

A :class:`Spec` is what the challenger decides (the trap variants a question exercises -- one, or
two for a stitched question --, difficulty, padding, distractors, a seed);
rendering it is deterministic, so a checkpoint only stores specs. The registry maps every
question text the challenger wrote back to its spec, so ``sample()`` can answer texts the loop
hands back (possibly after a restart).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass
from fractions import Fraction
from itertools import product

from diagevo.train.sim import text as tx
from diagevo.train.sim.families import Instance, Variant

MAX_DIFFICULTY = 3
MAX_PAD = 4
MAX_DISTRACT = 3


@dataclass(frozen=True, slots=True)
class Spec:
    skills: tuple[str, ...]  # one variant key ("family.variant"), or two for a stitched question
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
class Question:
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

    @property
    def trap(self) -> Fraction:
        """The answer when every needed skill is misapplied."""
        return self.values[tuple(False for _ in self.parts)]


def _combo_text(coef: tuple[int, ...]) -> str:
    a, b = coef
    return f"{'' if a == 1 else a}A + {'' if b == 1 else b}B"


def build(spec: Spec, variants: dict[str, Variant]) -> Question:
    rng = random.Random(spec.seed)
    parts = tuple(variants[k].make(rng, spec.difficulty) for k in spec.skills)
    if len(parts) == 1:
        coef: tuple[int, ...] = (1,)
        core = parts[0].text
    else:
        coef = (rng.randint(1, 3), rng.randint(1, 3))
        core = tx.composite(parts[0].text, parts[1].text, _combo_text(coef), rng)
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
        if len(parts) == 2:
            steps.append(
                f"Combine the parts: {coef[0]} \\cdot A + {coef[1]} \\cdot B = "
                f"{coef[0]} \\cdot {tx.fmt_num(vals[0])} + {coef[1]} \\cdot {tx.fmt_num(vals[1])} = {tx.fmt_num(value)}."
            )
        paths[ok] = tuple(steps)
        values[ok] = value
    answer = values[tuple(True for _ in parts)]
    delta = (dis[0][1] % 5 + 1) if dis else rng.choice((1, -1, 2))
    misread = answer + delta
    if misread in values.values():
        misread += 1 if delta > 0 else -1
        if misread in values.values():
            misread = answer + 10 * delta + 7
    return Question(spec, key, tx.word_count(key), parts, coef, answer, misread, paths, values)


def render_response(steps: tuple[str, ...], value: Fraction) -> str:
    """A numbered solution ending in the boxed final answer."""
    lines = [f"Step {i}: {s}" for i, s in enumerate(steps, 1)]
    lines.append(f"Step {len(steps) + 1}: Therefore, the final answer is {tx.boxed(value)}.")
    return "\n".join(lines)


class Registry:
    """Question text -> spec, plus a bounded cache of rendered questions."""

    def __init__(self, variants: dict[str, Variant], cache_size: int = 20_000) -> None:
        self._variants = variants
        self.specs: dict[str, Spec] = {}
        self._cache: OrderedDict[Spec, Question] = OrderedDict()
        self._cache_size = cache_size

    def question(self, spec: Spec) -> Question:
        q = self._cache.get(spec)
        if q is None:
            q = build(spec, self._variants)
            self._cache[spec] = q
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(spec)
        return q

    def register(self, spec: Spec) -> Question:
        q = self.question(spec)
        self.specs[q.text] = spec
        return q

    def lookup(self, text: str) -> Question | None:
        spec = self.specs.get(tx.normalize_question(text))
        return self.question(spec) if spec is not None else None
