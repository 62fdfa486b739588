"""Majority voting over the N construction responses of one question (Sec. 2.2).

Answers are grouped into equivalence classes: the union (transitive closure) of pairwise
equivalence, so ``1/2 ~ 0.5`` and ``0.5 ~ \\frac{1}{2}`` put all three in one class.

Tie-break, used everywhere: classes are ordered by size, larger first, then by the index of
their earliest response, earlier first. The label is the earliest answer string of the first
class, and the reference trajectory is that class's earliest response.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from diagevo.curriculum.answers import answer_key, normalize_answer, simple_number
from diagevo.curriculum.equivalence import EquivalenceChecker, default_checker


@dataclass(frozen=True, slots=True)
class AnswerClass:
    """Responses whose answers are equivalent; ``answer`` is the earliest one's answer."""

    answer: str
    indices: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.indices)


@dataclass(frozen=True, slots=True)
class Votes:
    """Vote shares over ``n`` responses, no-answer responses included in ``n``."""

    p1: float
    p2: float
    label: str | None
    classes: tuple[AnswerClass, ...]
    n: int

    @property
    def reference(self) -> int | None:
        """Index of the construction response kept as reference trajectory."""
        return self.classes[0].indices[0] if self.classes else None

    @property
    def answered(self) -> int:
        return sum(c.size for c in self.classes)


def _present(answer: str | None) -> bool:
    return answer is not None and answer.strip() != ""


def votes(
    answers: Sequence[str | None],
    checker: EquivalenceChecker | None = None,
    budget_s: float = 10.0,
) -> Votes:
    """Group answers, compute p1/p2 and the pseudo-label.

    Exact keys and plain rationals are grouped without math-verify; each remaining pair of
    classes is checked once (earlier class as the gold side). After ``budget_s`` seconds the
    remaining symbolic checks are skipped (counted) and those classes stay apart.
    """
    n = len(answers)
    keys: list[str] = []  # distinct keys, by first occurrence
    members: list[list[int]] = []
    slot: dict[str, int] = {}
    for i, a in enumerate(answers):
        if not _present(a):
            continue
        assert a is not None
        k = answer_key(a)
        if k not in slot:
            slot[k] = len(keys)
            keys.append(k)
            members.append([])
        members[slot[k]].append(i)

    parent = list(range(len(keys)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(x: int, y: int) -> None:
        rx, ry = find(x), find(y)
        if rx != ry:  # the earlier key stays the root, so roots are first occurrences
            parent[max(rx, ry)] = min(rx, ry)

    values: list[Fraction | None] = [simple_number(k) for k in keys]
    root_value: dict[int, Fraction] = {}
    first_with_value: dict[Fraction, int] = {}
    for i, v in enumerate(values):
        if v is not None:
            union(first_with_value.setdefault(v, i), i)
    for i, v in enumerate(values):
        if v is not None:
            root_value[find(i)] = v

    if len(keys) > 1 and any(v is None for v in values):
        chk = checker or default_checker()
        deadline = time.monotonic() + budget_s
        texts = [normalize_answer(answers[m[0]] or "") for m in members]
        for j in range(1, len(keys)):
            for i in range(j):
                ri, rj = find(i), find(j)
                if ri == rj or (ri in root_value and rj in root_value):
                    continue  # same class already, or two different rational values
                if time.monotonic() > deadline:
                    chk.stats.skipped += 1
                    continue
                if chk.symbolic_equal(texts[i], texts[j]):
                    value = root_value.pop(ri) if ri in root_value else root_value.pop(rj, None)
                    union(i, j)
                    if value is not None:
                        root_value[find(i)] = value

    groups: dict[int, list[int]] = {}
    for idx, m in enumerate(members):
        groups.setdefault(find(idx), []).extend(m)
    classes = sorted(
        (AnswerClass(normalize_answer(answers[min(g)] or ""), tuple(sorted(g))) for g in groups.values()),
        key=lambda c: (-c.size, c.indices[0]),
    )
    if n == 0 or not classes:
        return Votes(0.0, 0.0, None, (), n)
    p1 = classes[0].size / n
    p2 = classes[1].size / n if len(classes) > 1 else 0.0
    return Votes(p1, p2, classes[0].answer, tuple(classes), n)


def reference_index(
    answers: Sequence[str | None], label: str | None, checker: EquivalenceChecker | None = None
) -> int | None:
    """Earliest response whose answer agrees with ``label``; None when none does.

    For a label from :func:`votes` this is ``Votes.reference`` (the label class's earliest
    member); prefer that attribute, it costs nothing."""
    if label is None or not label.strip():
        return None
    chk = checker or default_checker()
    for i, a in enumerate(answers):
        if _present(a) and chk.equivalent(label, a or ""):
            return i
    return None
