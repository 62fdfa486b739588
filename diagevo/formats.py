"""Pydantic models of the line formats that other programs hand to diagevo (besides the event
log's own JSONL, whose model is :class:`diagevo.schemas.EventIn`):

- one line of ``diagevo round record`` (a generated question with its construction responses);
- one line of ``diagevo diagnose FAILURES.jsonl``;
- one line of verl's rollout dump (``diagevo diagnose --from-verl``).

A field of the wrong type is a one-line :class:`~diagevo.errors.BadInput` naming the line and
the field, never a ``TypeError`` further down.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError

from diagevo.errors import BadInput
from diagevo.parsing import Id, bad, jsonl_objects, validation_reason

M = TypeVar("M", bound=BaseModel)


class CandidateLine(BaseModel):
    """One line of ``round record``: the request's fields echoed back (its texts and messages
    may be carried along) with ``responses`` or ``answers``."""

    model_config = ConfigDict(extra="forbid")

    question_id: Id
    mode: Literal["free", "targeted", "stitched"]
    text: StrictStr | None = None
    question: StrictStr | None = None  # the request's name for the text
    active_cause: Id | None = None
    mastered_cause: Id | None = None
    node: Id | None = None
    responses: list[StrictStr | None] | None = None
    answers: list[StrictStr | None] | None = None
    # carried from the request, not used
    active_text: StrictStr | None = None
    mastered_text: StrictStr | None = None
    node_label: StrictStr | None = None
    messages: list[dict[str, Any]] | None = None


class FailureLine(BaseModel):
    """One line of FAILURES.jsonl."""

    model_config = ConfigDict(extra="forbid")

    failure_id: Id
    question_id: Id
    question: StrictStr
    pseudo_label: StrictStr
    response: StrictStr
    reference: StrictStr
    known_causes: list[Id] = Field(default_factory=list)


class RolloutLine(BaseModel):
    """One line of verl's rollout dump (``{step}.jsonl`` under ``trainer.rollout_data_dir``, as its
    trainer's ``_write_generations`` writes it): the decoded prompt and response, the ground truth,
    the score and the step; the reward extras beside them are kept (``question_id`` is read)."""

    model_config = ConfigDict(extra="allow")

    input: StrictStr
    output: StrictStr
    gts: StrictStr | None = None
    score: StrictFloat | StrictInt
    step: StrictInt
    question_id: StrictStr | None = None


def read_lines(text: str | Iterable[str], model: type[M], what: str = "") -> list[tuple[int, dict[str, Any], M]]:
    """``(line number, JSON object, model)`` of every non-blank line of a JSONL text (or of its
    lines, :func:`diagevo.parsing.file_lines`), parsed with a bounded depth
    and checked against ``model``; the first problem raises ``BadInput('line N: FIELD: reason')``."""
    prefix = f"{what} " if what else ""
    out: list[tuple[int, dict[str, Any], M]] = []
    for no, obj in jsonl_objects(text, what):
        try:
            out.append((no, obj, model.model_validate(obj)))
        except ValidationError as exc:
            raise bad(f"{prefix}line {no}", validation_reason(exc)) from None
    return out


__all__ = ["BadInput", "CandidateLine", "FailureLine", "RolloutLine", "read_lines"]
