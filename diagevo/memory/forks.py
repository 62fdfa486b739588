"""Where a ``run.forked`` stands: the one rule that makes a run a fork or a what-if.

A fork (:mod:`diagevo.fork`) and a what-if (:mod:`diagevo.whatif`) write ``run.forked`` right after
the copied commit of its round. Any role that may append can write one anywhere (the database
keeps the log whole, not its meaning), so the rule is asked by the counting rules
(:data:`~diagevo.memory.counting.RULES`, which ``memory verify`` and ingest check a log against)
and by every reader of a run's origin (:func:`~diagevo.views.forks.fork_marker`): one it refuses
makes no fork or what-if. Kept apart from the counting rules, whose module loads the config's
models, so that a read of the log does not load them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from diagevo.catalog import COUNTED, Event, RoundCommitted, RunForked

RECOUNTED = frozenset({"F", "epsilon_next", *COUNTED.values()})
"""The fields of a commit a what-if writes again (:meth:`diagevo.whatif._Deriving._commit`: the
counts, F and epsilon, of the memory it decided again); the rest of its copy is the source's."""
WHATIF_SETTINGS = ("memory.k", "memory.theta_up", "memory.state_updates")
"""The settings a what-if can change: those of the deciders that call no model."""

Copy = tuple[str, int, int, Mapping[str, Any]]
"""An event as a copy keeps it: its type, round, stored version and stored record."""


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


def copy_differs(copy: Copy, original: Copy | None, changed: Collection[str] = ()) -> bool:
    """Whether ``copy`` is no copy of ``original`` as a fork or a what-if writes one: another
    type, round or version, or another record but for the fields in ``changed`` (those a what-if
    writes again, :data:`RECOUNTED`; none for a fork, whose copy holds the source's record)."""
    if original is None or copy[:3] != original[:3]:
        return True
    mine, theirs = copy[3], original[3]
    kept = (mine.keys() | theirs.keys()) - set(changed)
    return any(k not in mine or k not in theirs or mine[k] != theirs[k] for k in kept)


def whatif_config(record: Mapping[str, Any], settings: Mapping[str, str]) -> dict[str, Any]:
    """A stored config record as a what-if under ``settings`` stores it: checked as the method's
    config, the settings applied (the record as it was, with none). The config's models are
    loaded here, where a what-if is made or its marker read, not by every read of the log; a
    record or a value the config refuses is its :class:`~diagevo.config.errors.ConfigError`."""
    if not settings:
        return dict(record)
    from diagevo.config.sections import config_from_record

    return config_from_record(record).overridden([f"{k}={v}" for k, v in settings.items()]).redacted()
