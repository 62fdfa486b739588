"""Beyond the paper: a check for shared errors (``filter.shared_error_check = "variants"``).

The double-confidence filter (Eq. 3) measures agreement among one question's responses, so an
error every sample shares gets strong agreement and passes (the paper's limits section leaves
"other verification signals produced during self-play" to future work). This check asks the
solver the same question in other words: *variants* whose answer is the question's, written by
the trainer (the challenger rewording it; in the mini world, the world's answer-preserving
rewrite). The pseudo-label becomes the answer most stable across the wordings: the answer class
of the construction votes whose vote shares, on the original and on every variant, have the
highest harmonic mean (Self-Harmony's criterion). An error tied to one wording rarely wins under
another, so it loses to the answer every wording supports; where no answer is given under every
wording (every harmonic mean is 0) the question is doubted and not retained. Ties go to the
earlier class, so with variants that agree the label is the plain majority.

It never reads a true answer, and it changes only the label (and with it the reference and the
solver's reward): p1 and p2, the filter's band and the promotions' evidence stay the original
votes'.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from diagevo.curriculum.equivalence import VOTES_CPU_S, EquivalenceChecker, agrees, default_checker
from diagevo.curriculum.votes import AnswerClass, Votes, votes


@dataclass(frozen=True, slots=True)
class Harmony:
    """The check's verdict on one question: the class it labels with (None: doubted, no answer
    stands under every wording), that class's harmonic mean of shares, and each variant's own
    majority answer (what the log keeps of the variants)."""

    chosen: AnswerClass | None
    score: float
    variant_labels: tuple[str | None, ...]

    @property
    def label(self) -> str | None:
        return self.chosen.answer if self.chosen is not None else None


def share_of(answer: str, variant: Votes, checker: EquivalenceChecker | None = None) -> float:
    """The share of a rewording's responses in the class whose answer agrees with ``answer`` (no
    answer counts against): one check per class leader, as the votes group answers."""
    chk = checker or default_checker()
    home = next((c for c in variant.classes if agrees(c.answer, answer, chk)), None)
    return home.size / variant.n if home is not None and variant.n else 0.0


def harmonize(original: Votes, variants: Sequence[Sequence[str | None]], cpu_s: float = VOTES_CPU_S) -> Harmony:
    """The label the wordings agree on: of the original's answer classes, the one whose shares on
    the original (``size / n``) and on each variant have the highest harmonic mean. Each variant is
    voted on as the original was (its own budget), and the matching of its classes to the
    original's shares ``cpu_s`` more: a hostile answer costs the question no more than its votes."""
    voted = [votes(list(v), cpu_s=cpu_s) for v in variants]
    chk = default_checker()
    best: AnswerClass | None = None
    best_score = 0.0
    with chk.budget(cpu_s):
        for cls in original.classes:
            shares = [cls.size / original.n, *(share_of(cls.answer, v, chk) for v in voted)]
            score = statistics.harmonic_mean(shares) if all(shares) else 0.0
            if score > best_score:  # strictly: a tie keeps the earlier (larger) class
                best, best_score = cls, score
    return Harmony(best, best_score, tuple(v.label for v in voted))
