"""The query of ``memory events`` and ``--follow`` (:mod:`diagevo.views.events`): one filter for
the list and the follow, the list cut at a limit and saying so. Hand-written log, seq by seq:

    1 run.started (round 0)
    2 node.created N1, 3 cause.created C1 (failure f-C1-1), 4 failure.attributed C1 f2,
    5 failure.attributed C1 f3, 6 round.committed (round 1)
    7 failure.attributed C1 f4, 8 round.committed (round 2)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from diagevo.catalog import FailureAttributed, RoundCommitted
from diagevo.log import Recorder, open_log
from diagevo.log.recorder import StoredEvent
from diagevo.views.events import EventFilter, follow_matching, list_events
from tests.logs import Log


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Recorder]:
    log = Log()  # the decisions alone (appended as they are: the evidence is not what is queried here)
    log.node("N1").add("cause.created", cause_id="C1", node_id="N1", description="d", failure_id="f-C1-1")
    for failure in ("f2", "f3"):
        log.add("failure.attributed", failure_id=failure, cause_id="C1", via="recurrence")
    log.commit().add("failure.attributed", failure_id="f4", cause_id="C1", via="recurrence").commit()
    with open_log(f"sqlite:///{tmp_path / 'e.db'}", create=True) as opened:
        opened.append(log.events())
        yield opened


def seqs(events: Sequence[StoredEvent]) -> list[int]:
    return [e.seq for e in events]


def test_a_cause_filter_reads_every_key_field_and_the_limit_says_it_cut(store: Recorder) -> None:
    page = list_events(store, "r1", EventFilter(cause="C1"), limit=2)
    assert (seqs(page.events), page.limit, page.truncated) == ([3, 4], 2, True)
    page = list_events(store, "r1", EventFilter(cause="C1"), limit=4)
    assert (seqs(page.events), page.truncated) == ([3, 4, 5, 7], False)


def test_every_filter_given_must_hold(store: Recorder) -> None:
    assert seqs(list_events(store, "r1", EventFilter(cause="C1", in_round=2)).events) == [7]
    assert seqs(list_events(store, "r1", EventFilter(failure="f3")).events) == [5]
    assert seqs(list_events(store, "r1", EventFilter(cause="C1", failure="f3")).events) == [5]
    everything = list_events(store, None, EventFilter(types=frozenset({RoundCommitted})), limit=0)
    assert (everything.run, seqs(everything.events), everything.limit, everything.truncated) == (
        "r1",
        [6, 8],
        None,
        False,
    )
    assert list_events(store, "r1", EventFilter(failure="f9")).events == []


def test_the_follow_picks_what_the_list_picks_and_stops_at_the_round_asked(store: Recorder) -> None:
    attributed = EventFilter(types=frozenset({FailureAttributed}))
    # round 1's commit (seq 6) ends it though the filter does not pick commits
    assert seqs(list(follow_matching(store, "r1", attributed, until_round=1))) == [4, 5]
    assert seqs(list(follow_matching(store, "r1", attributed, until_round=2))) == seqs(
        list_events(store, "r1", attributed).events
    )
