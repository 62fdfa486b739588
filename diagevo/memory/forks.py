"""Where a ``run.forked`` stands: the one rule that makes a run a fork or a what-if.

A fork (:mod:`diagevo.fork`) and a what-if (:mod:`diagevo.whatif`) write ``run.forked`` right after
the copied commit of its round. Any role that may append can write one anywhere (the database
keeps the log whole, not its meaning), so the rule is asked by the counting rules
(:data:`~diagevo.memory.counting.RULES`, which ``memory verify`` and ingest check a log against)
and by every reader of a run's origin (:func:`~diagevo.views.runs.fork_marker`): one it refuses
makes no fork or what-if. Kept apart from the counting rules, whose module loads the config's
models, so that a read of the log does not load them.
"""

from __future__ import annotations

from diagevo.catalog import Event, RoundCommitted, RunForked


def fork_opening(rnd: int, ev: RunForked, last: tuple[int, type[Event]] | None) -> tuple[str, str] | None:
    """(rule, reason) when ``run.forked`` of round ``rnd`` does not open a fork or a what-if right
    after the copied commit of its round (``last``: the round and type of the run's event before
    it), else None."""
    at = ev.source_round
    if at != rnd or last is None or last[0] != rnd or last[1] not in (RoundCommitted, RunForked):
        return "run forked at its opening", (
            f"run.forked (source round {at!r}) does not follow the commit of round {rnd}: only a fork or a "
            "what-if writes it, right after the rounds it copies"
        )
    return None
