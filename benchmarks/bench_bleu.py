"""Pairwise BLEU distances: vectorised batch vs sacrebleu called pair by pair; numpy alone vs
the scipy and scikit-learn it replaced.

Targets (issue 3): >= 20x faster than sacrebleu at B = 512, B = 2048 in under 30 s.
The sacrebleu baseline makes B(B-1)/2 calls (one direction per pair, the least a distance
matrix needs), while the batch version computes both directions: the ratio is conservative.

Issue 51: the match counts and the clusters in numpy alone, the same results as before and as
fast or faster. "Before" is kept here only: scipy.sparse's product ``X X^T`` and scikit-learn's
``AgglomerativeClustering``, each timed interleaved with its replacement (best of 3; wall-clock
and CPU time, user + system of every thread, what other jobs on the machine disturb least), on
the same batches, and the whole distance matrix and reward with both swapped in (scikit-learn,
which brings scipy, is in the ``test`` extra).

Run: ``.venv/bin/python benchmarks/bench_bleu.py [--quick]``
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np
import sacrebleu

from diagevo.curriculum import bleu as bleu_module
from diagevo.curriculum import reward as reward_module
from diagevo.curriculum.bleu import pairwise_bleu, pairwise_bleu_distance
from diagevo.curriculum.clustering import average_linkage_clusters
from diagevo.curriculum.reward import challenger_rewards

SUBJECTS = ["integer n", "real number x", "triangle ABC", "sequence a_n", "polynomial P(x)", "set S", "function f"]
VERBS = ["satisfies", "is divisible by", "has exactly", "is tangent to", "maximises", "equals"]
OBJECTS = [
    "$n^2 + 1$",
    "$\\frac{p}{q}$",
    "three real roots",
    "the circle of radius 5",
    "$2^{k} - 1$",
    "its mirror image",
]
ASKS = ["Find the smallest", "Compute the sum of all", "How many", "Determine the largest", "Prove that no"]


def question(rng: random.Random) -> str:
    parts = [f"{rng.choice(ASKS)} {rng.choice(SUBJECTS)} such that it {rng.choice(VERBS)} {rng.choice(OBJECTS)}."]
    for _ in range(rng.randint(1, 5)):
        parts.append(
            f"Suppose the {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
            f"and {rng.randint(1, 999)} {rng.choice(['<', '>', '='])} {rng.randint(1, 999)}."
        )
    return " ".join(parts)


def batch(size: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    qs = [question(rng) for _ in range(size)]
    for i in range(0, size, 10):  # some exact and near duplicates, as a challenger produces
        j = rng.randrange(size)
        qs[j] = qs[i] if rng.random() < 0.5 else qs[i].replace("the", "a", 1)
    return qs


def sacrebleu_pairwise(texts: list[str]) -> np.ndarray:
    n = len(texts)
    d = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            d[i, j] = d[j, i] = 1.0 - sacrebleu.sentence_bleu(texts[i], [texts[j]]).score / 100
    return d


def scipy_match_counts(ids: np.ndarray, owner: np.ndarray, lens: np.ndarray, n_texts: int) -> list[np.ndarray]:
    """Before: the same binary rows X (one column per n-gram and copy), ``X X^T`` by scipy.sparse."""
    from scipy import sparse

    starts = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64) if n_texts else lens
    pos_in_text = np.arange(len(ids), dtype=np.int64) - np.repeat(starts, lens)
    vocab = int(ids.max()) + 1 if len(ids) else 1
    code = ids.copy()
    out: list[np.ndarray] = []
    for n in range(1, bleu_module.MAX_ORDER + 1):
        if n > 1:
            nxt = np.zeros_like(ids)
            shifted = ids[n - 1 :]
            nxt[: len(shifted)] = shifted
            code = np.unique(code * vocab + nxt, return_inverse=True)[1].astype(np.int64).ravel()
        valid = pos_in_text + n <= np.repeat(lens, lens)
        g, t = code[valid], owner[valid]
        order = np.lexsort((g, t))
        g, t = g[order], t[order]
        idx = np.arange(len(g))
        new = np.ones(len(g), dtype=bool)
        new[1:] = (g[1:] != g[:-1]) | (t[1:] != t[:-1])
        rank = idx - np.maximum.accumulate(np.where(new, idx, 0))
        col = np.unique(g * (int(rank.max()) + 1) + rank, return_inverse=True)[1]
        x = sparse.csr_matrix((np.ones(len(g), dtype=np.int32), (t, col.ravel())), shape=(n_texts, int(col.max()) + 1))
        out.append((x @ x.T).toarray())
    return out


def sklearn_clusters(distances: np.ndarray, threshold: float) -> np.ndarray:
    """Before: scikit-learn's average-linkage clustering on the precomputed distances."""
    from sklearn.cluster import AgglomerativeClustering

    model = AgglomerativeClustering(
        n_clusters=None, metric="precomputed", linkage="average", distance_threshold=threshold
    )
    return model.fit_predict(distances)


def partition(labels: np.ndarray) -> set[frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for i, label in enumerate(labels.tolist()):
        groups.setdefault(label, set()).add(i)
    return {frozenset(g) for g in groups.values()}


def interleaved(now: Callable[[], Any], before: Callable[[], Any], runs: int = 3) -> tuple[list[float], Any, Any]:
    """Best wall-clock and CPU times of now and before, run in turns, and their results."""
    best = [float("inf")] * 4  # wall now, CPU now, wall before, CPU before
    results: list[Any] = [None, None]
    for _ in range(runs):
        for k, f in enumerate((now, before)):
            w, c = time.perf_counter(), time.process_time()
            results[k] = f()
            best[2 * k] = min(best[2 * k], time.perf_counter() - w)
            best[2 * k + 1] = min(best[2 * k + 1], time.process_time() - c)
    return best, results[0], results[1]


def import_time(modules: str) -> float:
    """Best of 3 of a new process that imports ``modules``."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {modules}"], check=True)
        times.append(time.perf_counter() - t0)
    return min(times)


Stage = tuple[str, Callable[[], Any], Callable[[], Any], Callable[[Any, Any], bool]]


def stages(size: int) -> list[Stage]:
    """(name, now, before, same results?) for each stage on one batch of ``size`` questions."""
    texts = batch(size, seed=1)
    ids, owner, lens = bleu_module._token_ids([bleu_module.tokenize(t) for t in texts])
    d = pairwise_bleu_distance(texts)
    p1 = [0.5] * size

    def distances_before() -> np.ndarray:
        with mock.patch.object(bleu_module, "_match_counts", scipy_match_counts):
            return pairwise_bleu_distance(texts)

    def rewards_before() -> list[float]:
        with (
            mock.patch.object(bleu_module, "_match_counts", scipy_match_counts),
            mock.patch.object(reward_module, "average_linkage_clusters", sklearn_clusters),
        ):
            return challenger_rewards(list(texts), p1)

    return [
        (
            "match counts X X^T",
            lambda: bleu_module._match_counts(ids, owner, lens, size),
            lambda: scipy_match_counts(ids, owner, lens, size),
            lambda a, b: all((x == y).all() for x, y in zip(a, b, strict=True)),
        ),
        (
            "clusters",
            lambda: average_linkage_clusters(d, 0.5),
            lambda: sklearn_clusters(d, 0.5),
            lambda a, b: partition(a) == partition(b),
        ),
        ("pairwise_bleu_distance", lambda: pairwise_bleu_distance(texts), distances_before, np.array_equal),
        ("challenger_rewards", lambda: challenger_rewards(list(texts), p1), rewards_before, np.array_equal),
    ]


def compare_with_before(sizes: list[int]) -> bool:
    """Each stage now and before on the same batches; True when every result is the same."""
    same = True
    print("numpy alone vs before (scipy.sparse X X^T, scikit-learn clusters): best of 3, in turns")
    print(f"  {'B':>5}  {'stage':<24} {'now':>9} {'before':>9}  {'wall':>6}  {'CPU':>6}")
    for size in sizes:
        for name, now, before, equal in stages(size):
            (w_now, c_now, w_before, c_before), got, want = interleaved(now, before)
            same &= bool(equal(got, want))
            print(
                f"  {size:>5}  {name:<24} {w_now:7.3f} s {w_before:7.3f} s  "
                f"{w_before / w_now:5.2f}x  {c_before / c_now:5.2f}x"
            )
    base = import_time("numpy, sacrebleu")
    extra = import_time("numpy, sacrebleu, scipy.sparse, sklearn.cluster") - base
    print(f"  importing scipy.sparse and sklearn.cluster, no longer needed: {extra:.2f} s (once per process)")
    print(f"  same counts, clusters, distances and rewards: {'yes' if same else 'NO'}")
    return same


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="B = 128 baseline only (smoke run)")
    args = ap.parse_args()
    b_small = 128 if args.quick else 512

    texts = batch(b_small)
    words = np.mean([len(t.split()) for t in texts])
    pairwise_bleu(texts[:8])  # warm-up (imports, tokenizer)

    t0 = time.perf_counter()
    ours = pairwise_bleu(texts)
    dist = pairwise_bleu_distance(texts)
    t_ours = (time.perf_counter() - t0) / 2
    t0 = time.perf_counter()
    ref = sacrebleu_pairwise(texts)
    t_ref = time.perf_counter() - t0
    upper = np.triu_indices(len(texts), 1)
    err = float(np.abs((1.0 - ours)[upper] - ref[upper]).max())
    ratio = t_ref / t_ours
    print(f"B = {b_small} ({words:.0f} words/question on average)")
    print(f"  sacrebleu pair by pair: {t_ref:8.3f} s  ({len(upper[0])} sentence_bleu calls)")
    print(f"  vectorised batch:       {t_ours:8.3f} s  (both directions, {len(texts) ** 2} pairs)")
    print(f"  speed-up:               {ratio:8.1f}x  (target >= 20x)")
    print(f"  max |difference|:       {err:.2e}  (symmetrised distance finite: {np.isfinite(dist).all()})")

    big = batch(2048, seed=1)
    t0 = time.perf_counter()
    pairwise_bleu_distance(big)
    t_big = time.perf_counter() - t0
    t0 = time.perf_counter()
    challenger_rewards(list(big), [0.5] * len(big))
    t_rew = time.perf_counter() - t0
    print("B = 2048")
    print(f"  pairwise_bleu_distance: {t_big:8.3f} s  (target < 30 s)")
    print(f"  challenger_rewards:     {t_rew:8.3f} s  (distances + average-linkage clustering)")
    same = compare_with_before([b_small] if args.quick else [b_small, 2048])
    ok = err <= 1e-9 and t_big < 30 and same and (args.quick or ratio >= 20)
    print("OK" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
