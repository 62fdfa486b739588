"""Pydantic models of the line formats other programs hand to diagevo: ``round record``'s lines,
``diagnose FAILURES.jsonl``'s and verl's rollout dump's (``diagnose --from-verl``). A field of
the wrong type is a one-line :class:`~diagevo.errors.BadInput` naming the line and the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from diagevo.text.parsing import bad, check_id, error_reason, loads_object, split_lines

M = TypeVar("M", bound=BaseModel)

Id = Annotated[StrictStr, AfterValidator(partial(check_id, field="the id"))]
"""A pydantic field type for ids read from outside (see :func:`~diagevo.text.parsing.check_id`)."""


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
    """One line of verl's rollout dump (``{step}.jsonl`` under ``trainer.rollout_data_dir``):
    ``input``, ``output``, ``gts`` (null without one), ``score`` and ``step``, and beside them
    ``uid`` or the reward's extra keys, kept (``question_id`` is read). A line without some of the
    five keys is refused naming all of them."""

    model_config = ConfigDict(extra="allow")

    input: StrictStr
    output: StrictStr
    gts: StrictStr | None
    score: StrictFloat | StrictInt
    step: StrictInt
    question_id: StrictStr | None = None

    @model_validator(mode="before")
    @classmethod
    def _every_key(cls, data: Any) -> Any:
        if isinstance(data, dict):
            missing = [k for k in ROLLOUT_KEYS if k not in data]
            if missing:
                raise ValueError(f"no {', '.join(missing)}: a line of verl's dump holds {', '.join(ROLLOUT_KEYS)}")
        return data


ROLLOUT_KEYS = ("input", "output", "gts", "score", "step")
"""The keys of every line of verl's rollout dump."""


def read_lines(text: str | Iterable[str], model: type[M], what: str = "") -> list[tuple[int, dict[str, Any], M]]:
    """``(line number, JSON object, model)`` of every non-blank line of a JSONL text (or of its
    lines, :func:`~diagevo.text.parsing.file_lines`'s, every one numbered from 1), checked against ``model``;
    the first problem raises ``BadInput('line N: FIELD: reason')``."""
    prefix = f"{what} " if what else ""
    out: list[tuple[int, dict[str, Any], M]] = []
    numbered = split_lines(text) if isinstance(text, str) else enumerate(text, start=1)
    for no, line in numbered:
        if not line.strip(" \t\r"):
            continue
        obj = loads_object(line, f"{prefix}line {no}")
        try:
            out.append((no, obj, model.model_validate(obj)))
        except ValidationError as exc:
            raise bad(f"{prefix}line {no}", error_reason(exc.errors(include_url=False)[0])) from None
    return out
