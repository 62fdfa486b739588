"""The failures a trainer records (:class:`~diagevo.catalog.failure.Failure`, one record for the API and
``diagevo diagnose``'s file), and those whose diagnosis failed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import ValidationError

from diagevo.catalog import (
    BatchWithdrawn,
    CauseCreated,
    DiagnosisFailed,
    Event,
    FailureAttributed,
    FailureDiagnosed,
    FailureRecorded,
    InvalidEvent,
    Typed,
    of_type,
)
from diagevo.catalog.failure import Failure
from diagevo.log import StoredEvent
from diagevo.rounds.protocol import ProtocolError
from diagevo.text.formats import FieldRefusal
from diagevo.views.withdrawn import Withdrawn

FAILURE_FIELDS = ("failure_id", "question_id", "response", "reference")
"""What ``failure.recorded`` stores of a failure (:meth:`Failure.recorded`). The other fields of a
:class:`Failure` the round holds already with the question, so a line of ``diagevo diagnose``'s
FAILURES.jsonl is also a failure for :meth:`Round.record_failures`; they are checked for their
type, not stored."""


def given_failure(f: Failure | Mapping[str, object]) -> Failure:
    """A failure a trainer hands the round: a :class:`Failure` as it is, a mapping of its fields
    (a line of FAILURES.jsonl as it is) checked into one; one whose fields are wrong is a
    :class:`ProtocolError` naming the failure and the field."""
    if isinstance(f, Failure):
        return f
    if not isinstance(f, Mapping):
        raise ProtocolError(f"a failure is a mapping of {', '.join(FAILURE_FIELDS)}, not {type(f).__name__}")
    try:
        return Failure.model_validate(f)
    except ValidationError as exc:
        refusal = FieldRefusal.of(exc, Failure)
        whose = "" if refusal.field == "failure_id" else f"failure {f.get('failure_id')!r}: "
        raise ProtocolError(f"{whose}{refusal}") from None


def failure_event(f: Failure | Mapping[str, object]) -> FailureRecorded:
    """The ``failure.recorded`` that stores a failure a trainer hands the round
    (:func:`given_failure`); one the event refuses is a :class:`ProtocolError` naming it."""
    failure = given_failure(f)
    try:
        return failure.recorded()
    except InvalidEvent as exc:
        raise ProtocolError(f"failure {failure.failure_id!r}: {exc}") from None


FAILURE_TYPES = (FailureRecorded, FailureDiagnosed, DiagnosisFailed)
DIAGNOSES: tuple[type[FailureDiagnosed | DiagnosisFailed], ...] = (FailureDiagnosed, DiagnosisFailed)
DIAGNOSIS_STATE_TYPES = (*FAILURE_TYPES, FailureAttributed, CauseCreated, BatchWithdrawn)
"""What :func:`diagnosis_state` reads of a round."""


def diagnosis_state(rows: Sequence[StoredEvent], withdrawn: Withdrawn) -> tuple[list[str], list[str], int]:
    """Where a round's failures stand, from its ``rows``: those recorded with no diagnosis
    (sorted), those whose diagnosis failed with nothing decided since (:func:`failed_diagnoses`),
    and how many failures it has (recorded or diagnosed). One reading for the commit, which
    refuses while either stops it, and for ``next_step``, which then says ``"diagnose"``. A
    failure a withdrawal took back is not the round's."""
    rows = list(withdrawn.standing(rows))
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
