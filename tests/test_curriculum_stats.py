"""Question length and 2-gram lexical diversity (hand-computed)."""

from __future__ import annotations

import pytest

from diagevo.curriculum.stats import question_stats


def test_hand_computed() -> None:
    s = question_stats(["a b a b", "a b c", None, "  "])
    assert s["n"] == 2 and s["invalid"] == 2
    assert s["mean_words"] == 3.5
    # pairs: (a,b) (b,a) (a,b) | (a,b) (b,c) -> 5 pairs, 3 distinct; none spans two questions
    assert s["bigrams"] == 5
    assert s["distinct_2"] == pytest.approx(3 / 5)


def test_repetition_lowers_diversity() -> None:
    q = "find the least positive integer n"
    assert question_stats([q])["distinct_2"] == 1.0
    assert question_stats([q, q])["distinct_2"] == 0.5


def test_case_is_ignored_and_one_word_questions() -> None:
    # (the, cat) twice, one of them capitalised: one distinct pair of two
    assert question_stats(["The cat", "the CAT"])["distinct_2"] == 0.5
    s = question_stats(["x", "y"])
    assert s["mean_words"] == 1.0 and s["bigrams"] == 0 and s["distinct_2"] == 0.0


def test_empty() -> None:
    assert question_stats([]) == {"n": 0.0, "invalid": 0.0, "mean_words": 0.0, "bigrams": 0.0, "distinct_2": 0.0}
