"""Where a run and a round stand, read from their milestones, and opening the next round."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import cast

from diagevo.catalog import (
    MILESTONES,
    CheckpointWritten,
    PhaseCompleted,
    PromotionsDecided,
    RoundCommitted,
    RoundStarted,
    RunStarted,
    of_type,
)
from diagevo.errors import fork_call, open_call, start_call
from diagevo.log import EventReader, Recorder, StoredEvent
from diagevo.memory.fold import decided, taken
from diagevo.memory.state import Refusal
from diagevo.rounds.protocol import (
    OutOfOrder,
    ProtocolError,
    Reader,
    UnknownRun,
    append_decision,
    round_event,
    unknown_run,
)
from diagevo.schemas import EventIn
from diagevo.views.checkpoints import checkpoint_log
from diagevo.views.forks import fork_marker, whatif_refusal


def seeded(seed: int, t: int, phase: str) -> random.Random:
    """The random stream of a phase of round ``t``: the same on every retry and resume."""
    return random.Random(f"{seed}/{t}/{phase}")


@dataclass(frozen=True)
class RunState:
    """Where a run stands, read from its milestones."""

    run: str
    last_committed: int
    started: frozenset[int]
    promoted: frozenset[int]
    seed: int

    @property
    def open_round(self) -> int | None:
        t = self.last_committed + 1
        return t if t in self.started else None


def state_from_rows(run: str, rows: Iterable[StoredEvent]) -> RunState:
    """The run's state from its milestones, those the fold takes (:func:`~diagevo.memory.fold.taken`):
    a commit of a round that never ran, or a round opened twice, is none of the run's (whether the
    fold takes a milestone depends on the milestones before it alone)."""
    last, started, promoted, seed, exists = 0, set(), set(), 0, False
    for row in taken(rows, run):
        match row.event:
            case RunStarted(seed=run_seed):
                exists, seed = True, int(run_seed)
            case RoundStarted():
                started.add(row.round)
            case RoundCommitted():
                last = max(last, row.round)
            case PromotionsDecided():
                promoted.add(row.round)
    if not exists:
        raise UnknownRun(f"no run {run!r}: start it first", start_call(run), aside=True, about=run)
    return RunState(run, last, frozenset(started), frozenset(promoted), seed)


@dataclass(frozen=True)
class RoundProgress:
    """How far round ``t`` has come: the run's milestones, the phases a trainer noted done
    (``phase.completed``, with their figures) and the last checkpoint written up to the round
    that the checkpoint rule takes: what a resumed round skips and loads."""

    state: RunState
    t: int
    phases: Mapping[str, PhaseCompleted]
    checkpoint: str | None

    @property
    def promoted(self) -> bool:
        return self.t in self.state.promoted

    @property
    def committed(self) -> bool:
        return self.t <= self.state.last_committed

    def done(self, phase: str) -> bool:
        return phase in self.phases or (phase == "promote" and self.promoted) or self.committed


def round_progress(store: EventReader, run: str, t: int) -> RoundProgress:
    """Where round ``t`` of ``run`` stands (indexed reads of a few dozen events)."""
    state = round_state(store, run)
    phases = {p.phase: p for p in of_type(PhaseCompleted, store.rows(run, in_round=t, types=(PhaseCompleted,)))}
    last = checkpoint_log(store, run).latest(t)  # the events the checkpoint rule refuses passed over
    return RoundProgress(state, t, phases, cast(CheckpointWritten, last.event).path if last is not None else None)


def round_state(store: EventReader, run: str) -> RunState:
    """Where ``run`` stands (last committed round, open round, promotions decided), read from
    its milestone events only."""
    try:
        return state_from_rows(run, store.rows(run, types=MILESTONES))
    except UnknownRun:
        raise unknown_run(store, run) from None


def require_open(st: RunState, t: int, doing: str, *, redo: bool = False) -> None:
    """Refuse ``doing`` in round ``t`` unless it is the run's open round; with ``redo``, a committed
    round is refused with what can still be done (``doing`` changes what the round was): the round
    again, in a fork of the run before it."""
    if t <= st.last_committed:
        said = f"cannot {doing}: round {t} of run {st.run!r} is committed"
        if redo and t > 1:
            raise OutOfOrder(
                f"{said}, and stays so; to do round {t} again without it, fork the run from round {t - 1} with",
                fork_call(st.run, t - 1, f"{st.run}-r{t - 1}"),
            )
        raise OutOfOrder(said + (", and stays so; to do it again without it, start a new run" if redo else ""))
    if t != st.last_committed + 1:
        raise OutOfOrder(
            f"cannot {doing}: round {t} is not next in run {st.run!r} (last committed: {st.last_committed})"
        )
    if t not in st.started:
        raise OutOfOrder(
            f"cannot {doing}: round {t} of run {st.run!r} is not open",
            open_call(st.run),
            aside=True,
        )


def current_round(store: EventReader, run: str) -> int:
    """The run's open round."""
    st = round_state(store, run)
    if st.open_round is None:
        raise OutOfOrder(
            f"run {run!r} has no open round (last committed: {st.last_committed}); open one first",
            open_call(run),
            aside=True,
        )
    return st.open_round


def _refuse_a_taken_slot(run: str, t: int, milestones: list[StoredEvent]) -> None:
    """Round ``t`` cannot open where the log holds a milestone of it the rules refuse (a commit of
    round ``t`` written before round ``t - 1`` was committed): the database keeps one of each per
    round, so the round could never be committed. Said before the round trains, with the way out."""
    refused = {r.seq: r.why for r in decided(milestones, run) if isinstance(r, Refusal)}
    row = next((row for row in milestones if row.round == t and row.seq in refused), None)
    if row is None:
        return
    said = (
        f"round {t} of run {run!r} cannot run: the log holds a {row.type} of round {t} at seq {row.seq} "
        f"that the rules refuse ({refused[row.seq]}), and a round has one"
    )
    if t <= 1:
        raise OutOfOrder(f"{said}: start a new run")
    raise OutOfOrder(
        f"{said}; its rounds through {t - 1} are intact: fork it from round {t - 1} with",
        fork_call(run, t - 1, f"{run}-r{t - 1}"),
    )


def open_round(store: Recorder, run: str, t: int | None = None) -> int:
    """Append ``round.started`` for the next round (``t`` defaults to it); opening the open
    round again is a no-op. Returns the round."""
    return open_or_reopen(store, run, t)[0]


def open_or_reopen(store: Recorder, run: str, t: int | None) -> tuple[int, bool]:
    """:func:`open_round`, and whether the round was open already (decided under the lock)."""
    chosen: list[tuple[int, bool]] = []

    def decide(read: Reader) -> list[EventIn]:
        milestones = list(read(MILESTONES))
        st = state_from_rows(run, milestones)
        refused = whatif_refusal(run, fork_marker(store, run), "no round continues it")
        if refused is not None:
            raise ProtocolError(refused[0], refused[1], about=run)
        nxt = st.last_committed + 1
        want = nxt if t is None else t
        if want <= st.last_committed:
            raise OutOfOrder(f"round {want} of run {run!r} is committed already")
        if want != nxt:
            raise OutOfOrder(f"round {want} cannot open in run {run!r}: round {nxt} comes first")
        _refuse_a_taken_slot(run, want, milestones)
        chosen.append((want, want in st.started))
        return [] if want in st.started else [round_event(run, want, RoundStarted.name, RoundStarted())]

    append_decision(store, run, decide)
    return chosen[0]
