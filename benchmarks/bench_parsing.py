"""The bounded JSONL reader (diagevo/text/parsing.py) vs what it replaced, measured in the same run.

Baseline: ``[json.loads(line) for line in text.splitlines()]`` (the reader of ingest, round
record and diagnose before; it splits on U+2028 and friends and raises RecursionError on deep
nesting). New: ``[loads(line) for _, line in split_lines(text)]`` (``\\n`` only, depth and
size bounded, orjson). Also ``validate_event`` of the parsed events, which now checks ids for
control characters and texts for NUL, timed against the pydantic envelope it wraps.

Run: ``.venv/bin/python benchmarks/bench_parsing.py [--quick]``
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from diagevo.schemas import EventLine, validate_event
from diagevo.text.parsing import loads, split_lines


def export_like(n: int) -> str:
    """``n`` lines shaped like an export: failures with a trajectory, scores, causes."""
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            data: dict[str, Any] = {
                "failure_id": f"f{i}",
                "question_id": f"q{i}",
                "response": "Step: x = 3. " * 80,
                "reference": "Step: x = 2. " * 20,
            }
            typ = "failure.recorded"
        elif kind == 1:
            data = {"question_id": f"q{i}", "n": 8, "p1": 0.625, "p2": 0.25, "pseudo_label": "7", "retained": True}
            typ = "question.scored"
        else:
            data = {"failure_id": f"f{i - 2}", "cause_id": "C1", "via": "recurrence", "similarity": 0.91}
            typ = "failure.attributed"
        out.append(
            json.dumps({"type": typ, "run": "r", "round": 1, "event_id": f"r/1/{i}", "data": data}, ensure_ascii=False)
        )
    return "\n".join(out) + "\n"


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n, repeat = (5_000, 3) if args.quick else (60_000, 5)
    text = export_like(n)
    old = best(lambda: [json.loads(line) for line in text.splitlines()], repeat)
    new = best(lambda: [loads(line) for _, line in split_lines(text)], repeat)
    print(
        f"parse {n:,} lines: json.loads+splitlines {old / n * 1e6:.2f} us/line, "
        f"bounded loads+split_lines {new / n * 1e6:.2f} us/line: {old / new:.2f}x"
    )
    objs = [loads(line) for _, line in split_lines(text)]
    env = best(lambda: [EventLine.model_validate(o) for o in objs], repeat)
    full = best(lambda: [validate_event(o) for o in objs], repeat)
    print(
        f"validate {n:,} events: envelope only {env / n * 1e6:.2f} us, validate_event (data, ids, NUL) "
        f"{full / n * 1e6:.2f} us per event"
    )
    deep = "[" * 100_000 + "]" * 100_000
    try:
        json.loads(deep)
        outcome = "parsed"
    except RecursionError:
        outcome = "RecursionError"
    t = time.perf_counter()
    try:
        loads(deep)
    except ValueError as exc:
        refusal = str(exc)
    print(
        f"100,000-deep line: json.loads -> {outcome}; bounded loads -> {refusal!r} in "
        f"{(time.perf_counter() - t) * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    main()
