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

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from diagevo.catalog import (
    CATALOG,
    EVENT_CLASSES,
    CauseCreated,
    CausePromoted,
    CauseReactivated,
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


def _question_view(q: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if q is None:
        return None
    view = {k: q.get(k) for k in ("question_id", "mode", "active_cause", "mastered_cause", "text")}
    # how sure the pseudo-label was (Eq. 3's votes), when the log holds the question's score
    return view | {k: q[k] for k in ("pseudo_label", "p1", "p2", "n") if k in q}


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
        self.questions: dict[str, Mapping[str, Any]] = {}
        self.failures: dict[str, Mapping[str, Any]] = {}
        self.diagnoses: dict[str, Mapping[str, Any]] = {}
        self.stories: dict[str, dict[str, Any]] = {}
        self.pending: dict[tuple[str, str], dict[str, Any]] = {}  # (cause, failure) -> reactivation entry
        self.replies: dict[tuple[str, int], str] = {}  # (failure, attempt) -> Prompt 1's reply

    def failure_view(self, fid: str | None) -> dict[str, Any] | None:
        if fid is None:
            return None
        f = self.failures.get(fid, {})
        d = self.diagnoses.get(fid)
        if d is not None and not d.get("raw") and d.get("call") is not None:  # the reply, stored once
            d = {**d, "raw": self.replies.get((fid, d["call"]), "")}
        return {
            "failure_id": fid,
            "question": _question_view(self.questions.get(f.get("question_id", ""))),
            "response": f.get("response"),
            "reference": f.get("reference"),
            "diagnosis": None if d is None else {k: d.get(k) for k in ("matched_cause", "error_cause", "model", "raw")},
        }

    def question(self, d: Mapping[str, Any]) -> None:
        qid = d["question_id"]
        self.questions[qid] = {**self.questions.get(qid, {}), **d}

    def score(self, d: Mapping[str, Any]) -> None:
        qid = d["question_id"]
        scored = {k: d[k] for k in ("pseudo_label", "p1", "p2", "n") if k in d}
        self.questions[qid] = {**self.questions.get(qid, {}), **scored}

    def failure(self, d: Mapping[str, Any]) -> None:
        self.failures[d["failure_id"]] = d

    def diagnosis(self, d: Mapping[str, Any]) -> None:
        self.diagnoses[d["failure_id"]] = d

    def reply(self, d: Mapping[str, Any]) -> None:
        """A Prompt 1 reply (of the ``llm.called`` naming ``failure_id``)."""
        if d.get("stage") == "extract" and isinstance(d.get("failure_id"), str):
            self.replies[(d["failure_id"], d.get("attempt", 0))] = d.get("raw", "")

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


_Keep = Callable[[_StoryTeller, Mapping[str, Any]], None]
_Tell = Callable[[_StoryTeller, dict[str, Any], Any], None]
_EVIDENCE: dict[str, _Keep] = {
    QuestionGenerated.name: _StoryTeller.question,
    QuestionScored.name: _StoryTeller.score,
    FailureRecorded.name: _StoryTeller.failure,
    FailureDiagnosed.name: _StoryTeller.diagnosis,
    LLMCalled.name: _StoryTeller.reply,
}
"""What an entry of a story shows, by type: kept as stored (a question, its votes, a failure, its
diagnosis, a Prompt 1 reply)."""
_TELLS: dict[str, _Tell] = {
    NodesMerged.name: _StoryTeller.merge_nodes,
    CauseCreated.name: _StoryTeller.create,
    FailureAttributed.name: _StoryTeller.attribute,
    CausePromoted.name: _StoryTeller.promote,
    CauseReactivated.name: _StoryTeller.reactivate,
}
"""What a story tells, by type: each told from its typed event."""
_READERS = {name: CATALOG[name].reader for name in _TELLS}


def cause_stories(rows: Iterable[Row], cause_ids: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
    """:func:`cause_story` of every cause (or of ``cause_ids``) in one pass over the log, by
    cause id in order of creation."""
    teller = _StoryTeller(cause_ids)
    evidence, tells, readers = _EVIDENCE, _TELLS, _READERS  # bound once: a hot cause has many rows
    for seq, rnd, etype, d, version in rows:
        keep = evidence.get(etype)
        if keep is not None:  # kept as stored: an entry shows it as it is
            keep(teller, d)
            continue
        tell = tells.get(etype)
        if tell is not None:  # told from its typed event
            tell(teller, {"seq": seq, "round": rnd}, readers[etype](d, version))
    return teller.stories


def cause_rows(store: Recorder, run: str, cause: str) -> list[EventRow]:
    """The events :func:`cause_story` needs for one cause, texts inline, in seq order: the
    cause's own events, its failures with their diagnoses, their questions and the merges of
    nodes. Indexed reads only; the rest of the run is never read."""
    own = list(store.rows(run, keys={"cause_id": [cause]}))
    fids = [e.data["failure_id"] for e in own if isinstance(e.data.get("failure_id"), str)]
    failures = list(store.rows(run, keys={"failure_id": fids}, types=_FAILURE_TYPES, texts=True))
    qids = [e.data["question_id"] for e in failures if isinstance(e.data.get("question_id"), str)]
    questions = store.rows(run, keys={"question_id": qids}, types=_QUESTION_TYPES, texts=True)
    merges = store.rows(run, types=(NodesMerged,))
    events: dict[int, EventRow] = {e.seq: e for e in (*own, *failures, *questions, *merges)}
    return [events[seq] for seq in sorted(events)]


_FAILURE_TYPES = (FailureRecorded, FailureDiagnosed, LLMCalled)  # llm.called: the replies
_QUESTION_TYPES = (QuestionGenerated, QuestionScored)

RECENT = 10
"""Attributions a story shows by default (``memory why``): the most recent ones."""


def recent_cause_rows(store: Recorder, run: str, cause: str, recent: int = RECENT) -> tuple[list[EventRow], int]:
    """The events of a cause's story with only its ``recent`` newest attributions (and those that
    explain a reactivation), and how many attributions it has in all (counted by the database):
    what is read does not grow with the number of attributions."""
    others = [t for t in EVENT_CLASSES if t is not FailureAttributed]
    head = [*store.rows(run, keys={"cause_id": [cause]}, types=others)]
    total = store.count(run, keys={"cause_id": [cause]}, types=(FailureAttributed,))
    latest = [
        EventRow(e.seq, e.round, e.type, e.data, e.schema_version)
        for e in store.read(run, keys={"cause_id": [cause]}, types=(FailureAttributed,), limit=recent, newest=True)
    ]
    reactivated = [
        e.data["failure_id"]
        for e in head
        if e.type == CauseReactivated.name and isinstance(e.data.get("failure_id"), str)
    ]
    explaining = (
        [
            e
            for e in store.rows(run, keys={"failure_id": reactivated}, types=(FailureAttributed,))
            if e.data.get("cause_id") == cause
        ]
        if reactivated
        else []
    )
    own = [*head, *latest, *explaining]
    fids = [e.data["failure_id"] for e in own if isinstance(e.data.get("failure_id"), str)]
    failures = list(store.rows(run, keys={"failure_id": fids}, types=_FAILURE_TYPES, texts=True))
    qids = [e.data["question_id"] for e in failures if isinstance(e.data.get("question_id"), str)]
    questions = store.rows(run, keys={"question_id": qids}, types=_QUESTION_TYPES, texts=True)
    merges = store.rows(run, types=(NodesMerged,))
    events: dict[int, EventRow] = {e.seq: e for e in (*own, *failures, *questions, *merges)}
    return [events[seq] for seq in sorted(events)], total


def recent_story(store: Recorder, run: str, cause: str, recent: int = RECENT) -> tuple[dict[str, Any], int, int]:
    """A cause's story (``diagevo memory why``) with its head (creation, promotions,
    reactivations, merges) whole and only the ``recent`` newest attributions; with how many
    attributions there are in all and how many are left out."""
    rows, total = recent_cause_rows(store, run, cause, recent)
    story = cause_story(rows, cause)
    shown = sum(e["kind"] == "attributed" for e in story["timeline"])
    return story, total, max(0, total - shown)
