"""Event ids and failure ids. Every producer derives its event ids here, so that a retried or
resumed step re-appends the same ids (a no-op) and a fork can re-stamp them. Two formats, both
stored in users' logs: ``RUN/ROUND/KEY`` for the round protocol and the loop, ``dx-<sha256>`` for
diagnosis decisions. Failure ids too (:func:`failure_id`): a trainer that records the same
failures again must name them as it did the first time."""

from __future__ import annotations

import hashlib


def event_id(run: str, t: int, *parts: object) -> str:
    """``RUN/ROUND/PART/...``: the id of the event ``parts`` of a round, the same on every retry."""
    return "/".join([run, str(t), *(str(p) for p in parts)])


def digest_event_id(run: str, t: int, *parts: object) -> str:
    """``dx-`` and 32 hex digits of sha256 over (run, round, parts): ids of diagnosis events,
    whose parts (failure ids, stages, call numbers) may be long or hold any character."""
    key = "\x1f".join([run, str(t), *(str(p) for p in parts)])
    return "dx-" + hashlib.sha256(key.encode()).hexdigest()[:32]


def rebase_event_id(eid: str, source: str, new: str) -> str:
    """The id of a copy of event ``eid`` of run ``source`` in run ``new`` (a fork): the run part
    replaced, or ``NEW/fork/ID`` for an id that does not start with the source run."""
    prefix = f"{source}/"
    return new + "/" + eid[len(prefix) :] if eid.startswith(prefix) else f"{new}/fork/{eid}"


def source_event_id(eid: str, source: str, new: str) -> str:
    """The id in run ``source`` of the event that :func:`rebase_event_id` copied as ``eid`` into
    run ``new`` (an id the copy did not make comes back as itself, or with the run part replaced)."""
    if eid.startswith(f"{new}/fork/"):
        return eid[len(f"{new}/fork/") :]
    return source + eid[len(new) :] if eid.startswith(f"{new}/") else eid


def failure_id(question_id: str, *parts: object) -> str:
    """``QUESTION-PART-...``: the id of a failed response of question ``question_id``, ``parts``
    saying which (its place among the question's responses; for verl's dump, ``sSTEP`` and its
    place in that step). Named by its question, a failure id is unique in the run as question
    ids are (the round's requests name their round), and the same on every retry of the step."""
    return "-".join([question_id, *(str(p) for p in parts)])
