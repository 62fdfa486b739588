"""Run under ``accelerate launch --num_processes 2``: each rank scores its shard of challenger
questions through :func:`global_rewards` and writes what it got back to ``$1/rank<r>.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from diagevo.curriculum.reward import challenger_rewards
from diagevo.train.hf.distributed import finish, global_rewards, init

SHARDS = [
    ["What is 12 + 7?", "A train travels 60 km in 1.5 hours. What is its average speed in km/h?", "What is 9 * 8?"],
    ["What is 12 + 7?", "How many integers from 1 to 30 are divisible by 4?"],
]
P1 = 0.5  # every question at the frozen solver's most uncertain vote share


def batch(items: list[tuple[int, str]]) -> list[float]:
    questions: list[str | None] = [q for _, q in items]
    return challenger_rewards(questions, [P1] * len(questions))


if __name__ == "__main__":
    rank, size = init(cpu=True)
    local = list(enumerate(SHARDS[rank]))
    got = global_rewards(local, batch)
    Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps({"size": size, "rewards": got}))
    finish()
