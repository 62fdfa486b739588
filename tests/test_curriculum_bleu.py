"""The vectorised BLEU equals sacrebleu's sentence BLEU for every pair."""

from __future__ import annotations

import math
import random
from unittest import mock

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from diagevo.curriculum import bleu as bleu_module
from diagevo.curriculum.bleu import bleu, pairwise_bleu, pairwise_bleu_distance


def reference_matrix(texts: list[str]) -> np.ndarray:
    return np.array([[sacrebleu.sentence_bleu(h, [r]).score / 100 for r in texts] for h in texts])


def assert_matches_sacrebleu(texts: list[str]) -> None:
    got = pairwise_bleu(texts)
    want = reference_matrix(texts)
    assert got.shape == (len(texts), len(texts))
    bad = np.argwhere(np.abs(got - want) > 1e-9)
    assert not len(bad), [(texts[i], texts[j], got[i, j], want[i, j]) for i, j in bad[:5]]


def test_hand_computed() -> None:
    # precisions 5/6, 3/5, 2/4, 1/3, equal lengths: (1/12)^(1/4)
    assert bleu("the cat sat on the mat", "the cat sat on a mat") == pytest.approx(12**-0.25, abs=1e-12)
    # 3/4, 1/3, then no 3- or 4-gram match: exp smoothing 1/(2*2), 1/(4*1) -> (1/64)^(1/4)
    assert bleu("a b c d", "a b x d") == pytest.approx(2**-1.5, abs=1e-12)
    # effective order 2 (two tokens), perfect precision, brevity penalty exp(1 - 3/2)
    assert bleu("a b", "a b c") == pytest.approx(math.exp(-0.5), abs=1e-12)
    # no unigram in common
    assert bleu("x y z", "a b c") == 0.0
    assert bleu("", "a") == bleu("a", "") == bleu("", "") == 0.0


def test_direction_matters_and_distance_averages() -> None:
    texts = ["a b", "a b c"]
    b = pairwise_bleu(texts)
    assert b[0, 1] == pytest.approx(math.exp(-0.5))  # hypothesis "a b" is short
    # 2/3 unigrams, 1/2 bigrams, 0/1 trigrams smoothed to 1/2; no brevity penalty
    assert b[1, 0] == pytest.approx((2 / 3 * 1 / 2 * 1 / 2) ** (1 / 3))
    d = pairwise_bleu_distance(texts)
    assert d[0, 1] == d[1, 0] == pytest.approx(1 - (b[0, 1] + b[1, 0]) / 2)
    assert d[0, 0] == d[1, 1] == 0.0


ADVERSARIAL = [
    "",
    " ",
    "\n",
    "a",
    "a a a a a a",
    "a a a",
    "a a b a a b",
    "The cat. The cat, the cat!",
    "x.",
    "x .",
    "3.5, 4,5 and 1-2 or x-y",
    "Let $f(x) = \\frac{x^2+1}{x-1}$ for all $x \\neq 1$.",
    "Let $f(x)=\\frac{x^2+1}{x-1}$ for all $x\\neq 1$.",
    "\\sum_{k=1}^{n} k^2 = \\frac{n(n+1)(2n+1)}{6}",
    "Trouvez l'entier n > 0 tel que n² ≡ 1 (mod 8) — «facile»",
    "求所有正整数 n，使得 n² + 1 整除 n!",
    "&quot;quoted&quot; &amp; <skipped> a-\nb",
    "tab\tseparated\u00a0nbsp and\u2003em space   ",
    "emoji 😀 😀 and combining é",
    "find find find find find find find find",
    "find the the the number",
]


def test_adversarial_pairs() -> None:
    assert_matches_sacrebleu(ADVERSARIAL)


def test_random_math_like_batch() -> None:
    rng = random.Random(7)
    vocab = "find the of a x y n integer prime sum $x^2$ \\frac{1}{2} = + - , . ( ) 1 2 3 10 such that all".split()
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 25))) for _ in range(80)]
    texts += [t.replace("x", "y", 1) for t in texts[:10]]  # near duplicates
    assert_matches_sacrebleu(texts)


OPENINGS = ["Find the smallest", "Compute the sum of all", "How many", "Determine the largest"]
SUBJECTS = ["integer n", "real number x", "triangle ABC", "polynomial P(x)", "set S"]
CLAUSES = ["is divisible by 7", "has exactly three real roots", "equals $2^k - 1$", "is tangent to the circle"]


def templated(rng: random.Random, n: int) -> list[str]:
    """Questions from a few templates, with exact and near duplicates, as a challenger repeats itself."""
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.3:
            out.append(rng.choice(out).replace(str(rng.randint(0, 9)), str(rng.randint(0, 9)), 1))
            continue
        parts = [f"{rng.choice(OPENINGS)} {rng.choice(SUBJECTS)} such that it {rng.choice(CLAUSES)}."]
        parts += [f"Suppose {rng.randint(1, 99)} < {rng.choice(SUBJECTS)}." for _ in range(rng.randint(0, 3))]
        out.append(" ".join(parts))
    return out


def test_templated_batch_with_many_shared_ngrams() -> None:
    # 96 texts: n-grams held by 3 or more texts go through the dense product, the rest as pairs
    texts = templated(random.Random(3), 96)
    assert_matches_sacrebleu(texts)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 200), st.integers(0, 2**32 - 1), st.integers(1, 200))
def test_property_dense_and_sparse_columns_agree(n: int, seed: int, share: int) -> None:
    """Where a column of X goes (dense product or pair list) changes no count."""
    texts = templated(random.Random(seed), n)
    ids, owner, lens = bleu_module._token_ids([bleu_module.tokenize(t) for t in texts])
    counts = bleu_module._match_counts(ids, owner, lens, n)
    with mock.patch.object(bleu_module, "DENSE_SHARE", share):
        split = bleu_module._match_counts(ids, owner, lens, n)
    with mock.patch.object(bleu_module, "DENSE_SHARE", 10**9):  # every shared column dense
        dense = bleu_module._match_counts(ids, owner, lens, n)
    for order in range(4):
        assert (split[order] == counts[order]).all() and (dense[order] == counts[order]).all()
        assert (counts[order] == counts[order].T).all()


_PIECES = list("ab c.,-$\\{}^_ 1 2 é数 \n\t") + ["the ", "x ", "&amp;", " . ", "<skipped>", "-\n"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=6))
def test_property_matches_sacrebleu(texts: list[str]) -> None:
    assert_matches_sacrebleu(texts)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=5))
def test_property_any_unicode(texts: list[str]) -> None:
    assert_matches_sacrebleu(texts)


def test_empty_batch() -> None:
    assert pairwise_bleu([]).shape == (0, 0)
    assert pairwise_bleu_distance([]).shape == (0, 0)
