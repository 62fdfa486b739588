"""Per-round measures of generated questions (Figure 4, Appendix): length, lexical diversity and,
where the world knows the specs, coverage of the skill space.

Pure functions over texts and variant keys; the ablation applies them to each round's logged
questions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


def mean_words(texts: Sequence[str]) -> float:
    """Average question length in words (Figure 4a)."""
    return sum(len(t.split()) for t in texts) / len(texts) if texts else 0.0


def bigram_diversity(texts: Sequence[str]) -> float:
    """Pooled 2-gram diversity (Figure 4b): distinct adjacent word pairs over all adjacent word
    pairs of the round's questions, in percent."""
    pairs: list[tuple[str, str]] = []
    for t in texts:
        words = t.lower().split()
        pairs.extend(zip(words, words[1:], strict=False))
    return 100.0 * len(set(pairs)) / len(pairs) if pairs else 0.0


def skill_coverage(variants: Sequence[str], n_variants: int) -> float:
    """Normalised entropy of the sub-skills the questions exercise (every part of a chained or
    stitched question counts): 1 when all ``n_variants`` are exercised equally, 0 when one is."""
    counts = Counter(variants)
    total = sum(counts.values())
    if total == 0 or n_variants < 2:
        return 0.0
    h = -sum(c / total * math.log(c / total) for c in counts.values())
    return h / math.log(n_variants)


def share_covered(variants: Sequence[str], n_variants: int) -> float:
    """Fraction of the sub-skills exercised by at least one question."""
    return len(set(variants)) / n_variants if n_variants else 0.0
