"""The story of a cause, for ``diagevo memory why``: created from which failure (its question,
trajectories and the diagnostician's reply), attributions, promotions (acc, n), reactivations
(which failure, its question and generation mode, recurrence or dedup, similarity) and the
merges of its node.

:func:`cause_rows` reads only the events a story needs (indexed reads: the cause's own events,
its failures with their diagnoses, their questions, the node merges); :func:`cause_stories`
folds events into stories, one pass, the merge rule taken from the fold
(:meth:`diagevo.catalog.NodesMerged.reparent`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

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
from diagevo.log.recorder import EventRow
from diagevo.memory.fold import InvariantError, Row


def _question_view(
    qid: str | None, asked: QuestionGenerated | None, scored: QuestionScored | None
) -> dict[str, Any] | None:
    if asked is None and scored is None:
        return None
    view = {
        "question_id": qid,
        "mode": None if asked is None else asked.mode,
        "active_cause": None if asked is None else asked.active_cause,
        "mastered_cause": None if asked is None else asked.mastered_cause,
        "text": None if asked is None else asked.text,
    }
    if scored is None:
        return view
    # how sure the pseudo-label was (Eq. 3's votes), when the log holds the question's score
    return view | {"pseudo_label": scored.pseudo_label, "p1": scored.p1, "p2": scored.p2, "n": scored.n}


class UnknownCause(InvariantError):
    """A story asked of a cause the run never created."""


def cause_story(rows: Iterable[Row], cause_id: str) -> dict[str, Any]:
    """Everything the log says about one cause, oldest first: its creation (failure, question,
    diagnosis), attributions, promotions, reactivations (with the failure's question and its
    generation mode, recurrence or dedup, similarity) and the merges of its node."""
    stories = cause_stories(rows, {cause_id})
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
        self.stories: dict[str, dict[str, Any]] = {}
        self.pending: dict[tuple[str, str], dict[str, Any]] = {}  # (cause, failure) -> reactivation entry
        self.replies: dict[tuple[str, int], str] = {}  # (failure, attempt) -> Prompt 1's reply

    def failure_view(self, fid: str | None) -> dict[str, Any] | None:
        if fid is None:
            return None
        f, d = self.failures.get(fid), self.diagnoses.get(fid)
        qid = None if f is None else f.question_id
        diagnosis = None
        if d is not None:
            raw = d.raw
            if not raw and d.call is not None:  # the reply, stored once
                raw = self.replies.get((fid, d.call), "")
            diagnosis = {"matched_cause": d.matched_cause, "error_cause": d.error_cause, "model": d.model, "raw": raw}
        return {
            "failure_id": fid,
            "question": None if qid is None else _question_view(qid, self.questions.get(qid), self.scores.get(qid)),
            "response": None if f is None else f.response,
            "reference": None if f is None else f.reference,
            "diagnosis": diagnosis,
        }

    def tell(self, base: dict[str, Any], event: Event) -> None:
        """What ``event`` tells: an entry shows a question, its votes, a failure, its diagnosis, a
        Prompt 1 reply (of the ``llm.called`` naming ``failure_id``); the others are entries."""
        match event:
            case QuestionGenerated(question_id=qid):
                self.questions[qid] = event
            case QuestionScored(question_id=qid):
                self.scores[qid] = event
            case FailureRecorded(failure_id=fid):
                self.failures[fid] = event
            case FailureDiagnosed(failure_id=fid):
                self.diagnoses[fid] = event
            case LLMCalled(stage="extract", failure_id=str(fid)):
                self.replies[(fid, event.attempt or 0)] = event.raw
            case NodesMerged():
                self.merge_nodes(base, event)
            case CauseCreated():
                self.create(base, event)
            case FailureAttributed():
                self.attribute(base, event)
            case CausePromoted():
                self.promote(base, event)
            case CauseReactivated():
                self.reactivate(base, event)

    def promote(self, base: dict[str, Any], promoted: CausePromoted) -> None:
        if promoted.cause_id in self.stories:
            entry = {**base, "kind": "promoted", "acc": promoted.acc, "n_candidates": promoted.n_candidates}
            self.stories[promoted.cause_id]["timeline"].append(entry)

    def reactivate(self, base: dict[str, Any], reactivated: CauseReactivated) -> None:
        cid, fid = reactivated.cause_id, reactivated.failure_id
        if cid in self.stories:
            entry = {**base, "kind": "reactivated", "via": None, "similarity": None, "failure": self.failure_view(fid)}
            self.pending[(cid, fid)] = entry
            self.stories[cid]["timeline"].append(entry)

    def merge_nodes(self, base: dict[str, Any], merge: NodesMerged) -> None:
        """A node merge in the timeline of every story of a cause under either node, in order of
        creation; the cause moves as the fold moves it (:meth:`NodesMerged.reparent`)."""
        for story in self.stories.values():
            if story["node"] in (merge.survivor, merge.absorbed):
                story["timeline"].append(
                    {
                        **base,
                        "kind": "node_merged",
                        "from_node": story["node"],
                        "survivor": merge.survivor,
                        "absorbed": merge.absorbed,
                        "label": merge.label,
                        "similarity": merge.similarity,
                    }
                )
                story["node"] = merge.reparent(story["node"])

    def create(self, base: dict[str, Any], created: CauseCreated) -> None:
        cid, node, description = created.cause_id, created.node_id, created.description
        if self.cause_ids is not None and cid not in self.cause_ids:
            return
        self.stories[cid] = {"cause": cid, "description": description, "node": node, "timeline": []}
        entry = {**base, "kind": "created", "node": node, "description": description}
        self.stories[cid]["timeline"].append({**entry, "failure": self.failure_view(created.failure_id)})

    def attribute(self, base: dict[str, Any], attributed: FailureAttributed) -> None:
        cid, fid, via, similarity = attributed.cause_id, attributed.failure_id, attributed.via, attributed.similarity
        if cid not in self.stories:
            return
        entry = {**base, "kind": "attributed", "via": via, "similarity": similarity}
        react = self.pending.pop((cid, fid), None)
        if react is not None:  # the reactivation is explained by this attribution
            react.update(via=via, similarity=similarity)
        self.stories[cid]["timeline"].append({**entry, "failure": self.failure_view(fid)})


_TOLD = (
    QuestionGenerated,
    QuestionScored,
    FailureRecorded,
    FailureDiagnosed,
    LLMCalled,
    NodesMerged,
    CauseCreated,
    FailureAttributed,
    CausePromoted,
    CauseReactivated,
)
_READERS = {cls.name: cls.reader for cls in _TOLD}  # what a story reads, by type: bound once


def cause_stories(rows: Iterable[Row], cause_ids: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
    """:func:`cause_story` of every cause (or of ``cause_ids``) in one pass over the log, by
    cause id in order of creation."""
    teller, readers = _StoryTeller(cause_ids), _READERS  # bound once: a hot cause has many rows
    for seq, rnd, etype, d, version in rows:
        read = readers.get(etype)
        if read is not None:
            teller.tell({"seq": seq, "round": rnd}, read(d, version))
    return teller.stories


def _failure_ids(rows: Iterable[EventRow]) -> list[str]:
    """The failures these events name (a cause's creation, attributions, reactivations)."""
    events = (row.event for row in rows)
    return [e.failure_id for e in events if isinstance(e, _NAMING_FAILURES) and isinstance(e.failure_id, str)]


def _evidence(store: Recorder, run: str, own: list[EventRow]) -> list[EventRow]:
    """The events a story needs beside a cause's own, texts inline, in seq order: its failures
    with their diagnoses and Prompt 1 replies, their questions and the merges of nodes."""
    failures = list(store.rows(run, keys={"failure_id": _failure_ids(own)}, types=_FAILURE_TYPES, texts=True))
    qids = [e.question_id for e in (row.event for row in failures) if isinstance(e, FailureRecorded)]
    questions = store.rows(run, keys={"question_id": qids}, types=_QUESTION_TYPES, texts=True)
    merges = store.rows(run, types=(NodesMerged,))
    events: dict[int, EventRow] = {e.seq: e for e in (*own, *failures, *questions, *merges)}
    return [events[seq] for seq in sorted(events)]


def cause_rows(store: Recorder, run: str, cause: str) -> list[EventRow]:
    """The events :func:`cause_story` needs for one cause, texts inline, in seq order: the
    cause's own events, its failures with their diagnoses, their questions and the merges of
    nodes. Indexed reads only; the rest of the run is never read."""
    return _evidence(store, run, list(store.rows(run, keys={"cause_id": [cause]})))


_NAMING_FAILURES = (CauseCreated, FailureAttributed, CauseReactivated)
_FAILURE_TYPES = (FailureRecorded, FailureDiagnosed, LLMCalled)  # llm.called: the replies
_QUESTION_TYPES = (QuestionGenerated, QuestionScored)

RECENT = 10
"""Attributions a story shows by default (``memory why``): the most recent ones."""


def recent_cause_rows(store: Recorder, run: str, cause: str, recent: int = RECENT) -> tuple[list[EventRow], int]:
    """The events of a cause's story with only its ``recent`` newest attributions (and those that
    explain a reactivation), and how many attributions it has in all (counted by the database):
    what is read does not grow with the number of attributions (each a few entries of the
    cause's index, which holds the type: migration 0017)."""
    cause_key = {"cause_id": [cause]}
    head = list(store.rows(run, keys=cause_key, types=[t for t in EVENT_CLASSES if t is not FailureAttributed]))
    total = store.count(run, keys=cause_key, types=(FailureAttributed,))
    latest = list(store.rows(run, keys=cause_key, types=(FailureAttributed,), limit=recent, newest=True))
    reactivated = [e.failure_id for e in (row.event for row in head) if isinstance(e, CauseReactivated)]
    attributions = store.rows(run, keys={"failure_id": reactivated}, types=(FailureAttributed,))
    explaining = [row for row in attributions if isinstance(e := row.event, FailureAttributed) and e.cause_id == cause]
    return _evidence(store, run, [*head, *latest, *explaining]), total


def recent_story(store: Recorder, run: str, cause: str, recent: int = RECENT) -> tuple[dict[str, Any], int, int]:
    """A cause's story (``diagevo memory why``) with its head (creation, promotions,
    reactivations, merges) whole and only the ``recent`` newest attributions; with how many
    attributions there are in all and how many are left out."""
    rows, total = recent_cause_rows(store, run, cause, recent)
    story = cause_story(rows, cause)
    shown = sum(e["kind"] == "attributed" for e in story["timeline"])
    return story, total, max(0, total - shown)
