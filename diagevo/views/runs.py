"""The runs of a database as things: ``diagevo runs``.

Each run's status is read from its milestones, its writer lease and the trainer its
``run.started`` names: **in progress** (a process holds its writer lease); **forked** (a fork
not continued: no round of its own yet), or **what-if** for a what-if of :mod:`diagevo.whatif`
(the source's memory re-decided under other settings); for a run of ``diagevo train`` (or of an
older log, which does not name its trainer), **complete** (it reached the rounds its config asks
for, no round open) or **interrupted** (a round left open, or rounds still to go: ``train
--resume``); for another trainer's run, **open round t** (waiting for its trainer) or
**complete** (as far as it went); **no round yet** for a run started whose first round was never
opened. Each row of the run the rules refuse (its admission, :mod:`diagevo.views.admission`: a
raw row no reader can take, a row the fold, the checkpoint, config or fork-marker rules refuse)
is listed with the run (``passed_over``: its seq and why). A fork says where it came from. Its
config is shown as the fields that differ from the defaults; its tags and notes are its own
events (``run.tagged``, ``run.noted``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from diagevo.catalog import (
    MILESTONES,
    Event,
    RoundCommitted,
    RoundStarted,
    RunConfigured,
    RunNoted,
    RunStarted,
    RunTagged,
)
from diagevo.errors import BadInput
from diagevo.log import Recorder
from diagevo.results import Json
from diagevo.text.calls import validated
from diagevo.views.admission import admission, admitted_rows
from diagevo.views.forks import fork_marker, whatif_settings
from diagevo.views.memory import diagevo_versions

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
    diagevo: str | None = None  # the diagevo version that opened it (None: not recorded, an older diagevo's log)
    round_diagevo: dict[int, str] = field(default_factory=dict)  # committed round -> the version that committed it

    def to_json(self) -> dict[str, Json]:
        """The run as a row of ``diagevo runs --json``."""
        fork = None if self.forked_from is None else self.forked_from.to_json()
        by_round = {str(t): v for t, v in self.round_diagevo.items()}  # JSON's keys are texts
        return {**asdict(self), "forked_from": fork, "round_diagevo": by_round}


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
    rows = list(admitted_rows(store, run, types=_READ))  # a refused row (a forged note, a commit) is none of it
    for e in rows:
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
    last = max(committed, default=0)
    open_round = last + 1 if last + 1 in started else None
    # another trainer's run stores the default train.rounds, which it never used: no total to show
    target = _rounds_asked(config) if trainer in (None, OUR_TRAINER) else None
    writer = store.lease_holder(run)
    opened, by_round = diagevo_versions(rows)
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
        passed_over=[{"seq": r.seq, "why": r.why} for r in admission(store, run).refusals],
        diagevo=opened,
        round_diagevo=by_round,
    )


def _rounds_asked(config: dict[str, Any]) -> int | None:
    train = config.get("train")
    rounds = train.get("rounds") if isinstance(train, dict) else None
    return rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else None


@validated
def runs(store: Recorder) -> list[RunSummary]:
    """Every run of the database, in order of creation, each with the rows the rules refuse."""
    return [summarise(store, run) for run in store.runs()]
