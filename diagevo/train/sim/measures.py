"""Per-round measures of generated questions (Figure 4, Appendix): length, lexical diversity and,
where the world knows the specs, coverage of the skill space.

Pure functions over texts and variant keys; the ablation applies them to each round's logged
questions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from diagevo.curriculum.stats import distinct_2


def bigram_diversity(texts: Sequence[str]) -> float:
    """Pooled 2-gram diversity (Figure 4b) in percent, as the simulator's tables print it."""
    return 100.0 * distinct_2(texts)


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
