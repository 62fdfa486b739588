"""The data fields by which events are looked up, and their SQL expressions (kept apart from
``tables`` so that the store's hot paths do not import SQLModel)."""

from __future__ import annotations

# Data fields that name a cause, a failure or a question: each is also a column of ``events``,
# filled by the store at append time (a string value, else NULL), with a partial index
# ``ix_events_<field>`` on (run_id, field) (migration 0004).
KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")
CAUSE_FIELDS = KEY_FIELDS[:4]


def key_values(data: dict) -> tuple[str | None, ...]:
    """The key columns of an event with this data."""
    out = []
    for f in KEY_FIELDS:
        v = data.get(f)
        out.append(v if isinstance(v, str) else None)
    return tuple(out)


# The condition of the partial index ``ix_events_retained`` (migration 0003), spelled exactly so.
RETAINED_CONDITION = {
    "sqlite": "type = 'question.scored' AND json_extract(data, '$.retained') = 1",
    "postgresql": "type = 'question.scored' AND (data::json ->> 'retained') = 'true'",
}
