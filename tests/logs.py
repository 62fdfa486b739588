"""A tiny builder for hand-written event logs used across the tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagevo.catalog import Event, PhaseCompleted, StoredEvent
from diagevo.catalog.bookkeeping import PHASE_FIGURES
from diagevo.schemas import EventIn, validate_event


def wire_event(type_name: str, run: str, round: int, event_id: str, **data: Any) -> EventIn:  # noqa: A002
    """An event as the interchange format spells it (its type's name, its data as JSON values),
    validated as ingest validates a line: the tests that build events by hand write the wire
    format on purpose (the library constructs the classes, :func:`diagevo.schemas.new_event`)."""
    return validate_event({"type": type_name, "run": run, "round": round, "event_id": event_id, "data": data})


@dataclass(frozen=True)
class ForgedRow:
    """A row written past every class (a type and data as stored, unvalidated): what a forged
    log, an older diagevo or a hand edit can put in the store, for the tests of what reads it.
    The store's ``append`` takes it as it takes an :class:`~diagevo.schemas.EventIn`."""

    type: str
    run: str
    round: int
    event_id: str
    data: dict[str, Any] = field(default_factory=dict)
    schema_version: int = 1

    def line(self) -> dict[str, Any]:
        fields = {"type": self.type, "run": self.run, "round": self.round, "event_id": self.event_id}
        return {**fields, "data": self.data, "schema_version": self.schema_version}


class Log:
    """Appends events round by round; ``rows()`` feeds the fold, ``events()`` the store,
    ``jsonl()`` the CLI ingest."""

    def __init__(self, run: str = "r1", k: float = 0.5, seed: int = 0, theta_up: float | None = None) -> None:
        self.run = run
        self.round = 0
        self._events: list[EventIn | ForgedRow] = []
        self._failures: set[str] = set()  # recorded
        self._diagnosed: set[str] = set()
        self.add("run.started", config={"k": k} if theta_up is None else {"k": k, "theta_up": theta_up}, seed=seed)
        self.round = 1

    def add(self, event_type: str, **data: Any) -> Log:
        if event_type == "failure.recorded":
            self._failures.add(data.get("failure_id"))
        elif event_type in ("failure.diagnosed", "diagnosis.failed"):
            self._diagnosed.add(data.get("failure_id"))
        n = len(self._events)
        self._events.append(
            validate_event(
                {"type": event_type, "run": self.run, "round": self.round, "event_id": f"{self.run}-{n}", "data": data}
            )
        )
        return self

    def append(self, event: Event) -> Log:
        """A typed event (what a decider returns), in this log's current round."""
        return self.add(event.name, **event.model_dump(mode="json"))

    def commit(self, **summary: Any) -> Log:
        self.add("round.committed", **summary)
        self.round += 1
        return self

    # --- shorthands ------------------------------------------------------------------------
    def node(self, node_id: str, label: str | None = None) -> Log:
        return self.add("node.created", node_id=node_id, label=label or f"label of {node_id}")

    def cause(self, cause_id: str, node_id: str, description: str | None = None, failure: str | None = None) -> Log:
        """A new cause, with the evidence it follows from: its failure recorded and diagnosed
        as a new cause (unless the log holds them already)."""
        description = description or f"description of {cause_id}"
        failure = failure or f"f-{cause_id}-{self.round}"
        self.evidence(failure, error_cause=description)
        return self.add(
            "cause.created", cause_id=cause_id, node_id=node_id, description=description, failure_id=failure
        )

    def attribute(self, cause_id: str, failure: str, via: str = "recurrence", similarity: float | None = None) -> Log:
        """An attribution, after the evidence it follows from (see :meth:`evidence`)."""
        if via == "recurrence":
            self.evidence(failure, matched_cause=cause_id)
        else:
            self.evidence(failure, error_cause=f"an error like {cause_id}'s")
        return self.add("failure.attributed", failure_id=failure, cause_id=cause_id, via=via, similarity=similarity)

    def reactivate(self, cause_id: str, failure: str) -> Log:
        """Eq. 7: a Mastered cause recurs (the failure recorded and diagnosed as it), then the
        attribution."""
        self.evidence(failure, matched_cause=cause_id)
        self.add("cause.reactivated", cause_id=cause_id, failure_id=failure)
        return self.attribute(cause_id, failure)

    def evidence(self, failure: str, matched_cause: str | None = None, error_cause: str | None = None) -> Log:
        """``failure.recorded`` and ``failure.diagnosed`` of a failure this log has not recorded
        yet: what an attribution or a new cause follows from."""
        if failure not in self._failures:
            self.add("failure.recorded", failure_id=failure, question_id=f"q-{failure}", response="r", reference="x")
        if failure in self._diagnosed:
            return self
        return self.add(
            "failure.diagnosed", failure_id=failure, matched_cause=matched_cause, error_cause=error_cause, model="m"
        )

    def question(
        self, qid: str, p1: float, active: str | None = None, mastered: str | None = None, retained: bool = True
    ) -> Log:
        mode = "free" if active is None else ("stitched" if mastered else "targeted")
        self.add(
            "question.generated",
            question_id=qid,
            mode=mode,
            active_cause=active,
            mastered_cause=mastered,
            text=f"question {qid}",
        )
        return self.add(
            "question.scored", question_id=qid, n=12, p1=p1, p2=min(p1, 1 - p1), pseudo_label="1", retained=retained
        )

    def events(self) -> list[EventIn | ForgedRow]:
        return list(self._events)

    def rows(self) -> list[StoredEvent]:
        """The events as a read of the log gives them (seq from 1), without their stamps."""
        return [StoredEvent(i + 1, e.round, e.type, e.schema_version, e.data) for i, e in enumerate(self._events)]

    def jsonl(self) -> str:
        import json

        return "".join(json.dumps(e.line()) + "\n" for e in self._events)


def phase_figures(phase: PhaseCompleted) -> dict[str, Any]:
    """A phase's declared figures and the trainer's others in one mapping, as a test asserts on
    them (``steps`` is a field since version 3, ``loss`` stays in ``stats``)."""
    declared = phase.model_dump(include=set(PHASE_FIGURES), exclude_none=True)
    return {"seconds": phase.seconds, **declared, **(phase.stats or {})}


def stored(seq: int, rnd: int, type_: str, data: Any, version: int = 1) -> StoredEvent:
    """A stored row written out by hand (what a read gives of a row no database checked)."""
    return StoredEvent(seq, rnd, type_, version, data)
