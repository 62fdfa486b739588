"""A run's events, filtered: what ``diagevo memory events`` lists and ``--follow`` streams.

One filter decides both, so a list and a follow of the same options show the same events: the
list reads through the log's indexes (by cause, failure or question id, else by type and round)
and cuts the result at a limit, saying whether more matched; the follow applies the same filter
to each event as it is appended. The list is a raw view: it shows every row the filter picks, and
marks each the rules refuse (the run's admission, :mod:`diagevo.views.admission`: ``passed_over``,
and why).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from diagevo.catalog import CATALOG, CAUSE_FIELDS, Event, RoundCommitted
from diagevo.log import Recorder
from diagevo.log.recorder import StoredEvent, payload
from diagevo.views.admission import admission
from diagevo.views.follow import follow_events
from diagevo.views.memory import resolve_run


@dataclass(frozen=True)
class EventFilter:
    """Which events to show: of these types (none: every type), of this round, naming this
    cause (in any of its key fields), failure or question. Every filter given must hold."""

    types: frozenset[type[Event]] = frozenset()
    cause: str | None = None
    failure: str | None = None
    question: str | None = None
    in_round: int | None = None

    def matches(self, event: StoredEvent) -> bool:
        """Whether ``event`` passes every filter; typed only where an id is asked of it."""
        asks = self.cause is not None or self.failure is not None or self.question is not None
        return (
            (not self.types or CATALOG[event.type] in self.types)
            and (self.in_round is None or event.round == self.in_round)
            and (not asks or self.names(event.event))
        )

    def names(self, named: Event) -> bool:
        """Whether ``named`` names the cause, failure and question asked for: the ids it names
        are its key fields' values (what the key index holds of it)."""
        return (
            (self.cause is None or any(getattr(named, f, None) == self.cause for f in CAUSE_FIELDS))
            and (self.failure is None or getattr(named, "failure_id", None) == self.failure)
            and (self.question is None or getattr(named, "question_id", None) == self.question)
        )

    def index_keys(self) -> dict[str, list[str]] | None:
        """The ids the log's key index reads by: the cause's fields, else the failure, else the
        question (the other filters are applied to what that read returns)."""
        if self.cause is not None:
            return {f: [self.cause] for f in CAUSE_FIELDS}
        if self.failure is not None:
            return {"failure_id": [self.failure]}
        if self.question is not None:
            return {"question_id": [self.question]}
        return None


@dataclass(frozen=True)
class EventPage:
    """The events a filter picked, in seq order, at most ``limit`` of them (None: all), whether
    more matched than are here, and why the rules refuse those of them they refuse (seq -> why)."""

    run: str
    events: list[StoredEvent]
    limit: int | None
    truncated: bool
    refused: Mapping[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "events": [event_json(e, self.refused.get(e.seq)) for e in self.events],
            "limit": self.limit,
            "truncated": self.truncated,
        }


def event_json(event: StoredEvent, refused: str | None = None) -> dict[str, Any]:
    """An event as ``memory events --json`` gives it: seq, round, type, event id, data, and for
    a row the rules refuse ``passed_over``, why (:mod:`diagevo.views.admission`). Its data
    (as the line shows it too) is the log's record as stored, as an export's line holds it, not
    the typed event: its class's reader upcasts an older version (a trainer's figures, once flat,
    move under its free-form field), so the typed event would show another record than the log's."""
    shown = {
        "seq": event.seq,
        "round": event.round,
        "type": event.type,
        "event_id": event.event_id,
        "data": payload(event),
    }
    return shown if refused is None else {**shown, "passed_over": refused}


def list_events(store: Recorder, run: str | None, wanted: EventFilter, limit: int | None = None) -> EventPage:
    """The events of ``run`` (default: the latest run) that ``wanted`` picks, the first
    ``limit`` of them (None or 0: all)."""
    run_id = resolve_run(store, run)
    cut = min(limit + 1, 2**63 - 1) if limit else None  # one more than shown: whether the list was cut
    keys, types = wanted.index_keys(), wanted.types or None
    found = store.read(run_id, keys=keys, types=types, in_round=wanted.in_round, limit=cut)
    picked = [e for e in found if wanted.matches(e)]
    truncated = bool(limit) and len(picked) > (limit or 0)
    shown = picked[:limit] if limit else picked
    refusals = admission(store, run_id).refusals
    listed = {e.seq for e in shown} if refusals else set()
    refused = {r.seq: r.why for r in refusals if r.seq in listed}
    return EventPage(run_id, shown, limit or None, truncated, refused)


def follow_matching(
    store: Recorder, run: str, wanted: EventFilter, until_round: int | None = None
) -> Iterator[StoredEvent]:
    """Every event of ``run`` that ``wanted`` picks, from its first, then each new one as it is
    appended; with ``until_round``, done once that round (or a later one) is committed, whether
    or not the filter picks the commit."""
    for event in follow_events(store, run):
        if wanted.matches(event):
            yield event
        if until_round is not None and CATALOG[event.type] is RoundCommitted and event.round >= until_round:
            return
