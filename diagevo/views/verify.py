"""``diagevo memory verify``: the log's chain and texts, the memory's invariants over the whole
log, and every saved view state against the log it claims to summarise.

The saved states are also the log's witnesses: a prefix of a hash chain is itself a valid chain,
so a log whose last events were deleted (triggers dropped, as anyone holding the file can) still
verifies; a state that names an event the log no longer holds (or holds with another hash) tells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from diagevo.catalog import CATALOG, RoundCommitted, RunForked
from diagevo.errors import Call
from diagevo.log import EventReader, Recorder
from diagevo.log.checks import PASSED, checked_rows
from diagevo.log.errors import UnreadableRowError
from diagevo.log.recorder import StoredEvent
from diagevo.memory.counting import Audit, audit
from diagevo.memory.state import MemoryImage
from diagevo.text.calls import validated
from diagevo.views import INDEX_VIEW, memory, stats
from diagevo.views.configs import config_problems, recovery
from diagevo.views.forks import fork_copy_problem, fork_source_problem, is_whatif, opening_problem
from diagevo.views.withdrawn import Withdrawn

VIEWS = (memory.VIEW, stats.VIEW, INDEX_VIEW)


@validated
def verify_run(store: Recorder, run: str) -> list[str]:
    """One line per problem (empty: the run is intact): the hash chain, the texts and id columns
    (``diagevo.log.checks.verify_chain``), every invariant of the memory over the full
    log, snapshots equal to the fold, the stats equal to the log, no saved state the log does
    not vouch for."""
    return verdict(store, run).problems


def verdict(store: Recorder, run: str) -> Verdict:
    """:func:`verify_run` of ``run``, with its head (seq and hash) and the fork past the first
    event the fold or a rule refuses (None: no such event, or no round before it)."""
    problems: list[str] = []
    saved = store.view_states(stats.VIEW, run, latest=True)
    fresh = stats.RoundStats()  # the statistics up to the saved ones', counted in the same read
    checked = fold_checked(store, run, problems, fresh, saved[0].seq if saved else 0)
    folded: dict[int, MemoryImage] = {}
    back: Call | None = None
    if checked is None:  # the fold would meet what it cannot read: the way back past the first
        how, back = way_back(store, run, int(unread(problems)[0].split(":", 1)[0].removeprefix("seq ")))
        problems.append(f"invariant: not folded: the events above are out of shape{how}")
    else:
        folded = checked.commits
        how, back = way_back(store, run, checked.first_bad)
        if checked.invariant is not None:
            problems.append(f"invariant: {checked.invariant}{how}")
        problems += [f"seq {b.at}: {b.rule}: {b.reason}{how}" for b in checked.breaks]
        problems += forked_problems(store, run)
        problems += [f"seq {r.seq}: {r.why}" for r in Withdrawn.of(store, run).refused]
        # a config the fold accepts (k is positive) that its readers refuse; one the fold
        # refused is named once, by the fold
        named = "\n".join(problems)
        problems += [line for seq, line in config_problems(store, run) if f"invariant: seq {seq}: " not in named]
    for snap in store.view_states(memory.VIEW, run):
        if snap.part in folded and snap.state != folded[snap.part]:
            problems.append(f"snapshot of round {snap.part} differs from the fold of the log")
    if saved and not any(p.startswith("invariant") for p in problems):
        cached = stats.RoundStats.from_state(saved[0])
        if cached.to_json() != fresh.commits_added(store, run).to_json():
            problems.append("the saved statistics differ from the log (a cache: `memory stats` would show them)")
    try:
        seq, hash_ = store.head(run)
    except UnreadableRowError:  # its last row's hash is no text (named above): nothing to hold a later read to
        seq, hash_ = 0, ""
    return Verdict(run, problems + verify_anchors(store, run), {"seq": seq, "hash": hash_} if seq else None, back)


def fold_checked(store: Recorder, run: str, problems: list[str], counts: stats.RoundStats, upto: int) -> Audit | None:
    """The chain's problems (``diagevo.log.checks.verify_chain``), appended to ``problems``, and the
    audit of the rows folded as they are checked, each the fold takes up to seq ``upto`` also
    added to ``counts`` (as ``memory stats`` counts it): one read of the log. None when a row is
    one the fold cannot read (:func:`unread`; the chain gives no row past the first)."""
    rows = checked_rows(store, run, problems)
    refused = {r.seq for r in Withdrawn.of(store, run).refused}  # counted by no reader

    def took(row: StoredEvent) -> None:
        if row.seq <= upto and row.seq not in refused:
            counts.add(row)

    checked = audit(rows, run, whatif=is_whatif(store, run), took=took)
    return None if unread(problems) else checked


def unread(problems: list[str]) -> list[str]:
    """The problems of the rows the fold cannot read: out of shape of its class (a row no reader
    can take, its data past their bounds, no JSON object or out of its type's shape, is passed
    over by every reader, the fold too)."""
    return [p for p in problems if any(f": {said}" in p for said in UNREAD) and not p.endswith(PASSED)]


UNREAD = ("out of shape: ",)


def way_back(store: EventReader, run: str, seq: int | None) -> tuple[str, Call | None]:
    """How to get past the event at ``seq`` (the first one the fold or a rule refuses), as a
    stored config no reader can use is got past (:func:`~diagevo.views.configs.recovery`): the
    words that end the line naming it (empty: no such event), and the fork."""
    event = None if seq is None else next(store.rows(run, after_seq=seq - 1, upto_seq=seq, data=False), None)
    if event is None:
        return "", None
    how, fork = recovery(store, run, event)
    return f"; {how}", fork


def forked_problems(store: EventReader, run: str) -> list[str]:
    """Each ``run.forked`` of ``run`` names another run whose event at ``source_seq`` is the
    commit of ``source_round``, with the hash it claims (:func:`fork_source_problem`); one that
    follows the commit of its round (the audit names one that does not) in a run that opens as a
    copy of that run (:func:`fork_copy_problem`)."""
    problems = []
    for e in store.rows(run, types=(RunForked,)):
        forked = cast(RunForked, e.event)
        problem = fork_source_problem(store, run, forked)
        if problem is None and opening_problem(store, run, e) is None:
            problem = fork_copy_problem(store, run, forked)
        if problem is not None:
            problems.append(f"seq {e.seq}: run forked at its opening: {problem}")
    return problems


def verify_anchors(store: Recorder, run: str) -> list[str]:
    """Each saved view state names an event of the run's log, with the hash it had: a log whose
    tail was deleted (or replaced) fails here although its shortened hash chain is intact."""
    problems: list[str] = []
    last = store.last_seq(run)
    for name in VIEWS:
        for s in store.view_states(name, run, anchored=False):
            what = f"the snapshot of round {s.part}" if name == memory.VIEW else f"the saved state of view {name!r}"
            at = store.event_at(run, s.seq)
            if at is None:
                where = f"the run's log ends at seq {last}" if s.seq > last else "the run holds no event there"
                problems.append(f"log cut off: {what} summarises the log up to seq {s.seq}, but {where}")
            elif at.hash != s.hash:
                problems.append(f"log replaced: the event at seq {s.seq} is not the one {what} summarised")
            elif name == memory.VIEW and (at.round != s.part or CATALOG[at.type] is not RoundCommitted):
                problems.append(f"{what} names seq {s.seq}, which is not that round's {RoundCommitted.name}")
    return problems


@dataclass(frozen=True)
class Verdict:
    """``memory verify`` of one run: the problems found (none: the run holds), and the seq and
    hash of its last event, which a later verify or an export can be held against."""

    run: str
    problems: list[str]
    last: dict[str, Any] | None
    way_back: Call | None = None
    """The fork past the first event the fold or a rule refuses (the rounds before it are intact)."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "ok": self.ok, "problems": self.problems, "last": self.last}
