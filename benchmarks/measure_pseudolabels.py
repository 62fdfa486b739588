"""How good are a model's own votes as labels? On benchmark questions with a gold answer: sample N
responses per question as the loop's construction step does (T = 1.0, top-p 0.99, the solver
prompt), take the majority-vote pseudo-label, and count how often it agrees with the gold answer,
overall and on the questions the double-confidence filter (Eq. 3) would retain.

    python benchmarks/measure_pseudolabels.py --model models/smollm2 \
        --bench gsm8k=../shared/data/benchmarks/gsm8k_test.jsonl --limit 40 --n 8

Prints one JSON object. A measurement of a model, not a speed benchmark (so not run by `make bench`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from diagevo.config.sections import FilterConfig
from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.equivalence import agrees
from diagevo.curriculum.filtering import keep
from diagevo.curriculum.prompts import solver_messages
from diagevo.curriculum.votes import votes
from diagevo.eval.benchmarks import load_benchmark
from diagevo.generation import Sampling, make_engine


def measure(model: str, name: str, path: Path, limit: int, n: int, max_new_tokens: int, seed: int) -> dict[str, object]:
    bench = load_benchmark(name, path, limit=limit)
    engine = make_engine("local", model)
    started = time.perf_counter()
    outs = engine.generate(
        [solver_messages(q.text) for q in bench.questions],
        Sampling(n=n, temperature=1.0, top_p=0.99, max_new_tokens=max_new_tokens, seed=seed),
    )
    seconds = time.perf_counter() - started
    engine.close()
    cfg = FilterConfig()
    labelled = right = retained = retained_right = boxed = 0
    for q, responses in zip(bench.questions, outs, strict=True):
        answers = [extract_answer(r) for r in responses]
        boxed += sum(a is not None for a in answers)
        v = votes(answers)
        if v.label is None:
            continue
        labelled += 1
        ok = agrees(v.label, q.gold)
        right += ok
        if keep(v.p1, v.p2, cfg):
            retained += 1
            retained_right += ok
    total = len(bench.questions)
    return {
        "model": model,
        "bench": name,
        "questions": total,
        "n": n,
        "max_new_tokens": max_new_tokens,
        "boxed_fraction": round(boxed / (total * n), 3),
        "labelled": labelled,
        "label_accuracy": round(right / labelled, 3) if labelled else None,
        "label_accuracy_over_all": round(right / total, 3),
        "retained_by_filter": retained,
        "retained_label_accuracy": round(retained_right / retained, 3) if retained else None,
        "sampling_seconds": round(seconds, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bench", required=True, help="NAME=PATH")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    name, _, path = a.bench.partition("=")
    print(json.dumps(measure(a.model, name, Path(path), a.limit, a.n, a.max_new_tokens, a.seed)))


if __name__ == "__main__":
    main()
