"""The report's error causes and skill-node tree as typed view data: a row per cause (its state
and frequency at each committed round, the round's events as marks, its ``memory why`` story)
and the tree of every committed round, for ``templates/sections/causes.html`` and ``tree.html``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from diagevo.catalog import CauseCreated, CausePromoted, CauseReactivated, FailureAttributed, NodesMerged
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.report.data import RunData
from diagevo.report.page import text
from diagevo.text.untrusted import shorten
from diagevo.text.words import plural
from diagevo.views.stories import Entry, FailureEvidence

EXCERPT = 600  # characters of a trajectory shown in a story

MARKS = {"created": "★", "promoted": "▲", "reactivated": "↻", "node_merged": "⇄"}


@dataclass(frozen=True, slots=True)
class FailureExcerpt:
    """A failure in a story: its question, and for a creation or a reactivation the diagnosis and
    the trajectories (cut to :data:`EXCERPT` characters)."""

    failure_id: str
    question_id: str | None  # None: the log holds no question for it
    mode: str
    text: str = ""
    diagnosis_model: str = ""
    error_cause: str = ""  # the diagnosis's new cause, or
    matched_cause: str = ""  # the cause it matched
    response: str | None = None  # None: the log holds none
    reference: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """An entry of a story as the page shows it; ``kind`` (a ``memory why`` entry's) says which
    fields it fills: ``created`` node and failure, ``attributed`` and ``reactivated`` failure,
    via and similarity, ``promoted`` acc and n_candidates, ``node_merged`` absorbed, survivor,
    label and similarity."""

    kind: str
    round: int
    failure: FailureExcerpt | None = None
    node: str = ""
    node_label: str = ""
    via: str = ""
    similarity: str = ""  # ", similarity 0.912", or ""
    acc: str = ""
    n_candidates: int = 0
    absorbed: str = ""
    survivor: str = ""
    label: str = ""


@dataclass(frozen=True, slots=True)
class Cell:
    """A cause at a round's commit: ``A`` Active or ``M`` Mastered with its frequency, or not yet
    created (``state`` empty); the round's events as marks, counted in the title."""

    state: str
    frequency: int
    marks: str
    title: str


@dataclass(frozen=True, slots=True)
class CauseTableRow:
    id: str
    node: str
    node_label: str
    cells: list[Cell]
    description: str
    story: list[Step]
    audit: str  # the command that tells the story in the terminal


@dataclass(frozen=True, slots=True)
class CauseTable:
    rounds: list[int]
    rows: list[CauseTableRow]


def causes(data: RunData, command: Callable[..., str]) -> CauseTable:
    """One row per cause: its node, its state and frequency at each committed round, the round's
    events as marks, and its story."""
    rounds = data.committed
    last = data.memories[rounds[-1]] if rounds else None
    labels = {n.id: n.label for m in data.memories.values() for n in m.nodes.values()}
    rows = []
    for cid, story in data.stories.items():
        marks: dict[int, Counter[str]] = defaultdict(Counter)
        for entry in story.timeline:
            marks[entry.round][entry.kind] += 1
        cells = [_cell(data.memories[t], cid, marks.get(t, Counter())) for t in rounds]
        node = last.causes[cid].node if last is not None and cid in last.causes else story.node
        rows.append(
            CauseTableRow(
                id=cid,
                node=node,
                node_label=labels.get(node, ""),
                cells=cells,
                description=story.description,
                story=[_step(entry, labels) for entry in story.timeline],
                audit=command("memory", "why", cid),
            )
        )
    return CauseTable(rounds, rows)


def _cell(memory: Memory, cid: str, marks: Counter[str]) -> Cell:
    symbols = "".join(MARKS[k] * min(n, 2) for k, n in marks.items() if k in MARKS)
    title = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in marks.items())
    cause = memory.causes.get(cid)
    if cause is None:
        return Cell("", 0, symbols, title)
    return Cell("A" if cause.active else "M", cause.frequency, symbols, title)


def _step(entry: Entry, labels: Mapping[str, str]) -> Step:
    """An entry of a ``memory why`` timeline as the story shows it."""
    kind, rnd, a = entry.kind, entry.round, entry.attribution
    match entry.event:
        case CauseCreated(node_id=node):
            return Step(kind, rnd, _failure(entry.failure, True), node=node, node_label=labels.get(node, ""))
        case FailureAttributed(via=via, similarity=similarity):
            return Step(kind, rnd, _failure(entry.failure, False), via=via, similarity=_similarity(similarity))
        case CausePromoted(acc=acc, n_candidates=n):
            return Step(kind, rnd, acc=f"{acc:.3f}", n_candidates=n)
        case CauseReactivated():
            how = _similarity(None if a is None else a.similarity)
            return Step(kind, rnd, _failure(entry.failure, True), via=(a and a.via) or "?", similarity=how)
        case NodesMerged(absorbed=absorbed, survivor=survivor, label=label, similarity=similarity):
            how = _similarity(similarity)
            return Step(kind, rnd, similarity=how, absorbed=absorbed, survivor=survivor, label=label)


def _similarity(s: float | None) -> str:
    return f", similarity {s:.3f}" if isinstance(s, (int, float)) else ""


def _excerpt(text: str) -> str:
    return shorten(text.strip(), EXCERPT)


def _failure(f: FailureEvidence | None, full: bool) -> FailureExcerpt | None:
    """A failure of a story (``memory why``'s view); with ``full`` its diagnosis and trajectories."""
    if f is None:
        return None
    q, d, recorded = f.question, f.diagnosis, f.recorded
    failure = FailureExcerpt(text(f.failure_id), None if q is None else text(q.question_id), text(q and q.mode))
    if not full:
        return failure
    return replace(
        failure,
        text=text(q and q.text),
        diagnosis_model=text(d and d.model or "?"),
        error_cause=text(d and d.error_cause),
        matched_cause=text(d and d.matched_cause),
        response=_excerpt(recorded.response) if recorded and recorded.response else None,
        reference=_excerpt(recorded.reference) if recorded and recorded.reference else None,
    )


@dataclass(frozen=True, slots=True)
class TreeCause:
    id: str
    active: bool
    frequency: int
    p: str  # " p=0.123": its share of the targeted questions (Eq. 2), or ""
    description: str


@dataclass(frozen=True, slots=True)
class TreeNode:
    id: str
    label: str
    count: str  # "3 causes"
    causes: list[TreeCause]


@dataclass(frozen=True, slots=True)
class TreeRound:
    round: int
    summary: str  # M_t's schedule and counts
    nodes: list[TreeNode]


@dataclass(frozen=True, slots=True)
class Tree:
    rounds: list[TreeRound]  # every committed round; the last one shown first

    @property
    def last(self) -> int:
        return self.rounds[-1].round


def tree(memories: Mapping[int, Memory]) -> Tree:
    """The skill-node tree of every committed round."""
    return Tree([_tree_round(t, memories[t]) for t in sorted(memories)])


def _tree_round(t: int, mem: Memory) -> TreeRound:
    s = schedule(mem)
    nodes = []
    for node in mem.nodes_in_order():
        members = sorted(mem.members(node.id), key=lambda c: (not c.active, -c.frequency, c.id))
        shown = [
            TreeCause(c.id, c.active, c.frequency, f" p={s.p[c.id]:.3f}" if c.id in s.p else "", c.description)
            for c in members
        ]
        nodes.append(TreeNode(node.id, node.label, plural(len(members), "cause"), shown))
    summary = (
        f"M_{t}: F_{t} = {s.F}, F_1 = {'not yet fixed' if s.F1 is None else s.F1}, ε_{t + 1} = {s.epsilon:.4f}; "
        f"{len(mem.active())} Active, "
        f"{len(mem.mastered())} Mastered, {plural(len(mem.nodes), 'node')}"
    )
    return TreeRound(t, summary, nodes)
