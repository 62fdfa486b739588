"""The one mutator: apply an event to a memory, checking the log's invariants.

``evolve`` never decides anything (that is :mod:`diagevo.memory.deciders`); it only applies.
One event that breaks an invariant raises :class:`InvariantError` with the reason in one line
(:func:`evolve`, a writer's check); a fold of stored rows passes each such row over instead, the
memory as if it were not there, and returns the refusals with the memory it made
(:attr:`Memory.refused`): no stored row stops a reader, and every reader of the memory sees the
same rows refused.

Folding many events goes through a :class:`Draft`, a private mutable working copy: each event
costs the same however many causes the memory holds, and :meth:`Draft.freeze` hands out an
immutable :class:`Memory` without copying (the draft copies a table again only if it changes it
afterwards). From the outside the memory stays a value: no frozen memory is ever mutated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import fields, replace
from functools import cache
from types import MappingProxyType
from typing import Generic, NamedTuple, TypeVar, cast

from diagevo.catalog import (
    CATALOG,
    RETROSPECTIVE,
    CauseCreated,
    CausePromoted,
    CauseReactivated,
    Event,
    FailureAttributed,
    NodeCreated,
    NodesMerged,
    RoundCommitted,
    RunConfigured,
    RunStarted,
    StoredEvent,
    UnreadableRow,
)
from diagevo.catalog.event import FIGURE_BOUND, json_kinds
from diagevo.errors import BadInput
from diagevo.memory.state import Cause, CauseState, Memory, Node, Refusal, id_number
from diagevo.text.parsing import config_k

Row = StoredEvent
"""What the fold reads: a stored event (seq, round, type, the typed event built once), as the log
gives it, or a producer's pending event in that shape (:meth:`StoredEvent.of`)."""
Read = StoredEvent | UnreadableRow
"""A row as the fold's own read gives it (:func:`~diagevo.log.recorder.every_row`): a row no
reader can take comes in its place, refused where it lies."""


class InvariantError(BadInput):
    """The log breaks a rule of the memory (the message says which)."""


class NotStarted(InvariantError):
    """Rows of a run, every one passed over, and no ``run.started`` among them (yet)."""

    def __init__(self, message: str, *, refused: tuple[Refusal, ...] = ()) -> None:
        super().__init__(message)
        self.refused = refused  # each row, refused as ahead of the run's start


class NotCommitted(InvariantError):
    """The round asked for has no commit the fold took (none in the log, or one passed over)."""


B = TypeVar("B")
"""What a :class:`Folding`'s caller makes of each row it counts (the counting rules' break)."""


class Taken(NamedTuple, Generic[B]):
    """The fold's verdict on one row (its refusal; None: taken) and what the caller's count hook
    made of it (None where the row was refused for its place and never shown to the hook): one
    shape for every path that takes rows, the readers', the ledger's and the writers'."""

    refusal: Refusal | None
    counted: B | None


_SCALARS = tuple(f.name for f in fields(Memory) if f.name not in ("causes", "nodes", "committed_rounds", "refused"))
"""The memory's fields a draft holds as they are (its tables it copies on first write)."""


class Draft:
    """A mutable working copy of a :class:`Memory`, private to whoever folds with it.

    Tables (causes, nodes, committed rounds) are shared with the memory they came from until the
    first change, then copied once; :meth:`freeze` shares them with the frozen memory and marks
    them to be copied again on the next change."""

    __slots__ = (*_SCALARS, "_causes", "_nodes", "_rounds", "_owned", "refused")

    def __init__(self, mem: Memory) -> None:
        self.run, self.k, self.seed, self.config = mem.run, mem.k, mem.seed, mem.config
        self.committed, self.open_round, self.F1 = mem.committed, mem.open_round, mem.F1
        self.n_causes_created, self.n_nodes_created = mem.n_causes_created, mem.n_nodes_created
        self.last_seq = mem.last_seq
        self._causes: Mapping[str, Cause] = mem.causes
        self._nodes: Mapping[str, Node] = mem.nodes
        self._rounds: frozenset[int] | set[int] = mem.committed_rounds
        self._owned: set[str] = set()  # tables this draft may mutate in place
        self.refused: list[Refusal] = list(mem.refused)  # the rows refused so far, the memory's own first

    # --- copy on first write ------------------------------------------------------------------

    def _causes_w(self) -> dict[str, Cause]:
        if "causes" not in self._owned:
            self._causes = dict(self._causes)
            self._owned.add("causes")
        return self._causes  # type: ignore[return-value]

    def _nodes_w(self) -> dict[str, Node]:
        if "nodes" not in self._owned:
            self._nodes = dict(self._nodes)
            self._owned.add("nodes")
        return self._nodes  # type: ignore[return-value]

    def _rounds_w(self) -> set[int]:
        if "rounds" not in self._owned:
            self._rounds = set(self._rounds)
            self._owned.add("rounds")
        return self._rounds  # type: ignore[return-value]

    # --- reads --------------------------------------------------------------------------------

    @property
    def causes(self) -> Mapping[str, Cause]:
        """The causes as they stand (read only: the draft may change them in place)."""
        return self._causes

    @property
    def F(self) -> int:
        return sum(c.frequency for c in self._causes.values() if c.active)

    def _cause(self, cause_id: str) -> Cause:
        try:
            return self._causes[cause_id]
        except KeyError:
            raise InvariantError(f"unknown cause {cause_id!r}") from None

    def _node(self, node_id: str) -> Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise InvariantError(f"unknown node {node_id!r}") from None

    def freeze(self) -> Memory:
        """The memory as it stands, as an immutable value (no table is copied here)."""
        causes = self._causes if isinstance(self._causes, MappingProxyType) else MappingProxyType(self._causes)
        nodes = self._nodes if isinstance(self._nodes, MappingProxyType) else MappingProxyType(self._nodes)
        rounds = self._rounds if isinstance(self._rounds, frozenset) else frozenset(self._rounds)
        self._causes, self._nodes, self._rounds = causes, nodes, rounds
        self._owned.clear()
        return Memory(
            **{name: getattr(self, name) for name in _SCALARS},
            causes=causes,
            nodes=nodes,
            committed_rounds=rounds,
            refused=tuple(self.refused),
        )

    def refuse(self, seq: int, type_: str, why: str) -> None:
        """Pass over the row at ``seq``: the draft as it was, the refusal kept with it."""
        self.refused.append(Refusal(seq, type_, why))

    # --- apply --------------------------------------------------------------------------------

    def _change(self, event: Event, t: int) -> bool:
        """Apply an event the fold applies, of the round after the last commit."""
        match event:  # the most frequent first
            case FailureAttributed():
                cause = self._cause(event.cause_id)
                if not cause.active:
                    raise InvariantError(
                        f"failure {event.failure_id} attributed to Mastered cause {cause.id} without cause.reactivated"
                    )
                self._set_cause(cause, CauseState.ACTIVE, cause.frequency + 1)
            case CausePromoted(cause_id=cause_id):
                cause = self._cause(cause_id)
                if not cause.active:
                    raise InvariantError(f"cause {cause.id} promoted but it is not Active")
                self._set_cause(cause, CauseState.MASTERED, 0)
            case CauseReactivated(cause_id=cause_id):
                cause = self._cause(cause_id)
                if cause.active:
                    raise InvariantError(f"cause {cause.id} reactivated but it is not Mastered")
                self._set_cause(cause, CauseState.ACTIVE, 0)
            case CauseCreated(cause_id=cause_id, node_id=node_id, description=description):
                if cause_id in self._causes:
                    raise InvariantError(f"cause {cause_id!r} created twice")
                self._node(node_id)
                self._causes_w()[cause_id] = Cause(cause_id, node_id, description, CauseState.ACTIVE, 1, t)
                self.n_causes_created = max(self.n_causes_created + 1, id_number("C", cause_id))
            case NodeCreated(node_id=node_id, label=label):
                if node_id in self._nodes:
                    raise InvariantError(f"node {node_id!r} created twice")
                self._nodes_w()[node_id] = Node(node_id, label)
                self.n_nodes_created = max(self.n_nodes_created + 1, id_number("N", node_id))
            case NodesMerged():
                self._merge(event)
            case RoundCommitted():
                if self.F1 is None:
                    F = self.F
                    self.F1 = F if F != 0 else None
                self.committed, self.open_round = t, None
                self._rounds_w().add(t)
                return True
            case RunConfigured():  # a new config from here on (a fork continued under other values)
                if config_k(event.config) is None:
                    raise InvariantError(
                        f"{RunConfigured.name} holds no positive k; its rounds through {self.committed} are intact: "
                        f"fork the run from round {self.committed}"
                    )
                configured = start(self.run, event, self.last_seq)
                self.k, self.config = configured.k, configured.config
            case _:  # run.started
                raise InvariantError(f"run {self.run!r} started twice")
        self.open_round = t
        return True

    def order_problem(self, cls: type[Event], t: int) -> str | None:
        """Why an event of ``cls`` in round ``t`` is out of the order of rounds, or None: rounds
        move forward one commit at a time, and only retrospective bookkeeping may name a round
        already committed. What the fold refuses for its place alone, before any memory rule."""
        if t == self.committed + 1 or (cls in RETROSPECTIVE and t <= self.committed):
            return None
        if t > self.committed:
            return f"round {t} starts before round {self.committed + 1} was committed"
        if cls is RoundCommitted and t in self._rounds:
            return f"round {t} committed twice"
        return f"round {t} goes backwards: round {self.committed} is already committed"

    def _set_cause(self, cause: Cause, state: CauseState, frequency: int) -> None:
        self._causes_w()[cause.id] = Cause(
            cause.id, cause.node, cause.description, state, frequency, cause.created_round
        )

    def _merge(self, merge: NodesMerged) -> None:
        survivor, absorbed = self._node(merge.survivor), self._node(merge.absorbed)
        if survivor.id == absorbed.id:
            raise InvariantError(f"node {survivor.id} merged with itself")
        nodes = self._nodes_w()
        del nodes[absorbed.id]
        nodes[survivor.id] = Node(survivor.id, merge.label)
        causes = self._causes_w()
        for cid, c in causes.items():
            node = merge.reparent(c.node)
            if node != c.node:
                causes[cid] = replace(c, node=node)


# The texts the fold reads as texts: a row stored without the database's check (SQLite, or a raw
# write) that lacks one is named, not met with an AttributeError or a TypeError.
@cache
def _texts(cls: type[Event]) -> tuple[str, ...]:
    if not cls.folded:
        return ()
    return tuple(n for n, f in cls.model_fields.items() if f.is_required() and f.annotation is str)


def check_shape(event: Event) -> None:
    """What the fold reads of a stored row's event is there, of its type: the event is built
    without validation (:meth:`Event.from_stored`), so a row no database checked is checked
    here, before the fold applies it."""
    cls = type(event)
    for name in _texts(cls):
        if not isinstance(getattr(event, name, None), str):
            raise InvariantError(f"{cls.name}'s data.{name} is not a text")
    if cls is RoundCommitted:
        problem = commit_problem(cast(RoundCommitted, event))
        if problem is not None:
            raise InvariantError(f"{cls.name} {problem}")
    if cls is RunStarted or cls is RunConfigured:
        configured = cast(RunStarted | RunConfigured, event)
        if not isinstance(getattr(configured, "config", None), Mapping):  # absent: a required field unset
            raise InvariantError(f"{cls.name}'s data.config is not a table")
        if type(configured.seed) is not int:
            raise InvariantError(f"{cls.name}'s data.seed is not a whole number")


SHARES = ("heldout_acc", "pseudo_label_acc", "val_acc", "retained_label_acc", "wrong_reward_share")
"""A commit's figures that are shares (0 to 1), each also by skill (``<name>_by_skill``)."""


def commit_problem(commit: RoundCommitted) -> str | None:
    """What in a commit's figures no reader can mean, or None: a share (:data:`SHARES`) outside
    0-1, a phase's seconds (``timing``) that are no number, negative or beyond
    :data:`~diagevo.catalog.event.FIGURE_BOUND`. The types of the fields are the catalog's
    (checked on every write, the database's included); their sense is this rule's, so that a
    commit beyond it is passed over by every reader and ``memory verify`` alike."""
    for name in SHARES:
        by_skill = getattr(commit, f"{name}_by_skill", None)
        figures = {name: getattr(commit, name, None)} | (
            {f"{name}_by_skill.{k}": v for k, v in by_skill.items()} if isinstance(by_skill, Mapping) else {}
        )
        for said, value in figures.items():
            if value is not None and not (isinstance(value, int | float) and 0 <= value <= 1):
                return f"holds {said} as {repr(value)[:24]}, not a share from 0 to 1"
    timing = commit.timing
    if not isinstance(timing, Mapping):
        return None  # null, or no object: the catalog's type check names it
    slow = next((phase for phase, sec in timing.items() if "number" not in json_kinds(sec)), None)
    if slow is not None:
        return f"holds timing.{slow} as {' or '.join(sorted(json_kinds(timing[slow])))}, not a number of seconds"
    odd = next((phase for phase, sec in timing.items() if not 0 <= cast(float, sec) <= FIGURE_BOUND), None)
    if odd is None:
        return None
    return f"holds timing.{odd} as {repr(timing[odd])[:24]}, not from 0 to {FIGURE_BOUND:g} seconds"


def start(run: str, event: RunStarted | RunConfigured, seq: int = 0) -> Memory:
    """The memory right after ``run.started`` (or the config a ``run.configured`` sets)."""
    config = dict(event.config)
    k = config_k(config)
    if k is None:
        raise InvariantError(f"{RunStarted.name} needs a positive k in its config")
    return Memory(run=run, k=k, seed=int(event.seed), config=MappingProxyType(config), last_seq=seq)


def evolve(mem: Memory, event: Event, t: int) -> Memory:
    """Apply one event (a writer's check): the fold's one step (:class:`Folding`), a refusal
    raised. Rounds move forward one commit at a time; only retrospective bookkeeping may name a
    round that is already committed (round 0, the base model, included). Bookkeeping that opens no
    round changes nothing: ``mem`` itself. Folding many events: :func:`fold`."""
    folding = Folding(mem.run, mem)
    refusal, _ = folding.take(StoredEvent.of(mem.last_seq, t, event))
    if refusal is not None:
        raise InvariantError(refusal.why)
    draft = cast(Draft, folding.draft)
    return mem if not type(event).folded and draft.open_round == mem.open_round else draft.freeze()


def check_first(run: str, cls: type[Event], rnd: int) -> None:
    """A run's first event starts it: its ``run.started``, in round 0."""
    if cls is not RunStarted:
        raise InvariantError(f"run {run!r} has {cls.name} before {RunStarted.name}")
    if rnd != 0:
        raise InvariantError(f"{RunStarted.name} must be in round 0")


def drafts(rows: Iterable[Read], run: str, memory: Memory | None = None) -> Iterator[tuple[Draft, Row]]:
    """The working copy after each row (the same draft every time): for projections that look at
    the memory as the log goes, e.g. at every commit. The draft must not be kept past the loop."""
    for draft, row, _ in _steps(Draft(memory) if memory is not None else None, run, rows):
        if not isinstance(row, UnreadableRow):
            yield draft, row


def taken(rows: Iterable[Read], run: str, memory: Memory | None = None) -> Iterator[Row]:
    """The rows the fold takes, in order (:func:`decided` without its refusals)."""
    return (row for row in decided(rows, run, memory) if isinstance(row, StoredEvent))


def decided(rows: Iterable[Read], run: str, memory: Memory | None = None) -> Iterator[Row | Refusal]:
    """Each row the fold takes, or the refusal of one it passes over, in log order: those it
    applies, and the evidence and bookkeeping of the rounds it takes them in, so that a count of
    the rows (``memory stats``, a round's commit) holds what the fold decided, by the fold's own
    decision: no second statement of its rules. ``rows`` of every type, from ``memory`` on (None:
    from the run's start); a run never started, its rows ahead of the start refused."""
    seen = len(memory.refused) if memory is not None else 0
    try:
        for draft, row, took in _steps(Draft(memory) if memory is not None else None, run, rows):
            yield from draft.refused[seen:]  # this row's refusal, or the rows ahead of the start
            seen = len(draft.refused)
            if took:
                yield cast(Row, row)  # an unreadable row is never taken
    except NotStarted as exc:
        yield from exc.refused


def _folded_event(row: Row) -> Event:
    """The event of a stored row the fold applies (built unvalidated, :meth:`Event.from_stored`),
    checked (:func:`check_shape`)."""
    event = row.event
    check_shape(event)
    return event


class Folding:
    """The fold's one loop, a row at a time: every reader, ``memory verify``, ingest and the
    round's appends take or refuse each row here, by the same verdict, so none can disagree.

    A row no reader can take (:class:`~diagevo.catalog.UnreadableRow`), of a type this diagevo
    does not know, or out of the order of rounds is refused for its place alone; any other is
    first shown to the caller's ``count`` (the counting rules, against the memory before it:
    :class:`~diagevo.memory.counting.Ledger`), then folded: an event the fold applies is built
    from its row (:meth:`Event.from_stored`) and checked before it changes anything, any other
    only opens its round. A refused row is passed over, the draft as it was, and kept in the
    draft's refusals; so is a row ahead of the run's ``run.started`` (kept until the run starts:
    stored raw where no database keeps the run's opening). A ``run.started`` the fold cannot start
    from raises: there is nothing to fold on."""

    __slots__ = ("run", "draft", "early")

    def __init__(self, run: str, memory: Memory | None = None) -> None:
        self.run = run
        self.draft: Draft | None = None if memory is None else Draft(memory)  # None: run.started starts it
        self.early: list[Refusal] = []  # refusals ahead of the run's start

    def take(self, row: Read, count: Callable[[Row, Draft | None], B] | None = None) -> Taken[B]:
        """The fold's verdict on ``row`` (None: taken; else its refusal), and what ``count`` made
        of it (None where the row was refused for its place, never shown to ``count``)."""
        if isinstance(row, UnreadableRow):
            return Taken(self._refuse(row.seq, row.type, row.why), None)
        draft = self.draft
        if draft is None:
            return self._start(row, count)
        cls, t = CATALOG.get(row.type), row.round
        if cls is None:
            return Taken(self._refuse(row.seq, row.type, f"{row.type!r} is no event type this diagevo knows"), None)
        why = None if t == draft.committed + 1 else draft.order_problem(cls, t)  # the next round: in order
        if why is not None:
            return Taken(self._refuse(row.seq, row.type, why), None)
        counted = None if count is None else count(row, draft)
        try:
            if cls.folded and t == draft.committed + 1:
                draft._change(_folded_event(row), t)
            elif t == draft.committed + 1:
                draft.open_round = t  # evidence and bookkeeping: it only opens its round
        except InvariantError as exc:
            return Taken(self._refuse(row.seq, row.type, str(exc)), counted)
        return Taken(None, counted)

    def _start(self, row: Row, count: Callable[[Row, Draft | None], B] | None) -> Taken[B]:
        """The run's first row the fold takes: its ``run.started`` in round 0; any row before it
        refused for its place."""
        if row.type != RunStarted.name:
            why = f"run {self.run!r} has {row.type} before {RunStarted.name}"
            return Taken(self._refuse(row.seq, row.type, why), None)
        check_first(self.run, RunStarted, row.round)
        counted = None if count is None else count(row, None)
        self.draft = Draft(start(self.run, _folded_event(row), row.seq))  # type: ignore[arg-type]
        self.draft.refused[:0] = self.early
        return Taken(None, counted)

    def _refuse(self, seq: int, type_: str, why: str) -> Refusal:
        refusal = Refusal(seq, type_, why)
        (self.early if self.draft is None else self.draft.refused).append(refusal)
        return refusal


def _steps(draft: Draft | None, run: str, rows: Iterable[Read]) -> Iterator[tuple[Draft, Read, bool]]:
    """:class:`Folding` over ``rows`` from ``draft`` (None: the run's ``run.started`` starts it):
    the draft after each row once the run has started, and whether the fold took the row. A run
    whose rows hold no ``run.started`` is :class:`NotStarted`; a ``run.started`` the fold cannot
    start from stops it, named by its seq."""
    folding = Folding(run)
    folding.draft = draft
    for row in rows:
        try:
            refusal, _ = folding.take(row)
        except InvariantError as exc:  # a reader names the event it could not fold
            raise InvariantError(f"seq {row.seq}: {exc}") from None
        if folding.draft is not None:
            yield folding.draft, row, refusal is None
    if folding.draft is None and folding.early:
        raise NotStarted(f"run {run!r} has no {RunStarted.name}", refused=tuple(folding.early))


def commits(rows: Iterable[Read], run: str, memory: Memory | None = None) -> Iterator[Memory]:
    """M_t at every ``round.committed`` of the rows the fold takes, in order (``last_seq`` set to
    the commit's)."""
    committed = RoundCommitted.name
    for draft, row, took in _steps(Draft(memory) if memory is not None else None, run, rows):
        if took and row.type == committed:
            draft.last_seq = row.seq
            yield draft.freeze()


def fold(rows: Iterable[Read], run: str, memory: Memory | None = None) -> Memory:
    """Fold the stored rows of one run, starting from ``memory`` (a snapshot) or from the run's
    ``run.started``: the memory after the last row, with the rows the fold refused in its
    ``refused`` (passed over, as if they were not there)."""
    draft, seq = None, 0
    for draft, row, _ in _steps(None if memory is None else Draft(memory), run, rows):  # noqa: B007
        seq = row.seq  # the draft and seq after the last row
    if draft is None and memory is not None:
        draft = Draft(memory)
    if draft is None:
        raise InvariantError(f"run {run!r} has no events")
    if seq:
        draft.last_seq = seq
    return draft.freeze()


def fold_until(rows: Iterable[Read], run: str, t: int, memory: Memory | None = None) -> Memory:
    """M_t: fold up to and including the ``round.committed`` of round ``t`` the fold takes."""
    mem = memory
    if mem is not None and mem.committed >= t:
        if mem.committed == t:
            return mem
        raise InvariantError(f"the starting memory is past round {t}")
    last = mem.committed if mem is not None else 0
    committed = RoundCommitted.name
    for draft, row, took in _steps(Draft(mem) if mem is not None else None, run, rows):
        last = draft.committed
        if took and row.type == committed and cast(Row, row).round == t:
            draft.last_seq = row.seq
            return draft.freeze()
    raise NotCommitted(f"round {t} was never committed (last committed round: {last})")
