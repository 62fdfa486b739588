"""The failures a trainer records (one format for the API and ``diagevo diagnose``'s file), and
those whose diagnosis failed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NotRequired, TypedDict

from pydantic import ValidationError

from diagevo.catalog import (
    CauseCreated,
    DiagnosisFailed,
    Event,
    FailureAttributed,
    FailureDiagnosed,
    FailureRecorded,
)
from diagevo.rounds.protocol import ProtocolError
from diagevo.text.formats import Failure, Refusal
from diagevo.views.typed import Typed, of_type

FAILURE_FIELDS = ("failure_id", "question_id", "response", "reference")
"""What ``failure.recorded`` stores of a failure. The other fields of a ``diagevo diagnose``
FAILURES.jsonl line the round holds already (the question, its pseudo-label and the causes it was
generated for), so a line of that file is also a failure for :meth:`Round.record_failures`; they
are checked for their type, not stored."""


class FailureRecord(TypedDict):
    """One failed optimization response of a retained question, as :meth:`Round.record_failures`
    takes it and as a line of ``diagevo diagnose FAILURES.jsonl`` holds it (one format for both).

    ``failure_id`` names this failure within the run (unique across rounds); ``question_id`` the
    retained question of the round it failed; ``response`` the policy's failing response;
    ``reference`` a construction response that agrees with the pseudo-label (``Scored.reference``).
    ``question``, ``pseudo_label`` and ``known_causes`` may be given (the CLI's file has them)."""

    failure_id: str
    question_id: str
    response: str
    reference: str
    question: NotRequired[str]
    pseudo_label: NotRequired[str]
    known_causes: NotRequired[Sequence[str]]


def failure_record(f: Mapping[str, object]) -> dict[str, str]:
    """A failure as ``failure.recorded`` holds it: its four fields, checked as a line of
    FAILURES.jsonl is (``text.formats.Failure``; a failure without response or
    reference is refused), only the ids and texts the diagnostician needs."""
    if not isinstance(f, Mapping):
        raise ProtocolError(f"a failure is a mapping of {', '.join(FAILURE_FIELDS)}, not {type(f).__name__}")
    try:
        failure = Failure.model_validate(f)
    except ValidationError as exc:
        refusal = Refusal.of(exc, Failure)
        whose = "" if refusal.field == "failure_id" else f"failure {f.get('failure_id')!r}: "
        raise ProtocolError(f"{whose}{refusal}") from None
    return {name: getattr(failure, name) for name in FAILURE_FIELDS}


FAILURE_TYPES = (FailureRecorded, FailureDiagnosed, DiagnosisFailed)
DIAGNOSES: tuple[type[FailureDiagnosed | DiagnosisFailed], ...] = (FailureDiagnosed, DiagnosisFailed)
DIAGNOSIS_STATE_TYPES = (*FAILURE_TYPES, FailureAttributed, CauseCreated)
"""What :func:`diagnosis_state` reads of a round."""


def diagnosis_state(rows: Sequence[Typed]) -> tuple[list[str], list[str], int]:
    """Where a round's failures stand, from its ``rows``: those recorded with no diagnosis
    (sorted), those whose diagnosis failed with nothing decided since (:func:`failed_diagnoses`),
    and how many failures it has (recorded or diagnosed). One reading for the commit, which
    refuses while either stops it, and for ``next_step``, which then says ``"diagnose"``."""
    recorded = {f.failure_id for f in of_type(FailureRecorded, rows)}
    diagnosed = {e.failure_id for e in of_type(DIAGNOSES, rows) if e.failure_id}
    return sorted(recorded - diagnosed), failed_diagnoses(rows), len(recorded | diagnosed)


def failed_diagnoses(rows: Sequence[Typed]) -> list[str]:
    """The failures of a round's ``rows`` whose diagnosis failed and that nothing decided since
    (a failed diagnosis is asked again by the next diagnose): sorted ids."""
    failed = {e.failure_id for e in of_type(DiagnosisFailed, rows) if e.failure_id is not None}
    return sorted(failed - decided_failures(of_type(DECIDING, rows)))


DECIDING = (FailureAttributed, CauseCreated, FailureDiagnosed)
"""The events that may decide a failure (:func:`decided_failures`)."""


def decided_failures(events: Iterable[Event]) -> set[str]:
    """The failures ``events`` decide: attributed to a cause, revealing a new cause, or
    diagnosed as a non-skill slip (nothing follows it). A failed diagnosis decides nothing, so
    the next diagnose asks again: the one statement of the rule, for the commit's reading of a
    round and for a diagnosis resuming one."""
    decided: set[str] = set()
    for e in events:
        match e:
            case FailureAttributed(failure_id=fid) | CauseCreated(failure_id=str(fid)):
                decided.add(fid)
            case FailureDiagnosed(failure_id=fid, matched_cause=None, error_cause=None):
                decided.add(fid)  # a non-skill slip
    return decided
