"""One fold (issue 91, item 2): ``memory verify``'s audit and every reader's fold take or refuse
each row by the same loop (:class:`~diagevo.memory.fold.Folding`), so they cannot disagree.

Run ``base`` (round 1 committed, round 2 open) gets raw rows the fold refuses, each alone: a row
ahead of the run's ``run.started`` (seq -5), an attribution to a cause the memory never held, a
commit of a round that never ran, a type no diagevo knows, a commit out of its type's shape. For
each, the audit refuses exactly the rows the readers' fold refuses, and the memory it holds at
each commit is the readers' memory at that commit. Before the one loop, the audit stopped folding
at a row ahead of the run's start (every later commit missing from it) while the readers folded on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagevo.log import open_log
from diagevo.log.recorder import every_row
from diagevo.memory.counting import audit
from diagevo.memory.fold import fold, fold_until
from tests.test_odd_rows import NOTE, odd_row, store_odd
from tests.test_readers_take_what_the_fold_takes import RUN, _sqlite

COMMIT = {"F": 1, "epsilon_next": 0.5, "heldout_acc": 0.5, "timing": {}}
FORGED: dict[str, tuple[str, int, dict[str, Any]]] = {
    "an attribution to an unknown cause": ("failure.attributed", 2, {"failure_id": "f9", "cause_id": "C404"}),
    "a commit of a round that never ran": ("round.committed", 5, COMMIT),
    "a type no diagevo knows": ("no.such.type", 2, {}),
    "a commit out of its type's shape": ("round.committed", 2, {**COMMIT, "F": "most"}),
    "a commit of an accuracy beyond 1": ("round.committed", 2, {**COMMIT, "heldout_acc": 2.0}),
    "a commit of negative seconds": ("round.committed", 2, {**COMMIT, "timing": {"solver": -3.0}}),
}


def _folded_alike(db: str) -> tuple[list[int], list[int]]:
    """The seqs the audit and the readers' fold refuse (asserted equal), and the rounds committed."""
    with open_log(db) as log:
        rows = list(every_row(log, RUN))
    checked, memory = audit(rows, RUN), fold(rows, RUN)
    assert [r.seq for r in checked.refused] == [r.seq for r in memory.refused]
    assert [r.why for r in checked.refused] == [r.why for r in memory.refused]
    assert checked.commits == {t: fold_until(rows, RUN, t).to_json() for t in sorted(memory.committed_rounds)}
    return [r.seq for r in memory.refused], sorted(memory.committed_rounds)


@pytest.mark.parametrize("case", sorted(FORGED))
def test_the_audit_refuses_what_the_readers_refuse(tmp_path: Path, case: str) -> None:
    forged = _sqlite(tmp_path)
    seq = forged.forge(*FORGED[case])
    refused, committed = _folded_alike(forged.db)
    assert refused == [seq] and committed == [1], (case, refused, committed)


def test_a_row_ahead_of_the_start_stops_no_fold(tmp_path: Path) -> None:
    forged = _sqlite(tmp_path)
    store_odd(forged.db, odd_row(forged.db, NOTE, {"seq": -5}), {"seq": -5})
    refused, committed = _folded_alike(forged.db)
    assert refused == [-5] and committed == [1], (refused, committed)
