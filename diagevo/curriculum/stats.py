"""Question statistics of the analysis figures (Appendix H, after R-Few; Figure 4): the one
statement of a question's length in words and of 2-gram lexical diversity, for the report and the
simulator's per-round measures alike."""

from __future__ import annotations

from collections.abc import Sequence


def mean_words(texts: Sequence[str]) -> float:
    """Average question length in words (Figure 4a); 0 for no question."""
    return sum(len(t.split()) for t in texts) / len(texts) if texts else 0.0


def distinct_2(texts: Sequence[str]) -> float:
    """Pooled 2-gram diversity (Figure 4b): the share of distinct adjacent word pairs (words
    compared without case) among all the questions' adjacent pairs, none spanning two questions,
    so repeating a question lowers it; 0 with no pair."""
    pairs: list[tuple[str, str]] = []
    for t in texts:
        words = t.lower().split()
        pairs.extend(zip(words, words[1:], strict=False))
    return len(set(pairs)) / len(pairs) if pairs else 0.0


def question_stats(questions: Sequence[str | None]) -> dict[str, float]:
    """Mean length in words and 2-gram diversity of a set of questions; blank or None questions
    count in ``invalid`` and in neither figure."""
    valid = [q for q in questions if q is not None and q.strip()]
    return {
        "n": float(len(valid)),
        "invalid": float(len(questions) - len(valid)),
        "mean_words": mean_words(valid),
        "bigrams": float(sum(max(len(q.split()) - 1, 0) for q in valid)),
        "distinct_2": distinct_2(valid),
    }
