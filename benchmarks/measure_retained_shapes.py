"""Where the retained questions' votes go wrong in the mini world: inside the world's questions
(two-digit operands; a one-digit factor or divisor: what the pair was built on and held-out
accuracy is measured on) or outside them (``29+3=``: a well-formed sum of a shape the pair never
saw). For each ablation cell in a log and each round: how many questions Eq. 3 retained, the share
outside the world's questions, and how often the solver's majority vote is the true answer on
each side.

    python benchmarks/measure_retained_shapes.py sqlite:///ablation/mini-regime.db [--arm ARM]

A measurement of runs, not a speed benchmark (so not run by `make bench`).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass

from diagevo.curriculum.equivalence import agrees
from diagevo.log import open_log
from diagevo.rounds import logged_questions
from diagevo.train.mini.world import answer, parse, pool, skill_of


@dataclass
class Side:
    """Retained questions on one side of the world's edge, and those whose vote is right."""

    retained: int = 0
    right: int = 0

    def share_right(self) -> str:
        return f"{self.right / self.retained:.2f}" if self.retained else "–"


def in_world(question: str) -> bool:
    """A question the world's skills hold (what the pair trained on and is measured on)."""
    skill = skill_of(question)
    return skill is not None and question.strip() in pool(skill)


def tally(db: str, arms: set[str] | None) -> dict[tuple[str, int], dict[bool, Side]]:
    """(run, round) -> inside/outside the world -> retained and right, for well-formed questions."""
    out: dict[tuple[str, int], dict[bool, Side]] = defaultdict(lambda: {True: Side(), False: Side()})
    with open_log(db) as store:
        for run in store.runs():
            parts = run.split("/")
            if parts[0] != "ablate" or len(parts) != 4 or (arms and parts[2] not in arms):
                continue
            for q in logged_questions(store, run, retained=True):
                if parse(q.text) is None:
                    continue
                side = out[(run, q.round)][in_world(q.text)]
                side.retained += 1
                side.right += agrees(q.pseudo_label, answer(q.text))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="the ablation log (a database URL)")
    ap.add_argument("--arm", action="append", help="only these arms (default: every ablation run)")
    args = ap.parse_args()
    print("| cell | round | retained | outside the world | vote right: inside | outside |")
    print("|---|---|---|---|---|---|")
    for (run, t), sides in sorted(tally(args.log, set(args.arm or ())).items()):
        inside, outside = sides[True], sides[False]
        n = inside.retained + outside.retained
        cell = "/".join(run.split("/")[2:])
        print(f"| {cell} | {t} | {n} | {outside.retained / n:.0%} | {inside.share_right()} | {outside.share_right()} |")


if __name__ == "__main__":
    main()
