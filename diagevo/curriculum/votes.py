"""Majority voting over the N construction responses of one question (Sec. 2.2).

A response belongs to the label's class exactly when :func:`~diagevo.curriculum.equivalence.agrees`
says its answer agrees with the label, the call that decides the solver's reward and the
reference trajectory, so a response counted in p1 is never punished by the reward.

Answers with the same key or the same plain rational value are one answer. The others are taken
in order of first occurrence; each joins the earliest class whose leader (its first answer, the
gold side) it agrees with, else starts a class. Classes are ordered by size, then by their
earliest response. The label is the first class's leader; an answer in a later class that also
agrees with the label then moves to the label's class (math-verify can accept an answer against
two leaders that reject each other). The reference trajectory is the label class's earliest
response.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from diagevo.curriculum.answers import answer_key, normalize_answer, simple_number
from diagevo.curriculum.equivalence import VOTES_CPU_S, EquivalenceChecker, agrees, default_checker


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


def _distinct_answers(answers: Sequence[str | None]) -> tuple[list[list[int]], list[Fraction | None]]:
    """The distinct answers ("keys") in order of first occurrence: the responses giving each,
    and its rational value where it is a plain number (keys with the same value are one answer)."""
    slot: dict[str, int] = {}
    by_value: dict[Fraction, int] = {}
    members: list[list[int]] = []
    values: list[Fraction | None] = []
    for i, a in enumerate(answers):
        if not _present(a):
            continue
        assert a is not None
        k = answer_key(a)
        if k not in slot:
            v = simple_number(k)
            if v is not None and v in by_value:
                slot[k] = by_value[v]
            else:
                slot[k] = len(members)
                members.append([])
                values.append(v)
                if v is not None:
                    by_value[v] = slot[k]
        members[slot[k]].append(i)
    return members, values


class _Agreement:
    """Whether distinct answer ``j`` agrees with answer ``leader`` taken as the label: each pair
    asked of the checker once, and no more than ``max_checks`` pairs in all (the rest are
    skipped, counted, and stay apart)."""

    def __init__(
        self, values: list[Fraction | None], texts: list[str], checker: EquivalenceChecker, max_checks: int
    ) -> None:
        self.values, self.texts, self.checker, self.max_checks = values, texts, checker, max_checks
        self.asked = 0
        self.decided: dict[tuple[int, int], bool] = {}

    def __call__(self, j: int, leader: int) -> bool:
        if self.values[j] is not None and self.values[leader] is not None:
            return False  # two different rational values (equal ones share a slot)
        if (j, leader) not in self.decided:
            if self.asked >= self.max_checks:
                self.checker.stats.skipped += 1
                self.decided[j, leader] = False
            else:
                self.asked += 1
                self.decided[j, leader] = agrees(self.texts[j], self.texts[leader], self.checker)
        return self.decided[j, leader]


def votes(
    answers: Sequence[str | None],
    checker: EquivalenceChecker | None = None,
    max_checks: int = 256,
    cpu_s: float = VOTES_CPU_S,
) -> Votes:
    """Group answers, compute p1/p2 and the pseudo-label. After ``max_checks`` symbolic checks the
    rest are skipped (counted) and those answers stay apart: a budget counted in checks, not
    seconds, so the same answers give the same votes at any machine load. The checks also share
    ``cpu_s`` seconds of the worker's CPU (``out_of_budget`` past it): a question's hostile
    answers cost it at most that, however many pairs hold them."""
    chk = checker or default_checker()
    with chk.budget(cpu_s):
        return _votes(answers, chk, max_checks)


def _votes(answers: Sequence[str | None], checker: EquivalenceChecker, max_checks: int) -> Votes:
    n = len(answers)
    members, values = _distinct_answers(answers)
    texts = [normalize_answer(answers[m[0]] or "") for m in members]
    agree = _Agreement(values, texts, checker, max_checks)
    classes: list[list[int]] = []  # answer slots; the first is the leader
    for j in range(len(members)):
        home = next((c for c in classes if agree(j, c[0])), None)
        if home is None:
            classes.append([j])
        else:
            home.append(j)
    if n == 0 or not classes:
        return Votes(0.0, 0.0, None, (), n)

    def size(c: list[int]) -> int:
        return sum(len(members[j]) for j in c)

    classes.sort(key=lambda c: (-size(c), members[c[0]][0]))
    top, rest = classes[0], classes[1:]
    for c in rest:  # every answer agreeing with the label counts for it
        moved = [j for j in c[1:] if agree(j, top[0])] + ([c[0]] if agree(c[0], top[0]) else [])
        for j in moved:
            c.remove(j)
            top.append(j)
    rest = sorted((c for c in rest if c), key=lambda c: (-size(c), min(members[j][0] for j in c)))

    def answer_class(c: list[int]) -> AnswerClass:
        indices = tuple(sorted(i for j in c for i in members[j]))
        return AnswerClass(normalize_answer(answers[members[c[0]][0]] or ""), indices)

    out = (answer_class(top), *(answer_class(c) for c in rest))
    p1 = out[0].size / n
    p2 = out[1].size / n if len(out) > 1 else 0.0
    return Votes(p1, p2, out[0].answer, out, n)
