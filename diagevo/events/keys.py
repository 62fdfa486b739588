"""The data fields the store treats apart (the ids events are looked up by, the long texts it
keeps beside the chained data), the schema version and the event ids. Kept apart from
``schemas`` and ``tables`` so that the store's read paths import neither pydantic's models nor
SQLModel."""

from __future__ import annotations

SCHEMA_VERSION = 1

# Fields whose (possibly long) text is named in ``data`` by its sha256 and kept in the event's
# ``texts`` column (before migration 0008: the content-addressed ``artifacts`` table).
TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "question.generated": ("text",),
    "question.scored": ("reference",),
    "failure.recorded": ("response", "reference"),
    "failure.diagnosed": ("raw",),
    "diagnosis.failed": ("raw",),
    "llm.called": ("raw",),
}


# Data fields that name a cause, a failure or a question: each is also a column of ``events``,
# filled by the store at append time (a string value, else NULL), with a partial index
# ``ix_events_<field>`` on (run_id, field) (migration 0004).
KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")
CAUSE_FIELDS = KEY_FIELDS[:4]


_KEY_SET = frozenset(KEY_FIELDS)
_STR_OR_NONE = frozenset({str, type(None)})
_NO_KEYS: tuple[str | None, ...] = (None,) * len(KEY_FIELDS)


def key_values(data: dict) -> tuple[str | None, ...]:
    """The key columns of an event with this data."""
    if _KEY_SET.isdisjoint(data):
        return _NO_KEYS
    values = tuple(map(data.get, KEY_FIELDS))
    if _STR_OR_NONE.issuperset(map(type, values)):
        return values
    return tuple(v if isinstance(v, str) else None for v in values)


# --- event ids ---------------------------------------------------------------------------------
# Every producer derives its event ids here, so that a retried or resumed step re-appends the same
# ids (a no-op) and a fork can re-stamp them. Two formats, both stored in users' logs:
# ``RUN/ROUND/KEY`` for the round protocol and the loop, ``dx-<sha256>`` for diagnosis decisions.


def event_id(run: str, round: int, *parts: object) -> str:
    """``RUN/ROUND/PART/...``: the id of the event ``parts`` of a round, the same on every retry."""
    return "/".join([run, str(round), *(str(p) for p in parts)])


def digest_event_id(run: str, round: int, *parts: object) -> str:
    """``dx-`` and 32 hex digits of sha256 over (run, round, parts): ids of diagnosis events,
    whose parts (failure ids, stages, call numbers) may be long or hold any character."""
    import hashlib

    key = "\x1f".join([run, str(round), *(str(p) for p in parts)])
    return "dx-" + hashlib.sha256(key.encode()).hexdigest()[:32]


def rebase_event_id(eid: str, source: str, new: str) -> str:
    """The id of a copy of event ``eid`` of run ``source`` in run ``new`` (a fork): the run part
    replaced, or ``NEW/fork/ID`` for an id that does not start with the source run."""
    prefix = f"{source}/"
    return new + "/" + eid[len(prefix):] if eid.startswith(prefix) else f"{new}/fork/{eid}"
