"""A run's fork marker as the rules take it: which ``run.forked`` makes a run a fork or a what-if.

Any role that may append can write a ``run.forked`` (the database keeps the log whole, not its
meaning). The one the rules take is the last that follows the copied commit of its round
(:func:`~diagevo.memory.forks.fork_opening`), names a commit of another run the log holds with
that hash (:func:`fork_source_problem`), in a run that opens as a copy of that run
(:func:`fork_copy_problem`); every other one marks nothing, and the run's admission names it
(:func:`marker_refusals`, :mod:`diagevo.views.admission`). Which run a command takes when none is
named depends on these markers too (:func:`latest_run`: not a what-if).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from diagevo.catalog import CATALOG, RoundCommitted, RunConfigured, RunForked, RunStarted
from diagevo.catalog.ids import source_event_id
from diagevo.errors import Call, DiagevoError, fork_call
from diagevo.log import EventReader, Recorder, StoredEvent, payload
from diagevo.memory.forks import RECOUNTED, WHATIF_SETTINGS, Copy, copy_differs, fork_opening, whatif_config
from diagevo.memory.state import Refusal
from diagevo.results import Json
from diagevo.text.untrusted import shorten


def whatif_settings(forked: RunForked) -> Json:
    """The settings a what-if changed (its ``run.forked``'s record says); None: no what-if."""
    return forked.whatif.get("settings", {}) if isinstance(forked.whatif, Mapping) else None


def is_whatif(store: EventReader, run: str) -> bool:
    """Whether ``run`` is a what-if: its fork marker the rules take (:func:`fork_marker`) says so."""
    marker = fork_marker(store, run)
    return marker is not None and isinstance(marker.whatif, Mapping)


def fork_marker(store: EventReader, run: str) -> RunForked | None:
    """The ``run.forked`` that makes ``run`` a fork or a what-if (None: it is neither): its last
    one the rules take, right after the copied commit of its round
    (:func:`~diagevo.memory.forks.fork_opening`), naming a commit of another run that the log
    holds with that hash (:func:`fork_source_problem`), in a run that opens as a copy of that
    run (:func:`fork_copy_problem`). Any role that may append can write a ``run.forked`` (the
    database keeps the log whole, not its meaning): one the rules refuse marks nothing
    (:func:`marker_refusals` names it)."""
    for row in reversed(list(store.rows(run, types=(RunForked,)))):
        if marker_problem(store, run, row) is None:
            return cast(RunForked, row.event)
    return None


def marker_refusals(store: EventReader, run: str) -> list[Refusal]:
    """Each ``run.forked`` of ``run`` the rules refuse (:func:`marker_problem`), in log order."""
    refused = []
    for row in store.rows(run, types=(RunForked,)):
        problem = marker_problem(store, run, row)
        if problem is not None:
            refused.append(Refusal(row.seq, row.type, problem))
    return refused


def marker_problem(store: EventReader, run: str, row: StoredEvent) -> str | None:
    """What makes the ``run.forked`` at ``row`` open no fork or what-if (the rule and why), or None."""
    marker = cast(RunForked, row.event)
    broken = opening_problem(store, run, row)
    if broken is not None:
        return f"{broken[0]}: {broken[1]}"
    problem = fork_source_problem(store, run, marker) or fork_copy_problem(store, run, marker)
    return None if problem is None else f"run forked at its opening: {problem}"


def opening_problem(store: EventReader, run: str, row: StoredEvent) -> tuple[str, str] | None:
    """:func:`~diagevo.memory.forks.fork_opening` of the ``run.forked`` at ``row``: (rule, reason)
    where it does not follow the commit of its round, else None."""
    before = next(store.rows(run, upto_seq=row.seq - 1, data=False, limit=1, newest=True), None)
    return fork_opening(
        row.round, cast(RunForked, row.event), None if before is None else (before.round, CATALOG[before.type])
    )


def fork_source_problem(store: EventReader, run: str, forked: RunForked) -> str | None:
    """What is wrong with the source ``forked`` names, or None: a run forks
    another run held in this database, at the commit of the round it names, whose hash it
    carries (a fork ingested without its source: ingest the source first)."""
    source, at, seq = forked.source_run, forked.source_round, forked.source_seq
    if source == run:
        return f"run {run!r} names itself as its source"
    if not isinstance(source, str) or type(seq) is not int or not store.has_run(source):
        return f"its source run {source!r} is not in this database (ingest the source first)"
    there = store.event_at(source, seq)
    if there is None or CATALOG[there.type] is not RoundCommitted or there.round != at:
        return f"seq {seq} of run {source!r} is not the commit of round {at!r}"
    if there.hash != forked.source_hash:
        return f"the commit of round {at!r} of run {source!r} has another hash than the one it names"
    return None


def fork_copy_problem(store: EventReader, run: str, forked: RunForked) -> str | None:
    """What shows that ``run`` is no copy of the source ``forked`` names (a source that
    :func:`fork_source_problem` takes), or None. Whoever may append can write a ``run.forked``
    right after a run's own commit, naming another run's real commit with its real hash; what
    it cannot write is the run's log before it. A fork's or a what-if's log opens with the
    source's first event copied and holds the source's commit of the round as its first commit
    of it, each as the copy keeps it (:func:`~diagevo.memory.forks.copy_differs`: a what-if's
    config with the settings its marker names, its counts written again). Four reads by index,
    whatever the run's length (a reader of a fork's origin asks this every time): a run whose
    opening and commit are the source's to the field (the same config and seed, the same
    figures; for a what-if, a config that differs only in the settings a what-if changes) is
    not told apart from a copy."""
    source, at, whatif = str(forked.source_run), forked.source_round, isinstance(forked.whatif, Mapping)
    first = next(store.read(run, limit=1), None)
    commit = next(store.read(run, types=(RoundCommitted,), in_round=at, limit=1), None)
    if first is None or commit is None:
        return f"run {run!r} holds no commit of round {at!r}: it is no copy of run {source!r}"
    copied = source_event_id(first.event_id, source, run)
    original = next(store.read(source, keys={"event_id": [copied]}, upto_seq=forked.source_seq, limit=1), None)
    if copy_differs(_copy(first), _opening_copy(original, forked)):
        return f"its first event (seq {first.seq}) is no copy of event {shorten(copied, 80)!r} of run {source!r}"
    if copy_differs(_copy(commit), _copy_of(store.event_at(source, forked.source_seq)), RECOUNTED if whatif else ()):
        return f"its commit of round {at} (seq {commit.seq}) is no copy of the commit of run {source!r}"
    return None


def _copy(e: StoredEvent) -> Copy:
    return e.type, e.round, e.version, payload(e)


def _copy_of(e: StoredEvent | None) -> Copy | None:
    return None if e is None else _copy(e)


def _opening_copy(original: StoredEvent | None, forked: RunForked) -> Copy | None:
    """The source's event ``original`` as the fork or what-if ``forked`` copies it: a config
    record of a what-if with its settings applied (:func:`~diagevo.memory.forks.whatif_config`);
    None where no what-if writes these settings (one it cannot change, or a value its config
    refuses)."""
    settings = whatif_settings(forked)
    if original is None or settings is None or CATALOG[original.type] not in (RunStarted, RunConfigured):
        return _copy_of(original)
    record = payload(original)
    if not isinstance(settings, Mapping):
        return None
    changed = {k: v for k, v in settings.items() if k in WHATIF_SETTINGS and type(v) is str}
    if len(changed) != len(settings):
        return None
    try:
        config = whatif_config(record["config"], changed)
    except (DiagevoError, TypeError, KeyError):
        return None
    return original.type, original.round, original.version, {**record, "config": config}


def latest_run(store: Recorder) -> str | None:
    """The run a command takes when none is named: the one written to last, a what-if only when
    the log holds nothing else (writing a what-if of a run does not make it the run a bare
    ``memory stats`` or ``round commit`` means)."""
    latest = store.latest_run()
    if latest is None or not is_whatif(store, latest):
        return latest
    others = [r for r in store.runs() if not is_whatif(store, r)]
    return max(others, key=store.last_seq) if others else latest


def whatif_refusal(run: str, forked: RunForked | None, what: str) -> tuple[str, Call] | None:
    """Why ``run`` cannot be trained on, if it is a what-if (its fork marker, :func:`fork_marker`,
    says so), and the fork of its source under the same settings that can (message, call); None
    otherwise. A what-if's memory was decided again on evidence that models trained under the
    source's memory produced, and it holds no model of its own: neither a round nor a fork
    continues it, while a fork of the source with its settings continues the source's models."""
    if forked is None or not isinstance(forked.whatif, Mapping):
        return None
    source, at, settings = str(forked.source_run), int(forked.source_round), whatif_settings(forked)
    fork = fork_call(source, at, f"{run}-train", dict(settings) if isinstance(settings, Mapping) else None)
    said = (
        f"run {run!r} is a what-if of run {source!r}: its memory was decided again without models, so {what}; "
        "train on under its settings in a fork of the source:"
    )
    return said, fork
