"""How many diagnostician replies of a weak model parse, with and without structured outputs.

Serves a local model with ``vllm serve`` (vLLM's CPU build here), then asks the same diagnostician
requests of all four stages (Prompts 1-4 of the paper, built from arithmetic failures and a fixed
set of causes and skill nodes) twice: unconstrained (``structured=False``: today's lenient
parsing) and constrained to each stage's JSON Schema (``response_format``). Counts the replies
that parse and validate at the first ask, and after the client's one re-ask. Greedy (temperature
0, as the diagnostician asks), so each run gives the same replies.

    .venv/bin/python benchmarks/measure_structured_outputs.py --model DIR [--items 12] [--url URL --name NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView  # noqa: E402
from diagevo.diagnosis.llm import LLMDiagnostician  # noqa: E402
from diagevo.generation.openai_client import OpenAIClient  # noqa: E402

CAUSES = [
    "adds the tens digits but forgets to carry the one from the units column",
    "multiplies the two numbers instead of adding them as the question asks for",
    "subtracts the larger number from the smaller one and reports a positive difference",
    "computes the remainder of the division but reports the quotient as the final answer",
    "stops after the first step of a two step problem and reports the intermediate value",
    "misreads times as plus and adds the two factors instead of multiplying them together",
]
NODES = [
    ("N1", "multi digit addition with carrying across place values in column arithmetic"),
    ("N2", "choosing the arithmetic operation that the wording of a question asks for"),
    ("N3", "integer division with quotient and remainder and which one the question wants"),
]


def requests(n: int, seed: int = 0) -> list[tuple[str, Any]]:
    """``n`` requests of each stage: (stage, arguments)."""
    rng = random.Random(seed)
    out: list[tuple[str, Any]] = []
    for i in range(n):
        a, b = rng.randint(12, 89), rng.randint(12, 89)
        wrong = a + b + rng.choice([-10, -1, 1, 10])
        known = (
            tuple(KnownCause(f"C{j + 1}", "active", CAUSES[j]) for j in rng.sample(range(len(CAUSES)), 3))
            if i % 2
            else ()
        )
        item = ExtractionInput(
            failure_id=f"f{i}",
            question_id=f"q{i}",
            question=f"What is {a} + {b}?",
            pseudo_label=str(a + b),
            response=f"{a} + {b} = {wrong}. The answer is \\boxed{{{wrong}}}.",
            reference=f"{a} + {b} = {a + b}. The answer is \\boxed{{{a + b}}}.",
            known=known,
        )
        out.append(("extract", item))
        cands = [KnownCause(f"C{j + 1}", "active", CAUSES[j]) for j in rng.sample(range(len(CAUSES)), 2)]
        out.append(("deduplicate", (CAUSES[i % len(CAUSES)], cands)))
        shortlist = [NodeView(nid, label, (CAUSES[k],)) for k, (nid, label) in enumerate(NODES)]
        out.append(("assign_node", (CAUSES[(i + 1) % len(CAUSES)], shortlist)))
        x, y = rng.sample(range(len(NODES)), 2)
        out.append(("consolidate", (NodeView(*NODES[x], (CAUSES[x],)), NodeView(*NODES[y], (CAUSES[y],)))))
    return out


async def ask_all(dx: LLMDiagnostician, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    async def one(stage: str, args: Any) -> tuple[str, Any]:
        if stage == "extract":
            return stage, await dx.extract(args)
        if stage == "deduplicate":
            return stage, await dx.deduplicate(*args)
        if stage == "assign_node":
            return stage, await dx.assign_node(*args)
        return stage, await dx.consolidate(*args)

    return list(await asyncio.gather(*(one(s, a) for s, a in items)))


def rates(replies: list[tuple[str, Any]]) -> dict[str, dict[str, float]]:
    by: dict[str, list[Any]] = defaultdict(list)
    for stage, r in replies:
        by[stage].append(r)
        by["all"].append(r)
    return {
        stage: {
            "n": len(rs),
            "first_ask": sum(r.value is not None and r.attempts == 1 for r in rs) / len(rs),
            "after_reask": sum(r.value is not None for r in rs) / len(rs),
            "mean_completion_tokens": sum(r.completion_tokens or 0 for r in rs) / len(rs),
            "why_not": Counter((r.error or "").split(": ", 1)[-1][:70] for r in rs if r.value is None).most_common(3),
        }
        for stage, rs in by.items()
    }


def measure(url: str, name: str, n: int, max_tokens: int) -> dict[str, Any]:
    items = requests(n)
    out: dict[str, Any] = {}
    for mode, structured in (("unconstrained", False), ("structured", None)):
        client = OpenAIClient(url, concurrency=8, timeout_s=600, max_retries=1)
        dx = LLMDiagnostician(client, name, max_tokens=max_tokens, structured=structured)
        replies = asyncio.run(ask_all(dx, items))
        out[mode] = rates(replies)
        out[mode]["server_took_schemas"] = dx.structured
        out[mode]["examples"] = [r.raw[:160] for _, r in replies[:4]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="a local model directory to serve")
    ap.add_argument("--url", help="an OpenAI-compatible server already running (with --name)")
    ap.add_argument("--name", default="diagnostician")
    ap.add_argument("--items", type=int, default=12, help="requests per stage")
    ap.add_argument("--max-tokens", type=int, default=192)
    args = ap.parse_args()
    if args.url:
        result = measure(args.url, args.name, args.items, args.max_tokens)
    else:
        from diagevo.generation.vllm_server import served

        with tempfile.TemporaryDirectory() as tmp, served(args.model, args.name, Path(tmp) / "serve.log") as url:
            result = measure(url, args.name, args.items, args.max_tokens)
    print(json.dumps(result, indent=1))
    print(
        "| stage | n | parsed, unconstrained (1st ask / after re-ask) | parsed, structured (1st ask / after re-ask) |"
    )
    print("|---|---|---|---|")
    for stage in ("extract", "deduplicate", "assign_node", "consolidate", "all"):
        u, s = result["unconstrained"][stage], result["structured"][stage]
        print(
            f"| {stage} | {u['n']} | {u['first_ask']:.0%} / {u['after_reask']:.0%} | {s['first_ask']:.0%} / "
            f"{s['after_reask']:.0%} |"
        )


if __name__ == "__main__":
    main()
