"""Average-linkage clusters (the C_k of Appendix C, Eq. 9): worked by hand, and scikit-learn's
partition, which R-Zero's reward uses, on random distance matrices (ties included) and on the BLEU
distances of templated questions."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import AgglomerativeClustering

from diagevo.curriculum.bleu import pairwise_bleu_distance
from diagevo.curriculum.clustering import average_linkage_clusters
from tests.test_curriculum_bleu import templated

Partition = set[frozenset[int]]


def partition(labels: np.ndarray) -> Partition:
    groups: dict[int, set[int]] = {}
    for i, label in enumerate(labels.tolist()):
        groups.setdefault(label, set()).add(i)
    return {frozenset(g) for g in groups.values()}


def sklearn_partition(d: np.ndarray, threshold: float) -> Partition:
    if len(d) < 2:  # scikit-learn wants two points
        return {frozenset({i}) for i in range(len(d))}
    model = AgglomerativeClustering(
        n_clusters=None, metric="precomputed", linkage="average", distance_threshold=threshold
    )
    return partition(model.fit_predict(d))


def symmetric(upper: list[list[float]]) -> np.ndarray:
    """The matrix whose row i lists d(i, j) for j > i."""
    n = len(upper) + 1
    d = np.zeros((n, n))
    for i, row in enumerate(upper):
        d[i, i + 1 :] = d[i + 1 :, i] = row
    return d


# 0-1 are near duplicates; 2 is near 0 but far from 1; 3-4 are a pair, 3 a little near 2
WORKED = symmetric([[0.1, 0.3, 0.8, 0.9], [0.6, 0.7, 0.9], [0.42, 0.9], [0.2]])


def test_worked_by_hand() -> None:
    # {0,1} at 0.1; d({0,1}, 2) = (0.3 + 0.6) / 2 = 0.45, but 2's nearest is 3 (0.42) and 3's is 4:
    # {3,4} at 0.2; d(2, {3,4}) = (0.42 + 0.9) / 2 = 0.66, so {0,1,2} at 0.45; with
    # d({0,1}, {3,4}) = (0.75 + 0.9) / 2 = 0.825, the last merge is at (2 * 0.825 + 0.66) / 3 = 0.77.
    # At 0.5, single linkage would chain all five (2-3 at 0.42), complete linkage keep 2 alone (0.6)
    assert partition(average_linkage_clusters(WORKED, 0.5)) == {frozenset({0, 1, 2}), frozenset({3, 4})}
    assert partition(average_linkage_clusters(WORKED, 0.44)) == {frozenset({0, 1}), frozenset({2}), frozenset({3, 4})}
    assert partition(average_linkage_clusters(WORKED, 0.78)) == {frozenset(range(5))}
    assert partition(average_linkage_clusters(WORKED, 0.1)) == {frozenset({i}) for i in range(5)}  # 0.1: apart


def test_tie_goes_to_the_previous_link_of_the_chain() -> None:
    # d(0, 1) = d(1, 2) = 0.2: the chain 0 -> 1 merges 1 with 0, its previous link; then
    # d({0,1}, 2) = (0.9 + 0.2) / 2 = 0.55 >= 0.5 leaves 2 alone
    d = symmetric([[0.2, 0.9], [0.2]])
    assert partition(average_linkage_clusters(d, 0.5)) == {frozenset({0, 1}), frozenset({2})}
    assert sklearn_partition(d, 0.5) == {frozenset({0, 1}), frozenset({2})}
    # the batch reversed: the chain starts at the old 2, which now joins 1, and the old 0 stays alone;
    # where scikit-learn's clusters depend on the order, ours depend on it the same way
    assert partition(average_linkage_clusters(d[::-1, ::-1], 0.5)) == {frozenset({0, 1}), frozenset({2})}
    assert sklearn_partition(d[::-1, ::-1].copy(), 0.5) == {frozenset({0, 1}), frozenset({2})}


def test_small_batches() -> None:
    assert average_linkage_clusters(np.zeros((0, 0)), 0.5).tolist() == []
    assert average_linkage_clusters(np.zeros((1, 1)), 0.5).tolist() == [0]
    assert average_linkage_clusters(np.zeros((3, 3)), 0.5).tolist() == [0, 0, 0]
    assert len(set(average_linkage_clusters(1 - np.eye(3), 0.5).tolist())) == 3


@st.composite
def distance_matrices(draw: st.DrawFn) -> np.ndarray:
    """Symmetric, zero diagonal, sizes 0-300; most with many exact ties (the grids), some at the threshold."""
    n = draw(st.integers(0, 300))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    grid = draw(st.sampled_from([None, (0.0, 1.0), (0.0, 0.25, 0.5, 0.75, 1.0), tuple(np.arange(11) / 10)]))
    values = rng.random((n, n)) if grid is None else rng.choice(grid, size=(n, n))
    d = np.triu(values, 1)
    return d + d.T


@settings(max_examples=150, deadline=None)
@given(distance_matrices(), st.sampled_from([0.5, 0.3, 0.75, 0.05]))
def test_property_random_distances_match_sklearn(d: np.ndarray, threshold: float) -> None:
    assert partition(average_linkage_clusters(d, threshold)) == sklearn_partition(d, threshold)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 300), st.integers(0, 2**32 - 1), st.sampled_from([0.5, 0.3, 0.7]))
def test_property_bleu_distances_match_sklearn(n: int, seed: int, threshold: float) -> None:
    d = pairwise_bleu_distance(templated(random.Random(seed), n))
    assert partition(average_linkage_clusters(d, threshold)) == sklearn_partition(d, threshold)


@pytest.mark.parametrize("seed", range(5))
def test_batch_order_does_not_matter_without_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = np.triu(0.3 + 0.7 * rng.random((120, 120)), 1)
    d = d + d.T
    perm = rng.permutation(120)
    clusters = partition(average_linkage_clusters(d, 0.5))
    permuted = partition(average_linkage_clusters(d[np.ix_(perm, perm)], 0.5))
    assert {frozenset(int(perm[i]) for i in c) for c in permuted} == clusters
    assert len(clusters) not in (1, 120)  # a real partition, not a trivial one
