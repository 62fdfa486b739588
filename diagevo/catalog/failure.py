"""A failure as it goes from a trainer to the diagnostician: one record for what a trainer hands
:meth:`~diagevo.rounds.Round.record_failures`, a line of ``diagevo diagnose FAILURES.jsonl``,
verl's rollout dump read back, and what the diagnosis reads. The log stores its first four
fields as :class:`~diagevo.catalog.FailureRecorded` (:meth:`Failure.recorded`); the rest the
round holds already with the question, so a failure read back from the log takes them from there
(:meth:`Failure.from_log`).

Beside the event it is stored as because every side builds it: the trainer's loop, verl's glue
and the diagnosis import the catalog, and so may an example trainer."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from diagevo.catalog.events import FailureRecorded
from diagevo.text.fields import Id, Text


class Failure(BaseModel):
    """One failed optimization response of a retained question: what ``Round.record_failures``
    takes (a mapping of these keys is one too) and one line of ``diagevo diagnose
    FAILURES.jsonl`` (which names ``question`` and ``pseudo_label``). Built with keywords and
    checked as built: pydantic's ``ValidationError`` (a ``ValueError``) names a wrong field; a
    mapping handed to the round, or a line of the file, is refused in diagevo's terms
    (:class:`~diagevo.errors.BadInput` naming the failure, or the line, and the field)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_id: Id
    """Names this failure within the run, unique across rounds (``diagevo.catalog.failure_id``
    derives one from its question)."""
    question_id: Id
    """The retained question of the round it failed (``Scored.question_id``)."""
    response: Text
    """The policy's failing response."""
    reference: Text
    """A construction response that agrees with the pseudo-label (``Scored.reference``)."""
    question: StrictStr = Field(default="", description="a string")
    """The question's text (a FAILURES.jsonl line names it; the round holds it otherwise)."""
    pseudo_label: StrictStr = Field(default="", description="a string")
    """The question's majority answer (as ``question``)."""
    known_causes: tuple[Id, ...] = Field(default=(), description="a list of cause ids")
    """The ids of the causes the question was generated for (empty for free exploration)."""

    def unnamed(self) -> list[str]:
        """Which of ``question`` and ``pseudo_label`` it was built without: a failure diagnosed
        into a round that holds no question (one its trainer never opened, or ``diagevo
        diagnose``'s file, read before the round is) must name both."""
        return [name for name in ("question", "pseudo_label") if name not in self.model_fields_set]

    def recorded(self) -> FailureRecorded:
        """The ``failure.recorded`` event that stores it in the round (its question's fields are
        the round's already)."""
        return FailureRecorded(
            failure_id=self.failure_id, question_id=self.question_id, response=self.response, reference=self.reference
        )

    @classmethod
    def from_log(
        cls, event: FailureRecorded, *, question: str, pseudo_label: str, known_causes: Sequence[str]
    ) -> Failure:
        """The failure ``event`` stores, with its question's fields as the round recorded them:
        taken as the log holds them (checked when stored; an older log's are read as they are)."""
        return cls.model_construct(
            failure_id=event.failure_id,
            question_id=event.question_id,
            response=event.response,
            reference=event.reference,
            question=question,
            pseudo_label=pseudo_label,
            known_causes=tuple(known_causes),
        )
