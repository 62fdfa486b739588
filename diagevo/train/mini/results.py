"""What an ablation on the mini world measured, read back from its log: one row per (arm, seed, round).

Every figure is the log's own: held-out accuracy overall (``round.committed``) and per skill
(``eval.recorded``), the share of the round's curriculum questions that targeted a cause
(``question.generated``), F_t and ε_{t+1} (``round.committed``) and the round's seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from diagevo.catalog import EvalRecorded, QuestionGenerated, RoundCommitted
from diagevo.log import Recorder

SKILL_METRIC = "heldout_acc/"


@dataclass(frozen=True)
class CellRound:
    """One committed round of one (arm, seed) run."""

    arm: str
    seed: int
    round: int
    heldout_acc: float
    by_skill: dict[str, float] = field(default_factory=dict)
    targeted_share: float = 0.0
    F: float = 0.0
    epsilon_next: float = 0.0
    seconds: float = 0.0


def cell_of(run: str) -> tuple[str, int] | None:
    """(arm, seed) of an ablation run ``ablate/<world>/<arm>/s<seed>``; None for another run."""
    parts = run.split("/")
    if len(parts) != 4 or parts[0] != "ablate" or not parts[3].startswith("s") or not parts[3][1:].isdigit():
        return None
    return parts[2], int(parts[3][1:])


def cell_rounds(store: Recorder) -> list[CellRound]:
    """Every committed round of every ablation run in the log, by arm, seed and round."""
    rows = []
    for run in store.runs():
        cell = cell_of(run)
        if cell is None:
            continue
        skills: dict[int, dict[str, float]] = {}
        asked: dict[int, list[bool]] = {}
        for e in store.rows(run, types=(EvalRecorded, QuestionGenerated)):
            match e.event:
                case EvalRecorded(metrics=metrics):
                    named = (metrics or {}).items()
                    skills[e.round] = {
                        k.removeprefix(SKILL_METRIC): float(v) for k, v in named if k.startswith(SKILL_METRIC)
                    }
                case QuestionGenerated(mode=mode):
                    asked.setdefault(e.round, []).append(mode != "free")
        for row in store.rows(run, types=(RoundCommitted,)):
            c, modes = row.event, asked.get(row.round, [])
            assert isinstance(c, RoundCommitted)
            rows.append(
                CellRound(
                    arm=cell[0],
                    seed=cell[1],
                    round=row.round,
                    heldout_acc=float("nan") if c.heldout_acc is None else float(c.heldout_acc),
                    by_skill=skills.get(row.round, {}),
                    targeted_share=sum(modes) / len(modes) if modes else 0.0,
                    F=float(c.F or 0.0),
                    epsilon_next=float(c.epsilon_next or 0.0),
                    seconds=float(sum((c.timing or {}).values())),
                )
            )
    return sorted(rows, key=lambda r: (r.arm, r.seed, r.round))
