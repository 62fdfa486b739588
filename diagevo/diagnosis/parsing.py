"""Reading a diagnostician's reply: lenient JSON extraction, strict validation.

Lenient about the wrapping (code fences, ``<think>`` blocks, prose around the object), strict
about the content: every id must be one that was supplied in that very prompt, phrases must be
10-20 words of at most ``limits.phrase_bytes`` in all (:func:`phrase_problem`), and the routing
fields must be consistent. A violation raises :class:`ReplyError` whose one-line message is what
the re-ask tells the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from diagevo.diagnosis.interface import Assignment, Consolidation, Dedup, Extraction
from diagevo.errors import BadInput
from diagevo.schemas import current_limits, cut_text
from diagevo.text.parsing import MAX_DEPTH, depth, loads, quoted

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_NULLS = {"", "null", "none", "n/a"}


class ReplyError(BadInput):
    """The reply cannot be used; the message says why in one line."""


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: the whole text, a fenced block, or embedded in prose.
    Parsed with a bounded depth (:mod:`diagevo.text.parsing`): a reply nested too deep is refused."""
    text = _THINK.sub("", text or "").strip()
    if not text:
        raise ReplyError("the reply is empty")
    candidates = [text, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for cand in candidates:
        try:
            obj = loads(cand, "the reply")
        except BadInput as exc:
            if "nested deeper" in str(exc):
                raise ReplyError(str(exc)) from None
            continue
        if isinstance(obj, dict):
            return obj
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        except ValueError as exc:  # an integer past the interpreter's digit limit: no JSON to use
            raise ReplyError(f"the reply: {' '.join(str(exc).split(';')[0].split())}") from None
        except RecursionError:  # the C decoder stops cleanly at the interpreter's limit
            raise ReplyError(f"the reply: JSON nested deeper than {MAX_DEPTH} levels") from None
        if isinstance(obj, dict):
            if depth(obj) > MAX_DEPTH:
                raise ReplyError(f"the reply: JSON nested deeper than {MAX_DEPTH} levels")
            return obj
    raise ReplyError("the reply contains no JSON object")


def _opt_str(v: Any) -> str | None:
    """``null``, ``"null"`` and ``""`` all mean no value; numbers are read as their text."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise ValueError("must be a string or null")
    if isinstance(v, int) and abs(v) >= 10**30:
        raise ValueError("must be a string or null, not a number of more than 30 digits")
    s = str(v).strip()
    if "\x00" in s:
        raise ValueError("contains a NUL character (U+0000)")
    return None if s.lower() in _NULLS else s


OptStr = Annotated[str | None, BeforeValidator(_opt_str)]


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ExtractionReply(_Reply):
    matched_cause_id: OptStr = None
    error_cause: OptStr = None


class DedupReply(_Reply):
    duplicate: bool
    matched_cause_id: OptStr = None


class AssignmentReply(_Reply):
    create_new_node: bool | None = None
    new_node_label: OptStr = None
    assigned_node: OptStr = None


class ConsolidationReply(_Reply):
    merge: bool
    merged_label: OptStr = None


def _model(cls: type[_Reply], raw: str) -> Any:
    obj = extract_json(raw)
    try:
        return cls.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "reply"
        msg = "field is missing" if err["type"] == "missing" else err["msg"]
        raise ReplyError(f"{loc}: {msg}") from None


def phrase_problem(field: str, text: str) -> str | None:
    """Why ``text`` is too long to be a diagnostician's phrase (a cause, a node label), or None.
    The bound is the one the log stores a phrase up to (``limits.phrase_bytes``,
    :func:`~diagevo.schemas.cut_text`): a phrase past it is refused before it is embedded,
    compared or shown in a prompt, never decided on whole and stored cut."""
    limit = current_limits().phrase_bytes
    _kept, whole = cut_text(text, limit)
    if whole is None:
        return None
    return f"{field} is {whole['bytes']:,} bytes long: a phrase is at most {limit:,} (limits.phrase_bytes)"


def check_phrase(field: str, text: str, min_words: int, max_words: int) -> str:
    problem = phrase_problem(field, text)
    if problem is not None:
        raise ReplyError(problem)
    text = " ".join(text.split())
    n = len(text.split())
    if not min_words <= n <= max_words:
        raise ReplyError(f"{field} must be a {min_words}-{max_words} word phrase, got {n} words")
    return text


def _supplied(field: str, value: str, ids: Collection[str], what: str) -> str:
    if value not in ids:
        shown = ", ".join(sorted(ids)) or "none"
        raise ReplyError(f"{field} {quoted(value)} is not one of the {what} supplied ({shown})")
    return value


def parse_extraction(raw: str, supplied: Collection[str], min_words: int = 10, max_words: int = 20) -> Extraction:
    r = _model(ExtractionReply, raw)
    if not r.model_fields_set:  # "{}" or unrelated keys: not an answer, not a non-skill verdict
        raise ReplyError("the reply has neither matched_cause_id nor error_cause")
    if r.matched_cause_id is not None:
        # a match skips the later stages, so a stray error_cause next to it is ignored
        return Extraction(_supplied("matched_cause_id", r.matched_cause_id, supplied, "known cause ids"), None)
    if r.error_cause is None:
        return Extraction(None, None)
    return Extraction(None, check_phrase("error_cause", r.error_cause, min_words, max_words))


def parse_dedup(raw: str, candidates: Collection[str]) -> Dedup:
    r = _model(DedupReply, raw)
    if not r.duplicate:
        return Dedup(False, None)
    if r.matched_cause_id is None:
        raise ReplyError("duplicate is true but matched_cause_id is null")
    return Dedup(True, _supplied("matched_cause_id", r.matched_cause_id, candidates, "candidate cause ids"))


def parse_assignment(raw: str, shortlist: Collection[str], min_words: int = 10, max_words: int = 20) -> Assignment:
    r = _model(AssignmentReply, raw)
    if (r.new_node_label is None) == (r.assigned_node is None):
        raise ReplyError("exactly one of new_node_label and assigned_node must be non-null")
    if r.new_node_label is not None:
        if r.create_new_node is False:
            raise ReplyError("create_new_node is false but new_node_label is set")
        return Assignment(True, check_phrase("new_node_label", r.new_node_label, min_words, max_words), None)
    if r.create_new_node is True:
        raise ReplyError("create_new_node is true but assigned_node is set")
    return Assignment(False, None, _supplied("assigned_node", r.assigned_node, shortlist, "shortlisted node ids"))


def parse_consolidation(raw: str, min_words: int = 10, max_words: int = 20) -> Consolidation:
    r = _model(ConsolidationReply, raw)
    if not r.merge:
        return Consolidation(False, None)
    if r.merged_label is None:
        raise ReplyError("merge is true but merged_label is null")
    return Consolidation(True, check_phrase("merged_label", r.merged_label, min_words, max_words))
