"""A verl user's round trip through the memory: export -> train -> dump -> failures -> diagnose -> commit.

diagevo keeps the memory (``import diagevo``, and ``diagevo.verl``, the public module verl calls);
verl trains the roles, with ``configs/verl/*.yaml``, as docs/how-to/verl.md and, on GPUs,
``examples/verl_round.sh`` run it. Here the train step is SIMULATED, for a machine without GPUs:
a stand-in policy of a few lines of arithmetic answers each row of the exported ``solver.parquet``
G times per step, ``diagevo.verl.compute_score`` scores each response as verl's reward worker
calls it, and the rollouts are dumped as verl's trainer dumps them (``{step}.jsonl`` in the
rollout directory beside the export, one line per response: ``input``, ``output``, ``gts``,
``score``, ``step``, ``uid``). Everything after is what a real dump goes through. The
challenger's update is left out too (it changes what the challenger writes, not the memory);
verl's two generations of Q^cur are simulated the same way (each row of the exported
``curriculum.parquet`` answered by the stand-in challenger, each of ``construct.parquet`` N times
by the stand-in solver, in a ``responses`` column as verl's generation writes it), and the glue
between them is diagevo's (``export_round(..., questions=...)``, ``generated_candidates``).
Diagnosis is the offline heuristic unless ``--llm-url`` names the paper's diagnostician.

    python examples/verl_round_trip.py --db sqlite:///verl.db --run verl-demo --out verl-rounds --rounds 2
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import diagevo
from diagevo import verl as diagevo_verl  # the module verl loads: reward.custom_reward_function.path=pkg://diagevo.verl

TRAINER = "verl (examples/verl_round_trip.py, train step simulated)"
SIZES = [
    "train.challenger_questions=16",
    "train.curriculum_questions=24",
    "solver.batch_size=8",
    "solver.max_steps=3",
]
"""A round small enough for a CPU: |Q^chal|, |Q^cur|, and the solver's GRPO batches and steps."""


class StandIn:
    """Someone's models, in a few lines: a challenger that writes sums, a solver right 3 times in 4."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def question(self) -> str:
        return f"What is {self.rng.randint(10, 99)} + {self.rng.randint(10, 99)}?"

    def answer(self, question: str) -> str:
        a, b = map(int, re.findall(r"\d+", question)[:2])
        right = self.rng.random() < 0.75
        return f"{a} plus {b}: the answer is \\boxed{{{a + b if right else a + b - 10}}}"


def chat_text(messages: Sequence[dict[str, str]]) -> str:
    """A chat prompt as verl's dump holds it: the ChatML template, decoded without its special tokens."""
    return "".join(f"{m['role']}\n{m['content']}\n" for m in messages) + "assistant\n"


def simulated_generation(source: Path, out: Path, respond: Callable[[dict[str, Any]], list[str]]) -> Path:
    """verl's generation entry point, simulated: ``out`` holds ``source``'s rows and a ``responses``
    column, the outputs ``respond`` gives each row."""
    table = pq.read_table(source)
    responses = [respond(row) for row in table.to_pylist()]
    pq.write_table(table.append_column("responses", pa.array(responses, pa.list_(pa.string()))), out)
    return out


def simulated_solver_phase(rows: list[dict[str, Any]], cfg: Any, policy: StandIn, dump: Path) -> float:
    """verl's GRPO steps on solver.parquet, simulated: each step a batch of rows, G responses each,
    scored by compute_score, dumped as ``{step}.jsonl``. Returns the share of right responses."""
    dump.mkdir(parents=True, exist_ok=True)
    right = total = 0
    for step in range(1, cfg.solver.max_steps + 1):
        batch = [rows[((step - 1) * cfg.solver.batch_size + i) % len(rows)] for i in range(cfg.solver.batch_size)]
        lines = []
        for b, row in enumerate(batch):
            truth = row["reward_model"]["ground_truth"]
            for g in range(cfg.solver.group_size):
                response = policy.answer(row["prompt"][-1]["content"])
                scored = diagevo_verl.compute_score(row["data_source"], response, truth, row["extra_info"])
                right, total = right + (scored["score"] > 0), total + 1
                line = {"input": chat_text(row["prompt"]), "output": response, "gts": truth, "score": scored["score"]}
                lines.append({**line, "step": step, "uid": f"s{step}-{b}_0_{g}"})
        (dump / f"{step}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return right / max(total, 1)


def one_round(store: diagevo.Recorder, run: str, out: Path, policy: StandIn, llm: dict[str, str]) -> diagevo.Committed:
    rnd = diagevo.Round.open(store, run)
    folder = out / f"round{rnd.t}"
    # export: the challenger's prompts (Q^chal) and the requests Q^cur is generated from
    diagevo_verl.export_round(store, run, folder)
    # Q^cur: the challenger writes a question for each request (verl's generation of curriculum.parquet);
    # construct.parquet holds them as solver prompts, answered N times (verl's generation again); the
    # answers are the round's candidates: votes and the filter (Eq. 3)
    asked = simulated_generation(
        folder / "curriculum.parquet",
        folder / "questions.parquet",
        lambda row: [f"<question>{policy.question()}</question>"],
    )
    diagevo_verl.export_round(store, run, folder, questions=asked)
    n = rnd.config.grpo.construction_responses
    answered = simulated_generation(
        folder / "construct.parquet",
        folder / "constructed.parquet",
        lambda row: [policy.answer(row["extra_info"]["question"]) for _ in range(n)],
    )
    rnd.record(diagevo_verl.generated_candidates(answered, run, rnd.t))
    rnd.promote()
    # export again: the retained questions, with their pseudo-labels (solver.parquet)
    exported = diagevo_verl.export_round(store, run, folder)
    if "solver.parquet" not in {f.name for f in exported.files}:
        return rnd.commit({})
    # train: verl's solver GRPO (simulated here), its rollouts dumped
    rows = pq.read_table(folder / "solver.parquet").to_pylist()
    acc = simulated_solver_phase(rows, rnd.config, policy, folder / "rollouts")
    # the dump's failed responses of retained questions, recorded and diagnosed; the commit
    failures = diagevo_verl.rollout_failures(store, run, folder / "rollouts")
    rnd.record_failures(failures)
    if llm:
        diagevo.diagnose(rnd, **llm)
    else:
        diagevo.diagnose(rnd, diagnostician="heuristic")
    return rnd.commit({"rollout_acc": acc})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--out", required=True, type=Path, help="where each round's files go (roundT/)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--llm-url", help="the diagnostician's OpenAI-compatible base URL (else the heuristic)")
    parser.add_argument("--model", help="the diagnostician's model, with --llm-url")
    args = parser.parse_args(argv)
    cfg = diagevo.load_config(None, [*SIZES, f"train.seed={args.seed}", f"train.rounds={args.rounds}"])
    llm = {"llm_url": args.llm_url, "model": args.model} if args.llm_url else {}
    policy = StandIn(args.seed)
    with diagevo.open_store(args.db) as store:
        diagevo.start_run(store, args.run, cfg, cfg.train.seed, trainer=TRAINER)
        for t in range(1, args.rounds + 1):
            done = one_round(store, args.run, args.out, policy, llm)
            print(f"round {t}: kept {done.retained}/{done.questions}, failures {done.failures}, F={done.F}")


if __name__ == "__main__":
    main()
