"""The runs of a database as things: ``diagevo runs``.

Each run's status is read from its milestones, its writer lease and the trainer its
``run.started`` names: **in progress** (a process holds its writer lease); **forked** (a fork
not continued: no round of its own yet), or **what-if** for a what-if of :mod:`diagevo.whatif`
(the source's memory re-decided under other settings); for a run of ``diagevo train`` (or of an
older log, which does not name its trainer), **complete** (it reached the rounds its config asks
for, no round open) or **interrupted** (a round left open, or rounds still to go: ``train
--resume``); for another trainer's run, **open round t** (waiting for its trainer) or
**complete** (as far as it went); **no round yet** for a run started whose first round was never
opened. A row its reads passed over (a raw row no reader can take: its data past the readers'
bounds or no JSON object, among the run's milestones, config, labels and its newest row) is
listed with the run (``passed_over``: its seq and why; ``memory verify`` names every one). A
fork says where it came from. Its config is shown as the fields that differ from the defaults;
its tags and notes are its own events (``run.tagged``, ``run.noted``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from diagevo.catalog import (
    CATALOG,
    MILESTONES,
    Event,
    RoundCommitted,
    RoundStarted,
    RunConfigured,
    RunForked,
    RunNoted,
    RunStarted,
    RunTagged,
)
from diagevo.catalog.ids import source_event_id
from diagevo.errors import BadInput, Call, DiagevoError, fork_call
from diagevo.log import EventReader, Recorder, StoredEvent, payload
from diagevo.log.recorder import pass_over
from diagevo.memory.forks import RECOUNTED, WHATIF_SETTINGS, Copy, copy_differs, fork_opening, whatif_config
from diagevo.results import Json
from diagevo.text.calls import validated
from diagevo.text.untrusted import shorten

_READ: tuple[type[Event], ...] = (*MILESTONES, RunConfigured, RunTagged, RunNoted)


@dataclass(frozen=True)
class ForkedFrom:
    """Where a forked run came from: its source run and round, and for a what-if the settings
    it changed (``whatif``; None: a fork, continued by a trainer)."""

    run: str
    round: int
    whatif: Json = None

    def changed(self) -> str | None:
        """A what-if's changed settings on one line (``memory.k=2``); None for a fork."""
        if not isinstance(self.whatif, Mapping):
            return None
        return ", ".join(f"{k}={v}" for k, v in self.whatif.items()) or "no setting changed"

    def to_json(self) -> dict[str, Json]:
        return {"run": self.run, "round": self.round, **({} if self.whatif is None else {"whatif": self.whatif})}


@dataclass(frozen=True)
class RunSummary:
    run: str
    status: str  # complete | in progress | interrupted
    committed: int  # rounds committed
    target: int | None  # rounds diagevo train was asked for (None: not said, or another trainer's run)
    open_round: int | None
    created: str  # recorded_at of its first event
    last_seq: int
    forked_from: ForkedFrom | None = None
    writer: str | None = None  # who holds its writer lease
    changed: dict[str, Json] = field(default_factory=dict)  # config fields that differ from the defaults
    tags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    trainer: str = ""  # what drives the run (run.started), or OLDER_LOG
    passed_over: list[dict[str, Json]] = field(default_factory=list)  # {"seq", "why"} of each row its reads passed over

    def to_json(self) -> dict[str, Json]:
        """The run as a row of ``diagevo runs --json``."""
        return {**asdict(self), "forked_from": None if self.forked_from is None else self.forked_from.to_json()}


OUR_TRAINER = "diagevo train"  # the name rounds.OUR_TRAINER gives (views sit below rounds)
OLDER_LOG = "not recorded (older log)"
"""The trainer shown for a run whose ``run.started`` does not name one (an older diagevo)."""


def run_status(
    *, writer: str | None, trainer: str | None, forked_at: int | None, started: set[int], last: int, target: int | None
) -> str:
    """The status ``diagevo runs`` shows (see the module docstring): one rule, one place."""
    open_round = last + 1 if last + 1 in started else None
    if writer is not None:
        return "in progress"
    if forked_at is not None and not any(t > forked_at for t in started):
        return "forked"
    if not started and not last:
        return "no round yet"  # started, never a round opened: nothing is complete
    if trainer is not None and trainer != OUR_TRAINER:
        return f"open round {open_round}" if open_round is not None else "complete"
    if open_round is None and (target is None or last >= target):
        return "complete"  # target None: a run driven by another trainer, as far as it went
    return "interrupted"


def config_changes(record: dict[str, Any]) -> dict[str, Any]:
    """The method's fields of a stored run config that differ from the paper's values (dotted
    names), as its one reader reads it; what the components own (the backends, the
    diagnostician's endpoint) is theirs to read."""
    from diagevo.config.base import field_names
    from diagevo.config.sections import (  # pydantic's models: for the reads that show a config
        MethodConfig,
        config_from_record,
        dotted,
    )

    try:
        config = config_from_record(record)
    except BadInput as exc:
        return {"(config)": f"cannot be used: {exc}"}
    ours, defaults = dotted(config.redacted()), dotted(MethodConfig().redacted())
    method = field_names(MethodConfig, method=True)
    return {k: v for k, v in ours.items() if k in method and defaults[k] != v}


def summarise(store: Recorder, run: str) -> RunSummary:
    """One run's summary (a few indexed reads)."""
    committed: set[int] = set()
    started: set[int] = set()
    config: dict[str, Any] = {}
    forked: ForkedFrom | None = None
    tags: dict[str, None] = {}
    notes: list[str] = []
    trainer: str | None = None
    forked_at: int | None = None
    for e in store.read(run, types=_READ):
        match e.event:
            case RunStarted(config=run_config, trainer=name):
                config = dict(run_config)
                trainer = name if isinstance(name, str) else trainer
            case RunConfigured(config=run_config):
                config = dict(run_config)
            case RoundStarted():
                started.add(e.round)
            case RoundCommitted():
                committed.add(e.round)
            case RunTagged(tags=labels, removed=removed):
                for tag in labels:
                    if removed:
                        tags.pop(tag, None)
                    else:
                        tags[tag] = None
            case RunNoted(note=note):
                notes.append(str(note))
    marker = fork_marker(store, run)
    if marker is not None:
        forked_at = marker.source_round
        forked = ForkedFrom(marker.source_run, marker.source_round, whatif_settings(marker))
    first = next(store.read(run, limit=1), None)
    next(store.rows(run, limit=1, newest=True), None)  # the newest row: passed over, if no reader can take it
    last = max(committed, default=0)
    open_round = last + 1 if last + 1 in started else None
    # another trainer's run stores the default train.rounds, which it never used: no total to show
    target = _rounds_asked(config) if trainer in (None, OUR_TRAINER) else None
    writer = store.lease_holder(run)
    status = run_status(writer=writer, trainer=trainer, forked_at=forked_at, started=started, last=last, target=target)
    if forked is not None and forked.whatif is not None and status == "forked":
        status = "what-if"
    return RunSummary(
        run=run,
        status=status,
        committed=len(committed),
        target=target,
        open_round=open_round,
        created=first.recorded_at if first else "",
        last_seq=store.last_seq(run),
        forked_from=forked,
        writer=writer,
        changed=config_changes(config) if config else {},
        tags=list(tags),
        notes=notes,
        trainer=trainer or OLDER_LOG,
        passed_over=[{"seq": seq, "why": why} for (r, seq), why in store.passed_over.items() if r == run],
    )


def _rounds_asked(config: dict[str, Any]) -> int | None:
    train = config.get("train")
    rounds = train.get("rounds") if isinstance(train, dict) else None
    return rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else None


@validated
def runs(store: Recorder) -> list[RunSummary]:
    """Every run of the database, in order of creation, each with the rows its reads passed over."""
    return [summarise(store, run) for run in store.runs()]


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
    database keeps the log whole, not its meaning): one the rules refuse marks nothing, and is
    passed over, named, as ``memory verify`` names it."""
    for row in reversed(list(store.rows(run, types=(RunForked,)))):
        problem = marker_problem(store, run, row)
        if problem is None:
            return cast(RunForked, row.event)
        pass_over(store, run, row.seq, problem)
    return None


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
