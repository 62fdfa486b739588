"""The event types' names alone, in the catalog's order: for what must not load the event
classes (and pydantic with them), the CLI's help above all. Each is the ``name`` its class
declares; ``tests/test_event_classes.py`` holds the two to each other."""

from __future__ import annotations

NAMES = (
    "run.started",
    "run.configured",
    "round.started",
    "question.generated",
    "question.scored",
    "promotions.decided",
    "cause.promoted",
    "failure.recorded",
    "failure.diagnosed",
    "diagnosis.failed",
    "failure.attributed",
    "cause.reactivated",
    "node.created",
    "cause.created",
    "nodes.merged",
    "round.committed",
    "phase.completed",
    "checkpoint.written",
    "llm.called",
    "eval.recorded",
    "checkpoint.selected",
    "run.forked",
    "run.tagged",
    "run.noted",
    "metrics.recorded",
    "train.step",
    "checkpoint.pruned",
)
