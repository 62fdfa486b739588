"""A run: its config (started, read back, changed between rounds), its trainer, and the notes
about it and its committed rounds (tags, free text, retrospective evaluations)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from diagevo.api import version
from diagevo.catalog import (
    CATALOG,
    MILESTONES,
    RETROSPECTIVE,
    Event,
    RunConfigured,
    RunForked,
    RunNoted,
    RunStarted,
    RunTagged,
    of_type,
)
from diagevo.catalog import ids as keys
from diagevo.config.sections import MethodConfig, config_changes, config_from_record
from diagevo.errors import fork_call, resume_call, start_call
from diagevo.log import EventReader, Recorder
from diagevo.results import Json
from diagevo.rounds.protocol import OutOfOrder, ProtocolError, Reader, UnknownRun, append_decision, unknown_run
from diagevo.rounds.state import round_state, state_from_rows
from diagevo.schemas import EventIn, InvalidEvent, new_event
from diagevo.text.calls import validated
from diagevo.text.redaction import redact_config
from diagevo.text.urls import redact_url
from diagevo.text.words import did_you_mean, plural
from diagevo.views import runs as runs_view
from diagevo.views.configs import CONFIG_TYPES, config_fault, unusable_config
from diagevo.views.memory import bearings

CONFIG_NAMES = frozenset(t.name for t in CONFIG_TYPES)


def run_config(store: EventReader, run: str) -> MethodConfig:
    """The config recorded in the run's ``run.started`` (defaults for what it leaves out), with
    the latest ``run.configured`` applied: the one place the run's config is read from the log."""
    cfg = stored_config(store, run)
    if cfg is None:
        raise unknown_run(store, run)
    return cfg


def stored_config(store: EventReader, run: str) -> MethodConfig | None:
    """:func:`run_config`, or None for a run the log does not hold: the newest config row the
    fold takes (:func:`~diagevo.views.memory.bearings`; a ``run.configured`` it refused, written
    into a round already committed say, is no config of the run's)."""
    configs = [row for row in bearings(store, run) if row.type in CONFIG_NAMES]
    # none taken (a run whose rows hold no run.started): its newest stored config, as it is
    last = configs[-1] if configs else next(store.read(run, types=CONFIG_TYPES, limit=1, newest=True), None)
    if last is None:
        return None
    fault = config_fault(last)
    if fault is not None:  # a log stored before its config was checked, or a raw write
        raise unusable_config(store, run, last, fault)
    return config_from_record(next(of_type(CONFIG_TYPES, [last])).config)


def config_record(config: MethodConfig | Mapping[str, Json]) -> dict[str, Any]:
    """The config as ``run.started`` stores it: a config object redacted, the whole of it (``diagevo
    train``'s composed config, :class:`diagevo.train.config.Config`, with every component's part;
    k is ``memory.k``); an external trainer's config as given (it holds ``k`` or ``memory.k``)."""
    if isinstance(config, MethodConfig):
        return config.redacted()
    return redact_config(dict(config))


class RunExists(ProtocolError):
    """A new run was asked for under an id the log holds already."""


OUR_TRAINER = runs_view.OUR_TRAINER
"""The trainer ``run.started`` names for diagevo's own loop (only such a run resumes with ``train``)."""
EXTERNAL_TRAINER = "external trainer"
"""The trainer a run started through the round protocol declares when its trainer gives no name."""


Resume = Literal["allow", "must", "never"]
"""What :func:`start_run` does with a run the log holds already (as W&B's ``resume``)."""
RESUMES: tuple[Resume, ...] = ("allow", "must", "never")


class RunDiffers(ProtocolError):
    """A run started again with a config or seed other than the one it holds."""


@validated
def start_run(
    store: Recorder,
    run: str,
    config: MethodConfig | Mapping[str, Json],
    seed: int = 0,
    *,
    resume: Resume | None = None,
    trainer: str = EXTERNAL_TRAINER,
) -> bool:
    """Append ``run.started``, decided under the append lock; True when this call started the
    run. For a run the log holds already nothing is stored, and ``resume`` says what the caller
    meant (as W&B's): ``None``, a retry: the same config and seed is a no-op (False: every rank
    of a trainer may call this), another is refused with ``RunDiffers`` (a ``BadInput``) naming
    the fields that differ (the run keeps the config it started with); ``"allow"``: continue the
    run as it is, whatever ``config`` says (the config in force is the one the log holds);
    ``"must"``: the same, and a run the log does not hold is ``UnknownRun`` (a ``NotFound``);
    ``"never"``: the run must be new, else ``RunExists`` (a ``BadInput``: two processes creating
    one id both find out, one of them here). ``seed`` is a whole number and ``run`` and
    ``trainer`` are strings: another type is refused, never coerced.
    ``trainer`` names what drives the run (``runs`` and ``report`` show it; only a run of
    ``diagevo train`` resumes with it); the diagevo version that opens it is recorded with it."""
    record = config_record(config)
    if not isinstance(config, MethodConfig):
        config_from_record(record)  # a ConfigError naming the field, a typo with the name it likely means
    try:
        ev = new_event(
            RunStarted(config=record, seed=seed, trainer=trainer, diagevo=version()),
            run=run,
            at_round=0,
            event_id=keys.event_id(run, 0, RunStarted.name),
        )
    except InvalidEvent as exc:
        raise ProtocolError(str(exc)) from None

    def decide() -> list[EventIn]:
        if not store.has_run(run):
            if resume == "must":
                raise UnknownRun(
                    f"no run {run!r} in {redact_url(store.url)} to resume{did_you_mean(run, store.runs())}"
                )
            return [ev]
        if resume == "never":
            raise RunExists(
                f"run {run!r} already exists in {redact_url(store.url)}: continue it with",
                resume_call(run) if trainer == OUR_TRAINER else start_call(run, resume="allow"),
                then=", or name a new run",
                about=run,
            )
        if resume is None:
            refuse_other_config(store, run, record, seed)
        return []

    return store.append_decided(decide).appended == 1


def refuse_other_config(store: EventReader, run: str, record: Mapping[str, Any], seed: int) -> None:
    """:class:`RunDiffers` when ``run`` holds a config or seed other than ``record`` and
    ``seed``, naming the fields that differ (how many rounds to train aside: a run may go on for
    more). Called from inside a decision, under the append lock."""
    stored = run_config(store, run)
    started = next(of_type(RunStarted, store.rows(run, types=(RunStarted,))), None)
    changes = config_changes(stored, config_from_record(record))
    stored_seed = started.seed if started is not None else 0
    if stored_seed != seed:
        changes.append(f"seed {stored_seed!r} (given {seed!r})")
    if changes:
        shown = "; ".join(changes[:3]) + (f"; and {plural(len(changes) - 3, 'more field')}" if len(changes) > 3 else "")
        raise RunDiffers(
            f"run {run!r} exists with another config: {shown}; continue it as it is with",
            start_call(run, resume="allow"),
            then=", or name a new run",
            about=run,
        )


def run_trainer(store: EventReader, run: str) -> str | None:
    """The trainer the run's ``run.started`` names (a fork's: its source's); None for a log of
    an older diagevo, which did not record it."""
    started = next(of_type(RunStarted, store.rows(run, types=(RunStarted,))), None)
    return started.trainer if started is not None and isinstance(started.trainer, str) else None


def configure_run(store: Recorder, run: str, config: MethodConfig) -> bool:
    """Record ``config`` as the run's config from its next round on (``run.configured``),
    decided under the append lock: refused while a round is under way (it keeps the config it
    started with); False when the config is the one in force."""
    record = config_record(config)
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]

    saved = stored_config(store, run)
    # how many rounds to train does not change how a round is run: it may change mid-round
    target_only = saved is not None and _without_target(saved) == _without_target(config)

    def decide(read: Reader) -> list[EventIn]:
        st = state_from_rows(run, read(MILESTONES))
        t = st.last_committed + 1
        if not target_only and any(True for _ in read(None, t=t)):
            raise OutOfOrder(f"run {run!r} is in the middle of round {t}: finish it before changing its config")
        eid = keys.event_id(run, t, RunConfigured.name, digest)
        return [new_event(RunConfigured(config=record, seed=config.train.seed), run=run, at_round=t, event_id=eid)]

    if saved is not None and saved.redacted() == config.redacted():
        return False
    return append_decision(store, run, decide).appended == 1


def configure_fork(store: Recorder, run: str, overrides: Sequence[str]) -> bool:
    """Apply ``overrides`` (``section.field=value``) to the config of a fork that has not yet
    run a round of its own (``round start --set``): a ``run.configured`` before its first
    round. Any other existing run keeps its config (:class:`ProtocolError`: fork it to change
    it), unless the overrides are the values it has. The method's fields are checked here; a
    component's are carried, for the trainer that reads them to check. False when the overrides
    change nothing."""
    current = run_config(store, run)
    if current.overridden(overrides).redacted() == current.redacted():
        return False  # the run's own values: nothing to change, nothing to refuse
    forked = [e.round for e in store.read(run, types=(RunForked,))]
    st = round_state(store, run)
    if not forked or any(t > forked[-1] for t in st.started):
        own = "has rounds of its own" if forked else "exists"
        if st.last_committed < 1:  # nothing committed yet to fork at
            raise ProtocolError(f"run {run!r} {own}: its config is fixed (a fork at a committed round may change it)")
        fork = fork_call(run, st.last_committed, f"{run}-fork", dict(o.split("=", 1) for o in overrides))
        raise ProtocolError(f"run {run!r} {own}: its config is fixed; change it in a fork:", fork, about=run)
    return configure_run(store, run, current.overridden(overrides))


def _without_target(config: MethodConfig) -> dict[str, Any]:
    record = config.redacted()
    record["train"] = {k: v for k, v in record["train"].items() if k != "rounds"}
    return record


def record_retrospective(store: Recorder, run: str, events: Sequence[EventIn]) -> int:
    """Append notes about rounds already committed (a checkpoint evaluated or chosen after the
    fact: ``eval.recorded``, ``checkpoint.selected``), decided under the append lock: each names
    a committed round of the run (0: the base model). Returns how many were new."""
    for ev in events:
        if ev.run != run:
            raise ProtocolError(f"a note of run {run!r} names run {ev.run!r}")
        if CATALOG[ev.type] not in RETROSPECTIVE:
            raise ProtocolError(f"{ev.type} is not a note about a committed round")

    def decide(read: Reader) -> Sequence[EventIn]:
        st = state_from_rows(run, read(MILESTONES))
        late = [ev.round for ev in events if ev.round > st.last_committed]
        if late:
            raise OutOfOrder(f"round {late[0]} of run {run!r} is not committed (last committed: {st.last_committed})")
        return events

    return append_decision(store, run, decide).appended


def tag_run(store: Recorder, run: str, tags: Sequence[str], *, removed: bool = False) -> None:
    """Add ``tags`` to a run (or take them off), as a ``run.tagged`` event."""
    _annotate(store, run, RunTagged, lambda: RunTagged(tags=list(tags), removed=removed))


def note_run(store: Recorder, run: str, note: str) -> None:
    """Add a free-text note to a run, as a ``run.noted`` event."""
    _annotate(store, run, RunNoted, lambda: RunNoted(note=note))


def _annotate(store: Recorder, run: str, kind: type[Event], make: Callable[[], Event]) -> None:
    def decide(read: Reader) -> list[EventIn]:
        state_from_rows(run, read(MILESTONES))  # the run exists
        n = len(read((kind,)))  # the n-th of its kind: the same words twice are two events
        try:
            return [new_event(make(), run=run, at_round=0, event_id=keys.event_id(run, 0, kind.name, n))]
        except InvalidEvent as exc:
            raise ProtocolError(str(exc)) from None

    append_decision(store, run, decide)
