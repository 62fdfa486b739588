"""Failures a caller hands to ``diagnose``, held against the log of their round.

The diagnostician reads the question, the pseudo-label and the causes of a failure it is given;
the log keeps those of the question the failure names. Where they differ the diagnosis would
explain a failure the log does not hold, so such a failure is refused before anything is
recorded or any model is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from diagevo.errors import BadInput
from diagevo.parsing import quoted
from diagevo.rounds import logged_questions

if TYPE_CHECKING:
    from diagevo.diagnosis.pipeline import FailureInput


def refuse_contradictions(store: Any, run: str, t: int, failures: Sequence[FailureInput]) -> None:
    """:class:`BadInput` naming the first given failure whose question text, pseudo-label or
    known causes differ from those round ``t`` recorded for its question (a question the round
    does not hold is left to :meth:`~diagevo.rounds.Round.record_failures`, which refuses it)."""
    named = sorted({f.question_id for f in failures})
    if not named:
        return
    logged = {q.question_id: q for q in logged_questions(store, run, t=t, ids=named)}
    for f in failures:
        q = logged.get(f.question_id)
        if q is None:
            continue
        for name, given, held in (
            ("question", f.question, q.text),
            ("pseudo_label", f.pseudo_label, q.pseudo_label),
            ("known_causes", tuple(f.known_causes), q.known_causes),
        ):
            if given != held:
                raise BadInput(
                    f"failure {quoted(f.failure_id, 60)}: its {name} {_shown(given)} is not the one round {t} "
                    f"recorded for question {quoted(f.question_id, 60)} ({_shown(held)})"
                )


def _shown(value: Any) -> str:
    """A text or a tuple of cause ids as a message shows it, bounded (``()`` for no causes)."""
    if not isinstance(value, tuple):
        return quoted(value, 60)
    text = repr(value)  # ids quoted, control characters escaped
    return text if len(text) <= 120 else f"{text[:120]}…"
