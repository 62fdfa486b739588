"""Pairwise BLEU distances: vectorised batch vs sacrebleu called pair by pair.

Targets (issue 3): >= 20x faster than sacrebleu at B = 512, B = 2048 in under 30 s.
The sacrebleu baseline makes B(B-1)/2 calls (one direction per pair, the least a distance
matrix needs), while the batch version computes both directions: the ratio is conservative.

Run: ``.venv/bin/python benchmarks/bench_bleu.py [--quick]``
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import numpy as np
import sacrebleu

from diagevo.curriculum import challenger_rewards, pairwise_bleu, pairwise_bleu_distance

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
    ok = err <= 1e-9 and t_big < 30 and (args.quick or ratio >= 20)
    print("OK" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
