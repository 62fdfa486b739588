"""JSON Schemas of the four diagnostician replies, for servers that constrain decoding to them.

An OpenAI-compatible server with structured outputs (``response_format`` of type ``json_schema``:
vLLM's server, most providers) decodes only text the schema admits, so even a weak model's reply
is one JSON object with the right keys, ids drawn from those supplied in the prompt, and phrases
of the right length. They mirror the reply models and checks of :mod:`diagevo.diagnosis.parsing`,
which still validate every reply: a schema narrows what a model can write, it does not replace
the check.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

NULL: dict[str, Any] = {"type": "null"}


def _ids(ids: Collection[str]) -> dict[str, Any]:
    """One of the supplied ids."""
    return {"type": "string", "enum": sorted(ids)}


def _phrase(min_words: int, max_words: int) -> dict[str, Any]:
    """A phrase of ``min_words``-``max_words`` words (single spaces)."""
    return {"type": "string", "pattern": f"^[^ ]+( [^ ]+){{{min_words - 1},{max_words - 1}}}$"}


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
    new = _object({"matched_cause_id": NULL, "error_cause": {"anyOf": [_phrase(min_words, max_words), NULL]}})
    if not supplied:
        return _named("extraction", new)
    return _named("extraction", _object({"matched_cause_id": _ids(supplied), "error_cause": NULL}), new)


def dedup(candidates: Collection[str]) -> dict[str, Any]:
    """A duplicate names one of the candidates; otherwise no id."""
    distinct = _object({"duplicate": _const(False), "matched_cause_id": NULL})
    if not candidates:
        return _named("deduplication", distinct)
    duplicate = _object({"duplicate": _const(True), "matched_cause_id": _ids(candidates)})
    return _named("deduplication", duplicate, distinct)


def assignment(shortlist: Collection[str], min_words: int, max_words: int) -> dict[str, Any]:
    """Exactly one of a new node's label and a shortlisted node's id."""
    label = _phrase(min_words, max_words)
    new = _object({"create_new_node": _const(True), "new_node_label": label, "assigned_node": NULL})
    if not shortlist:
        return _named("assignment", new)
    existing = _object({"create_new_node": _const(False), "new_node_label": NULL, "assigned_node": _ids(shortlist)})
    return _named("assignment", new, existing)


def consolidation(min_words: int, max_words: int) -> dict[str, Any]:
    """A merge names its label; no merge, no label."""
    return _named(
        "consolidation",
        _object({"merge": _const(True), "merged_label": _phrase(min_words, max_words)}),
        _object({"merge": _const(False), "merged_label": NULL}),
    )


_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "string": (str,), "boolean": (bool,), "null": (type(None),)}


def violation(value: Any, schema: dict[str, Any], where: str = "reply") -> str | None:
    """Why ``value`` does not fit ``schema`` (one line), or None when it fits. Knows the keywords
    the schemas above use: ``anyOf``, ``type``, ``enum``, ``pattern``, ``properties``,
    ``required`` and ``additionalProperties``; ``diagevo doctor`` uses it to tell a reply a server
    constrained from one it did not."""
    if "anyOf" in schema:
        each = [violation(value, option, where) for option in schema["anyOf"]]
        if all(each):
            return f"{where}: fits none of {len(each)} alternatives (first: {each[0]})"
        return None
    kind = schema.get("type")
    if kind is not None and not isinstance(value, _TYPES[kind]):
        return f"{where}: {json.dumps(value)[:60]} is not of type {kind}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {json.dumps(value)[:60]} is not one of {json.dumps(schema['enum'])[:80]}"
    if "pattern" in schema and not re.search(schema["pattern"], value):
        return f"{where}: {json.dumps(value)[:60]} does not match {schema['pattern']}"
    if kind == "object":
        properties = schema.get("properties", {})
        lacking = [k for k in schema.get("required", ()) if k not in value]
        if lacking:
            return f"{where}: field {lacking[0]} is missing"
        extra = [k for k in value if k not in properties]
        if extra and schema.get("additionalProperties") is False:
            return f"{where}: field {extra[0]} is not in the schema"
        for key, sub in properties.items():
            said = violation(value[key], sub, f"{where}.{key}") if key in value else None
            if said:
                return said
    return None


def response_format(json_schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` of a chat completion request constrained to ``json_schema``."""
    return {"type": "json_schema", "json_schema": json_schema}
