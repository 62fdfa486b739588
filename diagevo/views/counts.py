"""What a stored run has counted of the failures and questions a new batch of events names:
the :class:`~diagevo.memory.counting.Tally` a writer checks that batch against (ingest, the
diagnostician's appends), read by key, not by reading the run whole."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from diagevo.catalog import (
    CATALOG,
    CausePromoted,
    PromotionsDecided,
    QuestionGenerated,
    QuestionScored,
    RoundCommitted,
    RoundStarted,
)
from diagevo.log import Recorder
from diagevo.memory.counting import CHECKPOINT_TYPES, COUNTED_TYPES, Tally

ROUND_MILESTONES = (RoundStarted, CausePromoted, PromotionsDecided, RoundCommitted)
ROUND_EVIDENCE = (*ROUND_MILESTONES, QuestionGenerated, QuestionScored)  # what a round's promotions follow from


def stored_tally(
    store: Recorder,
    run: str,
    *,
    failures: Collection[str] = (),
    questions: Collection[str] = (),
    rounds: Collection[int] = (),
    checkpoints: bool = False,
) -> Tally:
    """The run's counts of these failure and question ids (with their diagnoses) and of these
    rounds' questions, promotions and commits, as its log holds them; with ``checkpoints``, the
    checkpoints it wrote (two events a round)."""
    rows: dict[int, tuple[int, str, dict[str, Any]]] = {}
    if checkpoints:
        for e in store.read(run, types=CHECKPOINT_TYPES):
            rows[e.seq] = (e.round, e.type, dict(e.data))
    for field, ids in (("failure_id", failures), ("question_id", questions)):
        if ids:
            for e in store.read(run, keys={field: sorted(ids)}):
                rows[e.seq] = (e.round, e.type, dict(e.data))
    for rnd in sorted(rounds):
        for e in store.read(run, types=ROUND_EVIDENCE, in_round=rnd):
            rows[e.seq] = (e.round, e.type, dict(e.data))
    tally = Tally()
    for seq in sorted(rows):
        rnd, etype, data = rows[seq]
        cls = CATALOG[etype]
        if cls in COUNTED_TYPES:
            tally.add(rnd, cls, data)
    return tally
