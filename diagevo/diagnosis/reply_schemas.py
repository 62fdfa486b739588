"""JSON Schemas of the four diagnostician replies, for servers that constrain decoding to them.

An OpenAI-compatible server with structured outputs (``response_format`` of type ``json_schema``:
vLLM's server, most providers) decodes only text the schema admits, so even a weak model's reply
is one JSON object with the right keys, ids drawn from those supplied in the prompt, and phrases
of the right length. They mirror the reply models and checks of :mod:`diagevo.diagnosis.parsing`,
which still validate every reply: a schema narrows what a model can write, it does not replace
the check.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

NULL: dict[str, Any] = {"type": "null"}


def _ids(ids: Collection[str]) -> dict[str, Any]:
    """One of the supplied ids, or null."""
    return {"anyOf": [{"type": "string", "enum": sorted(ids)}, NULL]} if ids else NULL


def _phrase(min_words: int, max_words: int) -> dict[str, Any]:
    """A phrase of ``min_words``-``max_words`` words (single spaces), or null."""
    words = {"type": "string", "pattern": f"^[^ ]+( [^ ]+){{{min_words - 1},{max_words - 1}}}$"}
    return {"anyOf": [words, NULL]}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _named(name: str, *variants: dict[str, Any]) -> dict[str, Any]:
    """The ``json_schema`` of a request: one reply shape, or any of several (the parser's rules
    that tie one field to another, e.g. a duplicate names the cause it duplicates)."""
    schema = variants[0] if len(variants) == 1 else {"anyOf": list(variants)}
    return {"name": name, "schema": schema, "strict": True}


def _const(value: bool) -> dict[str, Any]:
    return {"type": "boolean", "enum": [value]}


def extraction(supplied: Collection[str], min_words: int, max_words: int) -> dict[str, Any]:
    """A known cause's id (and nothing else), or a new cause's phrase, or null for a non-skill slip."""
    new = _object({"matched_cause_id": NULL, "error_cause": _phrase(min_words, max_words)})
    if not supplied:
        return _named("extraction", new)
    return _named("extraction", _object({"matched_cause_id": _ids(supplied)["anyOf"][0], "error_cause": NULL}), new)


def dedup(candidates: Collection[str]) -> dict[str, Any]:
    """A duplicate names one of the candidates; otherwise no id."""
    distinct = _object({"duplicate": _const(False), "matched_cause_id": NULL})
    if not candidates:
        return _named("deduplication", distinct)
    return _named(
        "deduplication",
        _object({"duplicate": _const(True), "matched_cause_id": _ids(candidates)["anyOf"][0]}),
        distinct,
    )


def assignment(shortlist: Collection[str], min_words: int, max_words: int) -> dict[str, Any]:
    """Exactly one of a new node's label and a shortlisted node's id."""
    new = _object(
        {
            "create_new_node": _const(True),
            "new_node_label": _phrase(min_words, max_words)["anyOf"][0],
            "assigned_node": NULL,
        }
    )
    if not shortlist:
        return _named("assignment", new)
    existing = _object(
        {"create_new_node": _const(False), "new_node_label": NULL, "assigned_node": _ids(shortlist)["anyOf"][0]}
    )
    return _named("assignment", new, existing)


def consolidation(min_words: int, max_words: int) -> dict[str, Any]:
    """A merge names its label; no merge, no label."""
    return _named(
        "consolidation",
        _object({"merge": _const(True), "merged_label": _phrase(min_words, max_words)["anyOf"][0]}),
        _object({"merge": _const(False), "merged_label": NULL}),
    )


def response_format(json_schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` of a chat completion request constrained to ``json_schema``."""
    return {"type": "json_schema", "json_schema": json_schema}
