"""Pydantic models of the line formats other programs hand to diagevo: ``round record``'s lines
and verl's rollout dump's (``diagnose --from-verl``); a line of ``diagnose FAILURES.jsonl`` is a
:class:`~diagevo.catalog.failure.Failure`, built from the field types here. A field of the wrong type is
a one-line :class:`~diagevo.errors.BadInput` naming the line and the field.

The same models check what a Python caller hands the round (a :class:`~diagevo.rounds.Candidate`,
a failure for ``Round.record_failures``): one statement of each field, read two ways. A file's
line is refused in pydantic's words (:func:`read_lines`); a Python caller gets a
:class:`FieldRefusal`, each field's ``description`` saying what it must be.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from diagevo.text.fields import Id
from diagevo.text.parsing import bad, error_reason, loads_object, one_line, quoted, split_lines

M = TypeVar("M", bound=BaseModel)

OptionalId = Annotated[Id | None, Field(description="a string or null")]
Texts = Annotated[list[StrictStr | None] | None, Field(description="a list of strings")]


class CandidateLine(BaseModel):
    """One line of ``round record``: the request's fields echoed back (its texts and messages
    may be carried along) with ``responses`` or ``answers``."""

    model_config = ConfigDict(extra="forbid")

    question_id: Id
    mode: Annotated[Literal["free", "targeted", "stitched"], Field(description="free, targeted or stitched")]
    text: StrictStr | None = Field(None, description="a non-empty string")
    question: StrictStr | None = Field(None, description="a non-empty string")  # the request's name for the text
    active_cause: OptionalId = None
    mastered_cause: OptionalId = None
    node: OptionalId = None
    responses: Texts = None
    answers: Texts = None
    # the shared-error check's (filter.shared_error_check = "variants"): the answers to each rewording
    variant_answers: Annotated[
        list[list[StrictStr | None]] | None, Field(description="a list of lists of strings (one per rewording)")
    ] = None
    # carried from the request, not used
    active_text: StrictStr | None = None
    mastered_text: StrictStr | None = None
    node_label: StrictStr | None = None
    messages: list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _has_text(self) -> CandidateLine:
        if not self.the_text.strip():
            raise ValueError("text must be a non-empty string")
        return self

    @property
    def the_text(self) -> str:
        """The question's text, under either name ("" without one)."""
        return self.text if self.text is not None else self.question or ""


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


@dataclass(frozen=True)
class FieldRefusal:
    """The first problem of a Python caller's values, as data its caller words: the ``field``
    (None: the whole), what it must be (its ``description``, with the model's reason where it gives
    one, as for an id; None: no such field), the ``value`` given, whether an item of it is at fault."""

    field: str | None
    wanted: str | None
    value: object
    item: bool = False

    @classmethod
    def of(cls, exc: ValidationError, model: type[BaseModel]) -> FieldRefusal:
        """The first error of ``exc``, raised validating ``model``."""
        err = exc.errors(include_url=False)[0]
        msg = str(err["msg"]).removeprefix("Value error, ")
        if not err["loc"]:
            return cls(None, msg, err.get("input"))
        name = str(err["loc"][0])
        if err["type"] == "extra_forbidden":
            return cls(name, None, err.get("input"))
        reason = f" ({msg})" if err["type"] == "value_error" else ""
        return cls(name, f"{model.model_fields[name].description}{reason}", err.get("input"), len(err["loc"]) > 1)

    def __str__(self) -> str:
        """In the terms of a JSON object: ``FIELD must be WHAT`` or ``unknown field 'FIELD'``."""
        if self.field is None:
            return str(self.wanted)
        if self.wanted is None:
            return f"unknown field {self.field!r}"
        return one_line(f"{self.field} must be {self.wanted}")

    def in_python(self, owner: str) -> str:
        """In the terms of a Python call making an ``owner``: ``None`` for null, a sequence for a
        list, and the value given."""
        if self.field is None or self.wanted is None:
            return f"{owner} {self}"
        wanted = self.wanted.replace("null", "None").replace("a list of", "a sequence of")
        must = f"hold {wanted.removeprefix('a sequence of ')}" if self.item else f"be {wanted}"
        return one_line(f"{owner} {self.field} must {must}, not {quoted(self.value, 40)}")


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
