"""The story of a cause, for ``diagevo memory why``: created from which failure (its question,
trajectories and the diagnostician's reply), attributions, promotions (acc, n), reactivations
(which failure, its question and generation mode, recurrence or dedup, similarity) and the
merges of its node.

A story is typed: its entries are the cause's events as read from the log, each with the
failure it names (:class:`FailureEvidence`, its events); ``to_dict()`` is ``memory why --json``.
:func:`cause_rows` reads only the events a story needs (indexed reads: the cause's own events,
its failures with their diagnoses, their questions, the node merges); :func:`cause_stories`
folds the events :func:`story_events` types (each row once) into stories, one pass, the merge
rule taken from the fold (:meth:`diagevo.catalog.NodesMerged.reparent`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

from diagevo.catalog import (
    EVENT_CLASSES,
    CauseCreated,
    CausePromoted,
    CauseReactivated,
    Event,
    FailureAttributed,
    FailureDiagnosed,
    FailureRecorded,
    LLMCalled,
    NodesMerged,
    QuestionGenerated,
    QuestionScored,
)
from diagevo.log import Recorder
from diagevo.memory.fold import InvariantError, Row
from diagevo.views.admission import Admission, admission

Told: TypeAlias = CauseCreated | FailureAttributed | CausePromoted | CauseReactivated | NodesMerged
"""The events a story has an entry for."""

Read: TypeAlias = tuple[int, int, Event]
"""(seq, round, event) of a row a story reads (:func:`story_events`), its event typed."""

KINDS: dict[type[Event], str] = {
    CauseCreated: "created",
    FailureAttributed: "attributed",
    CausePromoted: "promoted",
    CauseReactivated: "reactivated",
    NodesMerged: "node_merged",
}
"""An entry's ``kind`` in the JSON of ``memory why``, by its event's class."""


class Question(NamedTuple):
    """A failure's question: as generated, and how sure its pseudo-label was (Eq. 3's votes)
    when the log holds its score. A named tuple, as :class:`FailureEvidence` is: one of each is made for
    every entry of a story, thousands for a cause attributed as often, and a frozen dataclass
    is made field by field."""

    question_id: str
    generated: QuestionGenerated | None
    scored: QuestionScored | None

    @property
    def mode(self) -> str | None:
        return None if self.generated is None else self.generated.mode

    @property
    def text(self) -> str | None:
        return None if self.generated is None else self.generated.text

    def to_dict(self) -> dict[str, Any]:
        g, s = self.generated, self.scored
        view = {
            "question_id": self.question_id,
            "mode": self.mode,
            "active_cause": None if g is None else g.active_cause,
            "mastered_cause": None if g is None else g.mastered_cause,
            "text": self.text,
        }
        return view if s is None else view | {"pseudo_label": s.pseudo_label, "p1": s.p1, "p2": s.p2, "n": s.n}


class FailureEvidence(NamedTuple):
    """A failure an entry names: as recorded, its question, its diagnosis and Prompt 1's reply
    (the diagnosis's own, or that of the ``llm.called`` it names: the reply stored once)."""

    failure_id: str
    recorded: FailureRecorded | None
    question: Question | None
    diagnosis: FailureDiagnosed | None
    reply: str

    def to_dict(self) -> dict[str, Any]:
        f, d = self.recorded, self.diagnosis
        return {
            "failure_id": self.failure_id,
            "question": None if self.question is None else self.question.to_dict(),
            "response": None if f is None else f.response,
            "reference": None if f is None else f.reference,
            "diagnosis": None
            if d is None
            else {"matched_cause": d.matched_cause, "error_cause": d.error_cause, "model": d.model, "raw": self.reply},
        }


@dataclass(slots=True)
class Entry:
    """An entry of a story: an event of the cause or a merge of its node, where the log holds
    it, with the failure it names. ``attribution`` says how that failure came to the cause: an
    attribution's own event, or the one that explains a reactivation (once read);
    ``from_node``: the node a merge moved the cause from."""

    seq: int
    round: int
    event: Told
    failure: FailureEvidence | None = None
    attribution: FailureAttributed | None = None
    from_node: str = ""

    @property
    def kind(self) -> str:
        return KINDS[type(self.event)]

    def to_dict(self) -> dict[str, Any]:
        """By the event's exact class, as :meth:`_StoryTeller.tell` reads it: a class pattern is an
        ``isinstance`` through pydantic's metaclass for each case tried, on each entry of a story
        that may hold thousands."""
        head: dict[str, Any] = {"seq": self.seq, "round": self.round, "kind": self.kind}
        e = self.event
        if type(e) is CausePromoted:
            return head | {"acc": e.acc, "n_candidates": e.n_candidates}
        if type(e) is NodesMerged:
            merged = {"survivor": e.survivor, "absorbed": e.absorbed, "label": e.label, "similarity": e.similarity}
            return head | {"from_node": self.from_node} | merged
        failure = None if self.failure is None else self.failure.to_dict()
        if type(e) is CauseCreated:
            return head | {"node": e.node_id, "description": e.description, "failure": failure}
        a = self.attribution  # an attribution's, or the one that explains a reactivation
        via, similarity = (None, None) if a is None else (a.via, a.similarity)
        return head | {"via": via, "similarity": similarity, "failure": failure}


@dataclass(slots=True)
class Story:
    """A cause's story: its description, the node it is under now (merges move it) and its
    entries, oldest first."""

    cause_id: str
    description: str
    node: str
    timeline: list[Entry]

    def attributions(self) -> int:
        """How many attributions the timeline shows."""
        return sum(isinstance(e.event, FailureAttributed) for e in self.timeline)

    def to_dict(self) -> dict[str, Any]:
        timeline = [e.to_dict() for e in self.timeline]
        return {"cause": self.cause_id, "description": self.description, "node": self.node, "timeline": timeline}


@dataclass(frozen=True)
class CauseStory:
    """``memory why --json``: one cause's description and node and its timeline (creation,
    attributions with their failures, promotions, reactivations, merges) in log order;
    ``attributions`` counts them all, ``more_attributions`` those left out of ``timeline``."""

    run: str
    story: Story
    attributions: int

    @property
    def cause_id(self) -> str:
        return self.story.cause_id

    @property
    def timeline(self) -> list[Entry]:
        return self.story.timeline

    @property
    def more_attributions(self) -> int:
        return max(0, self.attributions - self.story.attributions())

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            **self.story.to_dict(),
            "attributions": self.attributions,
            "more_attributions": self.more_attributions,
        }


class UnknownCause(InvariantError):
    """A story asked of a cause the run never created."""


def cause_story(events: Iterable[Read], cause_id: str) -> Story:
    """Everything the log says about one cause, oldest first: its creation (failure, question,
    diagnosis), attributions, promotions, reactivations (with the failure's question and its
    generation mode, recurrence or dedup, similarity) and the merges of its node."""
    stories = cause_stories(events, {cause_id})
    if cause_id not in stories:
        raise UnknownCause(f"unknown cause {cause_id!r}")
    return stories[cause_id]


class _StoryTeller:
    """The stories of the causes, told as the log is read: the questions, failures, diagnoses
    and Prompt 1 replies seen so far, which an entry of a story shows, and each story's timeline.
    A reactivation waits for the attribution that explains it (``pending``)."""

    def __init__(self, cause_ids: Collection[str] | None) -> None:
        self.cause_ids = cause_ids
        self.questions: dict[str, QuestionGenerated] = {}
        self.scores: dict[str, QuestionScored] = {}
        self.failures: dict[str, FailureRecorded] = {}
        self.diagnoses: dict[str, FailureDiagnosed] = {}
        self.stories: dict[str, Story] = {}
        self.pending: dict[tuple[str, str], Entry] = {}  # (cause, failure) -> reactivation entry
        self.replies: dict[tuple[str, int], str] = {}  # (failure, attempt) -> Prompt 1's reply

    def failure(self, fid: str | None) -> FailureEvidence | None:
        if fid is None:
            return None
        f, d = self.failures.get(fid), self.diagnoses.get(fid)
        question = None
        if f is not None:
            asked, scored = self.questions.get(f.question_id), self.scores.get(f.question_id)
            if asked is not None or scored is not None:
                question = Question(f.question_id, asked, scored)
        reply = "" if d is None else d.raw
        if d is not None and not reply and d.call is not None:  # the reply, stored once
            reply = self.replies.get((fid, d.call), "")
        return FailureEvidence(fid, f, question, d, reply)

    def tell(self, seq: int, rnd: int, event: Event) -> None:
        """What ``event`` tells: an entry shows a question, its votes, a failure, its diagnosis, a
        Prompt 1 reply (of the ``llm.called`` naming ``failure_id``); the others are entries. By
        its exact class (a catalog class has no subclass), not by a class pattern: that is an
        ``isinstance`` through pydantic's metaclass for each class tried, on each of the events
        of a cause attributed thousands of times."""
        if type(event) is QuestionGenerated:
            self.questions[event.question_id] = event
        elif type(event) is QuestionScored:
            self.scores[event.question_id] = event
        elif type(event) is FailureRecorded:
            self.failures[event.failure_id] = event
        elif type(event) is FailureDiagnosed:
            self.diagnoses[event.failure_id] = event
        elif type(event) is FailureAttributed:
            cid, fid = event.cause_id, event.failure_id
            if cid in self.stories:
                react = self.pending.pop((cid, fid), None)
                if react is not None:  # the reactivation is explained by this attribution
                    react.attribution = event
                self.stories[cid].timeline.append(Entry(seq, rnd, event, self.failure(fid), event))
        elif type(event) is LLMCalled:
            if event.stage == "extract" and isinstance(event.failure_id, str):
                self.replies[(event.failure_id, event.attempt or 0)] = event.raw
        elif type(event) is NodesMerged:
            self.merge_nodes(seq, rnd, event)
        elif type(event) is CauseCreated:
            cid = event.cause_id
            if self.cause_ids is None or cid in self.cause_ids:
                entry = Entry(seq, rnd, event, self.failure(event.failure_id))
                self.stories[cid] = Story(cid, event.description, event.node_id, [entry])
        elif type(event) is CausePromoted:
            if event.cause_id in self.stories:
                self.stories[event.cause_id].timeline.append(Entry(seq, rnd, event))
        elif type(event) is CauseReactivated:
            cid, fid = event.cause_id, event.failure_id
            if cid in self.stories:
                self.pending[(cid, fid)] = entry = Entry(seq, rnd, event, self.failure(fid))
                self.stories[cid].timeline.append(entry)

    def merge_nodes(self, seq: int, rnd: int, merge: NodesMerged) -> None:
        """A node merge in the timeline of every story of a cause under either node, in order of
        creation; the cause moves as the fold moves it (:meth:`NodesMerged.reparent`)."""
        for story in self.stories.values():
            if story.node in (merge.survivor, merge.absorbed):
                story.timeline.append(Entry(seq, rnd, merge, from_node=story.node))
                story.node = merge.reparent(story.node)


_SHOWN: tuple[type[Event], ...] = (QuestionGenerated, QuestionScored, FailureRecorded, FailureDiagnosed, LLMCalled)
_READ = frozenset(cls.name for cls in (*_SHOWN, *KINDS))  # the types a story reads


def story_events(rows: Iterable[Row]) -> Iterator[Read]:
    """The rows a story reads (an entry's event, or what an entry shows), each typed once: the
    ids that say which rows a cause's story needs are read from the same events it tells."""
    read = _READ  # bound once: a hot cause has many rows
    for row in rows:
        if row.type in read:
            yield row.seq, row.round, row.event


def cause_stories(events: Iterable[Read], cause_ids: Collection[str] | None = None) -> dict[str, Story]:
    """:func:`cause_story` of every cause (or of ``cause_ids``) in one pass over the log's
    :func:`story_events`, by cause id in order of creation."""
    teller = _StoryTeller(cause_ids)
    for seq, rnd, event in events:
        teller.tell(seq, rnd, event)
    return teller.stories


def _failure_ids(events: Iterable[Read]) -> list[str]:
    """The failures these events name (a cause's creation, attributions, reactivations)."""
    return [e.failure_id for _, _, e in events if isinstance(e, _NAMING_FAILURES) and isinstance(e.failure_id, str)]


def _evidence(store: Recorder, run: str, own: list[Read], admitted: Admission) -> list[Read]:
    """The events a story needs beside a cause's own, texts inline, in seq order: its failures
    with their diagnoses and Prompt 1 replies, their questions and the merges of nodes; only
    those the rules admit (:mod:`diagevo.views.admission`)."""
    own = [e for e in own if admitted.admits(e[0])]
    failure_keys = {"failure_id": _failure_ids(own)}
    failures = list(story_events(store.rows(run, keys=failure_keys, types=_FAILURE_TYPES, texts=True)))
    qids = [e.question_id for _, _, e in failures if type(e) is FailureRecorded]
    questions = story_events(store.rows(run, keys={"question_id": qids}, types=_QUESTION_TYPES, texts=True))
    merges = story_events(store.rows(run, types=(NodesMerged,)))
    events: dict[int, Read] = {e[0]: e for e in (*own, *failures, *questions, *merges)}
    return [events[seq] for seq in sorted(events) if admitted.admits(seq)]


def cause_rows(store: Recorder, run: str, cause: str) -> list[Read]:
    """The events :func:`cause_story` needs for one cause, texts inline, in seq order: the
    cause's own events, its failures with their diagnoses, their questions and the merges of
    nodes. Indexed reads only; the rest of the run is never read."""
    own = list(story_events(store.rows(run, keys={"cause_id": [cause]})))
    return _evidence(store, run, own, admission(store, run))


_NAMING_FAILURES = (CauseCreated, FailureAttributed, CauseReactivated)
_FAILURE_TYPES = (FailureRecorded, FailureDiagnosed, LLMCalled)  # llm.called: the replies
_QUESTION_TYPES = (QuestionGenerated, QuestionScored)

RECENT = 10
"""Attributions a story shows by default (``memory why``): the most recent ones."""


def recent_cause_rows(store: Recorder, run: str, cause: str, recent: int = RECENT) -> tuple[list[Read], int]:
    """The events of a cause's story with only its ``recent`` newest attributions (and those that
    explain a reactivation), and how many attributions it has in all (counted by the database):
    what is read does not grow with the number of attributions (each a few entries of the
    cause's index, which holds the type)."""
    cause_key = {"cause_id": [cause]}
    admitted = admission(store, run)
    others = [t for t in EVENT_CLASSES if t is not FailureAttributed]
    head = [e for e in story_events(store.rows(run, keys=cause_key, types=others)) if admitted.admits(e[0])]
    total = store.count(run, keys=cause_key, types=(FailureAttributed,))
    if any(r.type == FailureAttributed.name for r in admitted.refusals):  # refused ones are no attributions
        seqs = store.rows(run, keys=cause_key, types=(FailureAttributed,), data=False)
        total -= sum(1 for r in seqs if not admitted.admits(r.seq))
    latest = list(story_events(store.rows(run, keys=cause_key, types=(FailureAttributed,), limit=recent, newest=True)))
    reactivated = [e.failure_id for _, _, e in head if isinstance(e, CauseReactivated)]
    attributions = story_events(store.rows(run, keys={"failure_id": reactivated}, types=(FailureAttributed,)))
    explaining = [a for a in attributions if isinstance(e := a[2], FailureAttributed) and e.cause_id == cause]
    return _evidence(store, run, [*head, *latest, *explaining], admitted), total
