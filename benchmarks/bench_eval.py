"""Evaluation overhead: what ``diagevo eval`` adds to generation (grading, outputs, resume).

A loopback OpenAI-compatible server in its own process answers every question at once with a
fixed boxed answer, so generation costs only the HTTP round trip. The baseline, measured in the
same run, is the endpoint engine generating the same prompts alone; ``evaluate`` adds prompt
building, grading with the project's answer check, and one JSONL line per question. Then the
same evaluation again, resumed from its outputs file (nothing generated).

Benchmarks: the shared GSM8K test file (1,319 questions; answers compared as numbers, no
math-verify) and MATH-500 (500 questions; about a third of the comparisons go to math-verify).
Then MATH-500 again against a server that takes 0.5 s per request, as a real model does: the
grading of a batch overlaps the generation of the next, so evaluate should cost little more
than generation alone.

Run: ``.venv/bin/python benchmarks/bench_eval.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diagevo.curriculum.prompts import solver_messages  # noqa: E402
from diagevo.eval.benchmarks import load_benchmark  # noqa: E402
from diagevo.eval.config import EvalConfig  # noqa: E402
from diagevo.eval.runner import evaluate  # noqa: E402
from diagevo.generation import Sampling  # noqa: E402
from diagevo.generation.endpoint import EndpointEngine  # noqa: E402
from tests.llm_server import ServerProcess  # noqa: E402
from tests.shared import BENCHMARKS  # noqa: E402

SHARED = Path(os.environ.get("DIAGEVO_BENCHMARKS", BENCHMARKS))
REPLY = "Adding the parts step by step gives the total.\n\nThe answer is $\\boxed{18}$."


def measure(url: str, name: str, file: str, cfg: EvalConfig, tmp: Path) -> None:
    engine = EndpointEngine("bench", url=url, concurrency=32)
    engine.generate([solver_messages("warm up")], Sampling(n=1, temperature=0.0))
    bench = load_benchmark(name, SHARED / file)
    prompts = [solver_messages(q.text) for q in bench.questions]
    t0 = time.perf_counter()
    for start in range(0, len(prompts), cfg.batch_size):
        engine.generate(prompts[start : start + cfg.batch_size], Sampling(n=1, temperature=0.0))
    raw = time.perf_counter() - t0
    out = tmp / f"{name}-{time.monotonic_ns()}.jsonl"
    t0 = time.perf_counter()
    result = evaluate(engine, "bench", bench, cfg, out)
    full = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = evaluate(engine, "bench", bench, cfg, out)
    resumed = time.perf_counter() - t0
    assert again.resumed == len(bench.questions) and again.correct == result.correct
    n = len(bench.questions)
    print(f"  generation alone {raw:.2f} s ({raw / n * 1000:.2f} ms/question)")
    print(f"  evaluate         {full:.2f} s ({full / n * 1000:.2f} ms/question) = {full / raw:.2f}x generation alone")
    print(
        f"  resumed          {resumed:.3f} s ({resumed / n * 1000:.3f} ms/question read back), {result.correct} correct"
    )


def main() -> None:
    cfg = EvalConfig(batch_size=64)
    with tempfile.TemporaryDirectory() as tmp:
        with ServerProcess(defaults={"other": REPLY}) as srv:
            for name, file in (("gsm8k", "gsm8k_test.jsonl"), ("math500", "math500.jsonl")):
                print(f"{name}, a server that answers at once:")
                measure(srv.url, name, file, cfg, Path(tmp))
        with ServerProcess(delay_s=0.5, defaults={"other": REPLY}) as srv:
            print("math500, a server that answers in 0.5 s (32 requests in flight):")
            measure(srv.url, "math500", "math500.jsonl", cfg, Path(tmp))
    load = os.getloadavg()[0]
    print(f"(load average {load:.2f} on {os.cpu_count()} CPUs while measuring)")


if __name__ == "__main__":
    main()
