"""The data fields by which events are looked up, and their SQL expressions (kept apart from
``tables`` so that the store's hot paths do not import SQLModel)."""

from __future__ import annotations

# Data fields that name a cause, a failure or a question: each has a partial expression index
# ``ix_events_<field>`` on (run_id, <the field extracted from data>) (migration 0003).
KEY_FIELDS = ("cause_id", "active_cause", "mastered_cause", "matched_cause", "failure_id", "question_id")
CAUSE_FIELDS = KEY_FIELDS[:4]


def key_expr(dialect: str, field: str) -> str:
    """The SQL expression of ``field`` exactly as the index declares it (so queries use it)."""
    if field not in KEY_FIELDS:
        raise ValueError(f"no index on data field {field!r}")
    if dialect == "postgresql":
        return f"(data::json ->> '{field}')"
    return f"json_extract(data, '$.{field}')"


# The condition of the partial index ``ix_events_retained`` (migration 0003), spelled exactly so.
RETAINED_CONDITION = {
    "sqlite": "type = 'question.scored' AND json_extract(data, '$.retained') = 1",
    "postgresql": "type = 'question.scored' AND (data::json ->> 'retained') = 'true'",
}
