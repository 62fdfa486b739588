"""The read commands as values: what ``diagevo memory replay/show/why/stats/plot`` print, as the
typed results of :mod:`diagevo.results` (``to_dict()`` is the command's ``--json``; ``replay`` is
:func:`memory_at`; the CLI renders these and nothing else)."""

from __future__ import annotations

from typing import Any, cast

from diagevo.catalog import CauseCreated, CheckpointPruned, CheckpointWritten, TrainStep, of_type
from diagevo.errors import Call
from diagevo.log import EventReader, Recorder, StoredEvent
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.results.memory import CauseRow, CurrentMemory, MemoryView, NodeRow
from diagevo.results.stats import GrpoSteps, Lifecycle, LifecycleRow, PendingRow, RunStats, StepRow
from diagevo.text.calls import validated
from diagevo.text.words import did_you_mean
from diagevo.views.admission import admitted_rows
from diagevo.views.checkpoints import checkpoint_log
from diagevo.views.memory import bearings, diagevo_versions, load_memory, resolve_run
from diagevo.views.stats import accumulate, metric_columns, round_stats
from diagevo.views.stories import CauseStory, UnknownCause, cause_rows, cause_story, recent_cause_rows


def memory_view(mem: Memory) -> MemoryView:
    """A memory as data: its causes and nodes, F_t, F_1, k, ε_{t+1} and p_{t+1}(e)."""
    s = schedule(mem)
    members: dict[str, list[str]] = {n: [] for n in mem.nodes}
    for c in mem.causes.values():
        members[c.node].append(c.id)
    return MemoryView(
        run=mem.run,
        t=mem.committed,
        F=s.F,
        F1=s.F1,
        k=mem.k,
        epsilon_next=s.epsilon,
        p_next=s.p,
        causes=tuple(
            CauseRow(cause_id=c.id, node=c.node, description=c.description, state=c.state.value, frequency=c.frequency)
            for c in mem.causes.values()
        ),
        nodes=tuple(NodeRow(node_id=n.id, label=n.label, causes=tuple(members[n.id])) for n in mem.nodes.values()),
    )


def memory_at(store: Recorder, at_round: int, run: str | None = None) -> MemoryView:
    """M_t (``at_round`` = t) of ``run`` (default: the latest run) rebuilt from the log, with its schedule."""
    return memory_view(load_memory(store, resolve_run(store, run), at_round))


@validated
def show(store: Recorder, run: str | None = None) -> CurrentMemory:
    """The memory after the run's last event, an unfinished round included (``open_round``)."""
    mem = load_memory(store, resolve_run(store, run))
    opened, by_round = diagevo_versions(bearings(store, mem.run))
    view, committed = vars(memory_view(mem)), by_round.get(mem.committed)
    return CurrentMemory(**view, open_round=mem.open_round, diagevo=opened, committed_diagevo=committed)


@validated
def why(store: Recorder, cause: str, run: str | None = None, *, recent: int | None = None) -> CauseStory:
    """The story of one cause: creation, attributions, promotions, reactivations, merges; with
    ``recent``, only that many of the newest attributions (``more_attributions``: how many more
    there are)."""
    run_id = resolve_run(store, run)
    try:
        if recent is None:
            story = cause_story(cause_rows(store, run_id, cause), cause)
            return CauseStory(run_id, story, story.attributions())
        rows, total = recent_cause_rows(store, run_id, cause, recent)
        return CauseStory(run_id, cause_story(rows, cause), total)
    except UnknownCause:
        raise unknown_cause(store, run_id, cause) from None


def unknown_cause(store: Recorder, run: str, cause: str) -> UnknownCause:
    """``unknown cause 'c1' in run 'demo'``, with the cause ids of the run it most likely means
    (case aside, or close), else the command that lists them."""
    created = of_type(CauseCreated, admitted_rows(store, run, types=(CauseCreated,)))
    meant = did_you_mean(cause, (e.cause_id for e in created if isinstance(e.cause_id, str)))
    said = f"unknown cause {cause!r} in run {run!r}"
    if meant:
        return UnknownCause(said + meant)
    listed = Call("show", f"diagevo.show(store, {run!r})", run=run)
    return UnknownCause(f"{said}: the causes are listed by", listed, about=cause)


@validated
def stats(store: Recorder, run: str | None = None) -> RunStats:
    """One row per committed round: memory sizes, what the round did, every metric by name;
    ``metrics``: the metric columns; ``uncommitted``: metrics of rounds not committed (yet), such
    as round-0 scores of ``eval --run``."""
    run_id = resolve_run(store, run)
    acc = accumulate(store, run_id)
    rows = acc.rows()
    pending = [PendingRow(rnd, m) for rnd, m in acc.uncommitted_metrics().items()]
    metrics = metric_columns(rows)
    disk = checkpoint_disk(store, run_id)  # a backend that records its checkpoints' sizes
    if disk:
        rows = [r.with_figures(disk.get(r.round, {})) for r in rows]
    return RunStats(run=run_id, rounds=rows, metrics=metrics, uncommitted=pending)


STEP_FIELDS = (
    "reward",
    "reward_std",
    "kl",
    "entropy",
    "clip_ratio/region_mean",
    "completions/mean_length",
    "learning_rate",
    "grad_norm",
)
"""The per-step GRPO signals shown first (TRL's names); ``train.step`` may hold more."""


def step_of(t: int, step: TrainStep) -> StepRow:
    """One ``train.step`` of round ``t`` as a row: round, role, step in the phase, global step, TRL's fields."""
    return StepRow(t, step.role, step.step, step.global_step, dict(step.metrics))


def step_row(t: int, step: TrainStep) -> dict[str, Any]:
    """:func:`step_of` as JSON, what a chart and a followed line read by column."""
    return step_of(t, step).to_json()


def steps(store: Recorder, run: str | None = None) -> GrpoSteps:
    """Every GRPO step the run logged (``train.step``), in log order: ``steps`` rows of
    :func:`step_row`; ``fields``: the TRL fields present, those of :data:`STEP_FIELDS` first."""
    run_id = resolve_run(store, run)
    rows = [step_of(e.round, cast(TrainStep, e.event)) for e in admitted_rows(store, run_id, types=(TrainStep,))]
    seen = dict.fromkeys(k for r in rows for k in r.figures)
    fields = [f for f in STEP_FIELDS if f in seen] + sorted(f for f in seen if f not in STEP_FIELDS)
    return GrpoSteps(run=run_id, steps=rows, fields=fields)


def pruned_note(row: StoredEvent) -> str:
    """How a refusal names the pruning of a checkpoint: its path and its event."""
    pruned = cast(CheckpointPruned, row.event)
    return (
        f"its checkpoint {pruned.path} was pruned (checkpoint.pruned in round {row.round}, "
        f"seq {row.seq}; train.keep_checkpoints decides how many are kept)"
    )


def checkpoint_disk(store: EventReader, run: str) -> dict[int, dict[str, float]]:
    """Round -> MB of checkpoints written that round (``ckpt_mb``) and of those still on disk
    (``disk_mb``), from ``checkpoint.written``'s bytes and ``checkpoint.pruned`` (the events the
    checkpoint rule refuses passed over: :func:`~diagevo.views.checkpoints.checkpoint_log`)."""
    log = checkpoint_log(store, run)
    out: dict[int, dict[str, float]] = {}
    for e in log.written:
        size = cast(CheckpointWritten, e.event).bytes  # what a backend that measures its checkpoints records
        if size is None:
            continue
        row = out.setdefault(e.round, {"ckpt_mb": 0.0, "disk_mb": 0.0})
        row["ckpt_mb"] += size / 1e6
        if log.gone(e) is None:
            row["disk_mb"] += size / 1e6
    return out


def lifecycle(store: Recorder, run: str | None = None) -> Lifecycle:
    """The memory's lifecycle per committed round: Active, Mastered, nodes, F_t, ε_{t+1}."""
    run_id = resolve_run(store, run)
    rows = round_stats(store, run_id)
    series = [LifecycleRow(r.round, r.active, r.mastered, r.nodes, r.F, r.epsilon_next) for r in rows]
    return Lifecycle(run=run_id, series=series)
