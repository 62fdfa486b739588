"""How often a round's pseudo-labels are right, where the world knows the truth.

The method rewards the solver for agreeing with the majority vote of its own construction
responses (Sec. 2.2). That helps only while the majority is mostly right: on a weak skill the
vote can be wrong on most retained questions, and the solver is then paid for its errors. Where
the world knows each question's answer (the simulator, the mini world:
:meth:`diagevo.train.backend.Backend.truth`), each round measures it on the questions the solver
trains on: the share of retained questions whose pseudo-label is the true answer, and the share
of the solver's positive rewards given to wrong answers, overall and per skill. They land in the
round's commit (``round.committed``), so ``memory stats``, the round table and the report show
from the first round whether the loop trains on its own errors.

The paper's own figure of label quality is another: Figure 3(c), the *pseudo-label accuracy on
shared questions* (``pseudo_label_acc``). A fixed set of challenger questions, the same for every
arm and round, is answered by the solver after each round's training; the majority of
:data:`SHARED_LABEL_VOTES` responses is compared with the true answer. Unlike the retained figure it
does not move with what the filter keeps, so arms that keep different questions compare on one set.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.equivalence import agrees
from diagevo.curriculum.prompts import parse_question
from diagevo.curriculum.votes import votes
from diagevo.text.calls import validated
from diagevo.train.backend import Truth

OUTSIDE = "outside"  # the skill of a question whose answer the world knows but that none of its skills asks


@dataclass
class _Tally:
    right: int = 0
    total: int = 0

    def add(self, ok: bool) -> None:
        self.right += ok
        self.total += 1

    def share(self) -> float | None:
        return self.right / self.total if self.total else None


@dataclass
class LabelAudit:
    """The round's label figures: retained questions with a right pseudo-label, and positive
    rewards on wrong answers, overall and by skill (each counted where the truth is known)."""

    labels: dict[str, _Tally] = field(default_factory=lambda: defaultdict(_Tally))
    positives: dict[str, _Tally] = field(default_factory=lambda: defaultdict(_Tally))  # right: wrong answers paid

    def summary(self) -> dict[str, float | dict[str, float]]:
        """The fields of ``round.committed`` these figures fill (none where the truth was never known)."""
        out: dict[str, float | dict[str, float]] = {}
        for name, tallies in (("retained_label_acc", self.labels), ("wrong_reward_share", self.positives)):
            total = _Tally(sum(t.right for t in tallies.values()), sum(t.total for t in tallies.values()))
            if total.total:
                out[name] = total.right / total.total
                out[f"{name}_by_skill"] = {s: v for s, t in sorted(tallies.items()) if (v := t.share()) is not None}
        return out


@validated
def audit_labels(
    questions: Sequence[str],
    labels: Sequence[str | None],
    responses: Sequence[Sequence[str]],
    rewards: Sequence[Sequence[float]],
    truth: Callable[[str], Truth | None],
) -> LabelAudit:
    """The label figures of a solver phase: each retained question's pseudo-label against its
    true answer, and each positively rewarded response's answer against it."""
    out = LabelAudit()
    for text, label, resps, rews in zip(questions, labels, responses, rewards, strict=True):
        known = truth(text)
        if known is None:
            continue
        skill = known.skill or OUTSIDE
        out.labels[skill].add(label is not None and agrees(label, known.answer))
        for resp, rew in zip(resps, rews, strict=True):
            if rew > 0:
                out.positives[skill].add(not agrees(extract_answer(resp), known.answer))
    return out


LABEL_FIELDS = (
    "retained_label_acc",
    "retained_label_acc_by_skill",
    "wrong_reward_share",
    "wrong_reward_share_by_skill",
)
"""The fields of ``round.committed`` (and of the solver phase's figures, until the commit) these are."""


SHARED_LABEL_VOTES = 12
"""Figure 3(c): each shared question's pseudo-label is the majority over 12 responses, as many as
the paper's curriculum construction samples."""


def draw_shared_questions(
    outputs: Callable[[random.Random], Sequence[str]],
    known: Callable[[str], bool],
    n: int,
    seed: int,
    tries: int = 8,
) -> list[str]:
    """Figure 3(c)'s shared set: the first ``n`` distinct questions the challenger writes that the
    world can grade (``known``), taken from batches of raw challenger ``outputs`` (at most ``tries``
    batches). The stream is seeded by the run's seed alone, so every arm of one seed, and every
    round of it, is measured on the same questions; a resumed run draws them again identically."""
    rng = random.Random(f"shared-labels:{seed}")
    picked: dict[str, None] = {}
    for _ in range(tries):
        for out in outputs(rng):
            text = parse_question(out)
            if text is not None and text not in picked and known(text):
                picked[text] = None
                if len(picked) == n:
                    return list(picked)
    return list(picked)


def shared_label_accuracy(
    questions: Sequence[str], responses: Sequence[Sequence[str]], truth: Callable[[str], Truth | None]
) -> dict[str, float]:
    """``pseudo_label_acc`` (Figure 3(c)): the share of shared questions whose majority answer (the
    votes the curriculum forms its pseudo-labels with) is the true answer, and
    ``pseudo_label_acc/SKILL`` per skill. Questions whose truth is unknown are left out; none
    known: no figure (absent, not zero)."""
    tallies: dict[str, _Tally] = defaultdict(_Tally)
    for text, resps in zip(questions, responses, strict=True):
        known = truth(text)
        if known is None:
            continue
        label = votes([extract_answer(r) for r in resps]).label
        tallies[known.skill or OUTSIDE].add(label is not None and agrees(label, known.answer))
    right, total = sum(t.right for t in tallies.values()), sum(t.total for t in tallies.values())
    if not total:
        return {}
    return {
        "pseudo_label_acc": right / total,
        **{f"pseudo_label_acc/{s}": v for s, t in sorted(tallies.items()) if (v := t.share()) is not None},
    }


@validated
def probe_label_accuracy(answers: Mapping[str, str], responses: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Figure 3(c) for a trainer of its own, on a labelled probe (question -> answer): the share of
    the probe's questions whose majority of ``responses`` (question -> the solver's responses, 12
    in the paper) is its answer, as ``{"pseudo_label_acc": ...}`` for :meth:`Round.commit`; empty
    when no question of the probe was answered."""
    asked = [q for q in answers if q in responses]
    return shared_label_accuracy(asked, [responses[q] for q in asked], lambda q: Truth(answers[q]))


def in_wrong_share(seed: int, question: str, share: float) -> bool:
    """Whether the label-accuracy control (``solver.wrong_label_share``) pays a wrong answer on
    this question: a draw of the seed and the question's text alone, so the same question is in
    or out in every round, order and resume."""
    return share > 0 and random.Random(f"wrong-label:{seed}:{question}").random() < share


def wrong_label(known: Truth, responses: Sequence[str]) -> str:
    """The control's wrong label, of the kind votes make: the world's shared error of the
    question's skill where it names one (a dropped carry), else the most common wrong answer of
    ``responses`` (the first given on ties), else the true answer (no wrong answer to pay)."""
    if known.shared_error is not None:
        return known.shared_error
    wrong = [a for r in responses if (a := extract_answer(r)) is not None and not agrees(a, known.answer)]
    return max(wrong, key=wrong.count) if wrong else known.answer
