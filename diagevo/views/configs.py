"""A stored config its readers cannot use, and the way back.

The log is append-only: a ``run.configured`` whose config no longer validates (written by an
older diagevo, which let ``inf`` through, or by a raw write) stays. Its rounds before it are
intact, so the way back is a fork from the last round committed before it, which copies the log
up to there and leaves the bad config behind. Every reader says so in one line
(:func:`unusable_config`), and ``memory verify`` names each such event (:func:`config_problems`).
"""

from __future__ import annotations

from collections.abc import Mapping

from diagevo.catalog import CATALOG, RoundCommitted, RunConfigured, RunStarted
from diagevo.errors import BadInput, Call, fork_call
from diagevo.log import EventReader, StoredEvent
from diagevo.memory.state import Refusal

CONFIG_TYPES = (RunStarted, RunConfigured)


def config_fault(event: StoredEvent) -> str | None:
    """Why the config of this ``run.started`` or ``run.configured`` cannot be used, or None."""
    from diagevo.config.sections import config_from_record  # the config's models: for a config met alone

    match event.event:
        case RunStarted(config=Mapping() as record) | RunConfigured(config=Mapping() as record):
            try:
                config_from_record(record)
            except BadInput as exc:
                return str(exc)
            return None
    return "its config is not a table"  # or none: a row written raw


def config_refusals(store: EventReader, run: str) -> list[Refusal]:
    """Each ``run.configured`` of ``run`` whose config cannot be used, in log order: the config
    rule's part of the run's admission (:mod:`diagevo.views.admission`), which a copy of its run (a
    fork, a what-if) leaves behind, the config before it in force. A ``run.started`` is never
    refused: its run has no config without it (its readers refuse the run, :func:`unusable_config`)."""
    refused = []
    for event in store.rows(run, types=(RunConfigured,)):
        fault = config_fault(event)
        if fault is not None:
            refused.append(Refusal(event.seq, event.type, f"{event.type}'s config cannot be used: {fault}"))
    return refused


def recovery(store: EventReader, run: str, event: StoredEvent) -> tuple[str, Call | None]:
    """How to get past a bad event (a config no reader can use, an event the fold or a rule
    refuses): the words, and the fork that does it, from the last round committed before it
    (None when no round is: nothing before it to fork)."""
    before = [r.round for r in store.rows(run, types=(RoundCommitted,), upto_seq=event.seq - 1, data=False)]
    if CATALOG.get(event.type) is RunStarted or not before:
        return "the run has no round before it to fork: start a new run", None
    last = before[-1]
    return f"its rounds through {last} are intact: fork it from round {last}", fork_call(run, last, f"{run}-r{last}")


def unusable_config(store: EventReader, run: str, event: StoredEvent, fault: str) -> BadInput:
    """The one line a reader says of a run whose config in force cannot be used."""
    how, fork = recovery(store, run, event)
    what = f"the config of run {run!r} at seq {event.seq} ({event.type} of round {event.round})"
    return BadInput(f"{what} cannot be used: {fault}; {how}", fork, aside=True, about=run)


def config_problems(store: EventReader, run: str) -> list[tuple[int, str]]:
    """(seq, line) for each stored config of the run that cannot be used (``memory verify``)."""
    out: list[tuple[int, str]] = []
    for e in store.read(run, types=CONFIG_TYPES):
        fault = config_fault(e)
        if fault is not None:
            how, _ = recovery(store, run, e)
            line = f"seq {e.seq}: {e.type}'s config cannot be used: {fault}; {how}"
            out.append((e.seq, line))
    return out
