"""What a stored run has counted of the failures and questions a new batch of events names:
the :class:`~diagevo.memory.counting.Tally` a writer checks that batch against (ingest, the
diagnostician's appends), read by key, not by reading the run whole."""

from __future__ import annotations

from collections.abc import Iterable

from diagevo.catalog import (
    CATALOG,
    BatchWithdrawn,
    CausePromoted,
    PromotionsDecided,
    QuestionGenerated,
    QuestionScored,
    RoundCommitted,
    RoundStarted,
)
from diagevo.log import EventReader, StoredEvent
from diagevo.memory.checkpoints import CHECKPOINT_READS, CHECKPOINT_TYPES
from diagevo.memory.counting import Ledger, Tally
from diagevo.schemas import EventIn
from diagevo.views.memory import BEARINGS, bearings

ROUND_MILESTONES = (RoundStarted, CausePromoted, PromotionsDecided, RoundCommitted)
ROUND_EVIDENCE = (*ROUND_MILESTONES, QuestionGenerated, QuestionScored)  # what a round's promotions follow from


def stored_tally(store: EventReader, run: str, events: Iterable[EventIn], *, rounds: bool = False) -> Tally:
    """The run's counts of the failure and question ids ``events`` name (with their diagnoses),
    of the checkpoints it wrote if they hold one (two events a round), and with ``rounds``, of
    their rounds' questions, promotions and commits, as its log holds them."""
    mine = [ev for ev in events if ev.run == run]
    found: dict[int, StoredEvent] = {}
    if any(CATALOG[ev.type] in CHECKPOINT_TYPES for ev in mine):
        found.update((e.seq, e) for e in store.rows(run, types=CHECKPOINT_READS))
    for field in ("failure_id", "question_id"):
        ids = {i for ev in mine if isinstance(i := getattr(ev.event, field, None), str)}
        if ids:
            found.update((e.seq, e) for e in store.rows(run, keys={field: sorted(ids)}))
            found.update((e.seq, e) for e in store.rows(run, types=(BatchWithdrawn,)))  # what they take back
    for rnd in sorted({ev.round for ev in mine}) if rounds else ():
        found.update((e.seq, e) for e in store.rows(run, types=ROUND_EVIDENCE, in_round=rnd))
    if found:  # a milestone the fold refused (a commit of a round that never ran) is none of the run's
        kept = {row.seq for row in bearings(store, run)}
        found = {seq: e for seq, e in found.items() if seq in kept or e.type not in _BEARING_NAMES}
    ledger = Ledger(run)
    for seq in sorted(found):
        ledger.take_row(found[seq])  # its breaks: verify names them
    return ledger.tally


_BEARING_NAMES = frozenset(t.name for t in BEARINGS)
