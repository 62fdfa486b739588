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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.equivalence import agrees
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
