"""A run followed while another process writes it (``memory events --follow``, ``memory stats
--follow``, with or without ``--steps``): the log's head is polled by seq (one small indexed
read), and only the events after the last one seen are read. Works the same on SQLite (each
read is a new snapshot of the WAL) and PostgreSQL. The generators end at the round asked for
(``until_round``), else never by themselves: the caller stops them (Ctrl-C)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from diagevo.catalog import RoundCommitted, TrainStep
from diagevo.log import EventReader, EventWriter, Recorder
from diagevo.log.recorder import StoredEvent
from diagevo.results.stats import RoundRow
from diagevo.views.queries import step_row
from diagevo.views.stats import accumulate

INTERVAL = 0.5  # seconds between two looks at the head when nothing new came


def heads(store: EventWriter, run: str) -> Iterator[int]:
    """The run's head seq each time it has moved on (the first: once the run has an event); one
    look every :data:`INTERVAL` seconds at most."""
    last = 0
    while True:
        head = store.last_seq(run)
        if head > last:
            last = head
            yield head
        time.sleep(INTERVAL)


def follow_events(store: Recorder, run: str) -> Iterator[StoredEvent]:
    """The run's events in seq order, then each new one as it is appended."""
    last = 0
    for head in heads(store, run):
        # a plain loop, not ``yield from``: closing this generator leaves the read as it always did
        for event in store.read(run, after_seq=last, upto_seq=head):  # noqa: UP028
            yield event
        last = head


def follow_stats(store: Recorder, run: str, until_round: int | None = None) -> Iterator[RoundRow]:
    """The run's per-round statistics (:mod:`diagevo.views.stats`), a row as each round is
    committed: the rows there are first, then each new one; with ``until_round``, done after
    the row of that round (or a later one)."""
    shown = 0  # the last committed round given
    for _ in heads(store, run):
        for row in accumulate(store, run).rows():
            if row.round > shown:
                shown = row.round
                yield row
                if until_round is not None and shown >= until_round:
                    return


def follow_steps(store: Recorder, run: str, until_round: int | None = None) -> Iterator[dict[str, Any]]:
    """The run's GRPO steps (``train.step``) as rows of :func:`~diagevo.views.queries.step_row`,
    from its first, then each new one as its phase logs it; with ``until_round``, done once that
    round (or a later one) is committed."""
    for e in follow_events(store, run):
        event = e.event
        if isinstance(event, TrainStep):
            yield step_row(e.round, event)
        if isinstance(event, RoundCommitted) and until_round is not None and e.round >= until_round:
            return


def wait_for_run(store: EventReader, run: str) -> None:
    """Return once ``run`` has an event (a follower started before the writer)."""
    while not store.has_run(run):
        time.sleep(INTERVAL)
