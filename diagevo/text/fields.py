"""The pydantic field types of what other programs hand diagevo: an id and a text that says
something. Apart from the line formats (:mod:`diagevo.text.formats`) because the catalog's
failure record uses them, and the catalog is loaded by every command: these cost no model."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from pydantic import AfterValidator, Field, StrictStr

from diagevo.text.parsing import check_id

Id = Annotated[StrictStr, AfterValidator(partial(check_id, field="the id")), Field(description="a non-empty string")]
"""A pydantic field type for ids read from outside (see :func:`~diagevo.text.parsing.check_id`)."""


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("only white space")
    return value


Text = Annotated[StrictStr, AfterValidator(_not_blank), Field(description="a non-empty string")]
"""A text that must say something (a question, a response)."""
