"""Simulator round benchmark (a script, not a test): what one realistic round of the sim world
costs, phase by phase, with the real local embedding model (its load and the cause texts'
embeddings are done before the clock starts, as the loop's earlier phases do).

The round: 128 challenger updates (10 answers each for the reward), 192 generated questions (a
third targeted at 6 causes), 12 construction answers each, a solver update on 128 with groups of
8, and the evaluation. ``tests/test_sim_backend.py`` checks that such a round embeds nothing twice;
the seconds are measured here, never asserted in a test.

    python benchmarks/bench_sim_round.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter

from diagevo.curriculum.answers import extract_answer
from diagevo.diagnosis.embedder import LocalEmbedder
from diagevo.memory.sampler import FREE, GenerationRequest
from diagevo.train.config import Config
from diagevo.train.sim.backend import SimBackend

CAUSES = [
    "Forgets to carry the remainder when adding multi-digit numbers column by column.",
    "Treats a percentage decrease followed by an equal increase as returning to the start.",
    "Drops the negative sign when moving a term across the equals sign.",
    "Counts the fence posts instead of the gaps between them.",
    "Adds fractions by adding numerators and denominators separately.",
    "Confuses the area of a circle with its circumference formula.",
]


def one_round(embedder: LocalEmbedder, seed: int) -> dict[str, float]:
    b = SimBackend(Config(), embedder=embedder)
    rng = random.Random(seed)
    causes = [GenerationRequest("targeted", f"c{i}", t, None, None, "n1", None) for i, t in enumerate(CAUSES)]
    reqs = ([FREE] * 6 + causes) * 16
    b.generate(causes, rng)

    def chal_reward(rs, outs):  # noqa: ANN001, ANN202
        votes = b.sample(outs, 10, rng)
        return [Counter(extract_answer(r) for r in v).most_common(1)[0][1] / 10 for v in votes]

    t0 = time.perf_counter()
    b.train_challenger(reqs[:128], chal_reward, rng)
    t1 = time.perf_counter()
    texts = b.generate(reqs, rng)
    construction = b.sample(texts, 12, rng)
    t2 = time.perf_counter()
    labels = [Counter(extract_answer(r) for r in rs).most_common(1)[0][0] for rs in construction]
    b.train_solver(texts[:128], lambda i, rs: [1.0 if extract_answer(r) == labels[i] else -1.0 for r in rs], 8, rng)
    t3 = time.perf_counter()
    b.evaluate(rng)
    t4 = time.perf_counter()
    return {"challenger": t1 - t0, "questions+answers": t2 - t1, "solver": t3 - t2, "evaluate": t4 - t3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    embedder = LocalEmbedder()
    embedder.embed(["load the model before the clock starts"])
    for i in range(args.repeat):
        phases = one_round(embedder, seed=i)
        shown = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in phases.items())
        print(f"round {i + 1}: {shown}; total {sum(phases.values()):.2f} s")


if __name__ == "__main__":
    main()
