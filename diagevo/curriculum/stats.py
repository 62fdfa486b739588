"""Question statistics of the analysis figures (Appendix H, after R-Few)."""

from __future__ import annotations

from collections.abc import Sequence


def question_stats(questions: Sequence[str | None]) -> dict[str, float]:
    """Mean length in words and 2-gram lexical diversity of a set of questions. ``distinct_2``
    pools the adjacent word pairs of all questions (none spans two) and is the share of them that
    are distinct, so repeating a question lowers it; blank or None questions count in ``invalid``."""
    words = [q.split() for q in questions if q is not None and q.strip()]
    n = len(words)
    bigrams = [(w[i], w[i + 1]) for w in words for i in range(len(w) - 1)]
    return {
        "n": float(n),
        "invalid": float(len(questions) - n),
        "mean_words": sum(len(w) for w in words) / n if n else 0.0,
        "bigrams": float(len(bigrams)),
        "distinct_2": len(set(bigrams)) / len(bigrams) if bigrams else 0.0,
    }
