"""Audit projections: a cause's story, and one row of statistics per committed round."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from diagevo.memory.fold import InvariantError, Row, drafts
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory


def _question_view(q: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if q is None:
        return None
    view = {k: q.get(k) for k in ("question_id", "mode", "active_cause", "mastered_cause", "text")}
    # how sure the pseudo-label was (Eq. 3's votes), when the log holds the question's score
    return view | {k: q[k] for k in ("pseudo_label", "p1", "p2", "n") if k in q}


def cause_story(rows: Iterable[Row], cause_id: str) -> dict[str, Any]:
    """Everything the log says about one cause, oldest first: its creation (failure, question,
    diagnosis), attributions, promotions, reactivations (with the failure's question and its
    generation mode, recurrence or dedup, similarity) and the merges of its node."""
    stories = cause_stories(rows, {cause_id})
    if cause_id not in stories:
        raise InvariantError(f"unknown cause {cause_id!r}")
    return stories[cause_id]


def cause_stories(rows: Iterable[Row], cause_ids: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
    """:func:`cause_story` of every cause (or of ``cause_ids``) in one pass over the log, by
    cause id in order of creation."""
    questions: dict[str, Mapping[str, Any]] = {}
    failures: dict[str, Mapping[str, Any]] = {}
    diagnoses: dict[str, Mapping[str, Any]] = {}
    stories: dict[str, dict[str, Any]] = {}
    members: dict[str, set[str]] = {}  # node -> causes followed under it
    pending_reactivation: dict[tuple[str, str], dict[str, Any]] = {}  # (cause, failure) -> entry

    def failure_view(fid: str | None) -> dict[str, Any] | None:
        if fid is None:
            return None
        f = failures.get(fid, {})
        d = diagnoses.get(fid)
        return {
            "failure_id": fid,
            "question": _question_view(questions.get(f.get("question_id", ""))),
            "response": f.get("response"),
            "reference": f.get("reference"),
            "diagnosis": None if d is None else {k: d.get(k) for k in ("matched_cause", "error_cause", "model", "raw")},
        }

    for seq, rnd, etype, d in rows:
        base = {"seq": seq, "round": rnd}
        if etype == "question.generated":
            questions[d["question_id"]] = {**questions.get(d["question_id"], {}), **d}
        elif etype == "question.scored":
            scored = {k: d[k] for k in ("pseudo_label", "p1", "p2", "n") if k in d}
            questions[d["question_id"]] = {**questions.get(d["question_id"], {}), **scored}
        elif etype == "failure.recorded":
            failures[d["failure_id"]] = d
        elif etype == "failure.diagnosed":
            diagnoses[d["failure_id"]] = d
        elif etype == "nodes.merged":
            moved = members.pop(d["absorbed"], set())
            for node in (d["survivor"], d["absorbed"]):
                for cid in sorted(members.get(node, set()) | (moved if node == d["absorbed"] else set())):
                    story = stories[cid]
                    story["timeline"].append(
                        {**base, "kind": "node_merged", "from_node": story["node"], "survivor": d["survivor"],
                         "absorbed": d["absorbed"], "label": d["label"], "similarity": d.get("similarity")}
                    )
                    story["node"] = d["survivor"]
            members.setdefault(d["survivor"], set()).update(moved)
        elif etype == "cause.created":
            cid = d["cause_id"]
            if cause_ids is not None and cid not in cause_ids:
                continue
            node, description = d["node_id"], d["description"]
            stories[cid] = {"cause": cid, "description": description, "node": node, "timeline": []}
            members.setdefault(node, set()).add(cid)
            stories[cid]["timeline"].append(
                {**base, "kind": "created", "node": node, "description": description, "failure": failure_view(d.get("failure_id"))}
            )
        elif d.get("cause_id") not in stories:
            continue
        elif etype == "failure.attributed":
            cid = d["cause_id"]
            entry = {**base, "kind": "attributed", "via": d["via"], "similarity": d.get("similarity"), "failure": failure_view(d["failure_id"])}
            react = pending_reactivation.pop((cid, d["failure_id"]), None)
            if react is not None:  # the reactivation is explained by this attribution
                react.update(via=d["via"], similarity=d.get("similarity"))
            stories[cid]["timeline"].append(entry)
        elif etype == "cause.promoted":
            stories[d["cause_id"]]["timeline"].append({**base, "kind": "promoted", "acc": d["acc"], "n_candidates": d["n_candidates"]})
        elif etype == "cause.reactivated":
            entry = {**base, "kind": "reactivated", "via": None, "similarity": None, "failure": failure_view(d["failure_id"])}
            pending_reactivation[(d["cause_id"], d["failure_id"])] = entry
            stories[d["cause_id"]]["timeline"].append(entry)
    return stories


COUNTED = {
    "question.generated": "questions",
    "failure.recorded": "failures",
    "cause.created": "new_causes",
    "failure.attributed": "attributions",
    "cause.promoted": "promotions",
    "cause.reactivated": "reactivations",
    "nodes.merged": "merges",
    "diagnosis.failed": "failed_diagnoses",
}


def memory_sizes(mem: Memory) -> dict[str, Any]:
    """A committed memory's sizes and schedule: one row of ``memory stats``' memory columns."""
    s = schedule(mem)
    return {
        "round": mem.committed,
        "active": len(mem.active()),
        "mastered": len(mem.mastered()),
        "nodes": len(mem.nodes),
        "F": s.F,
        "epsilon_next": s.epsilon,
    }


def round_stats(rows: Iterable[Row], run: str) -> list[dict[str, Any]]:
    """One row per committed round: memory sizes, F_t, ε_{t+1}, what the round did, and the
    benchmark scores of its checkpoint (``bench/NAME``: accuracy, the latest recorded)."""
    counts: Counter[str] = Counter()
    retained = 0
    out: list[dict[str, Any]] = []
    scores: dict[int, dict[str, Any]] = {}
    for draft, (_, rnd, etype, d) in drafts(rows, run):
        if etype == "run.started":
            continue
        if etype == "eval.recorded" and "benchmark" in d:
            scores.setdefault(rnd, {})[f"bench/{d['benchmark']}"] = d.get("accuracy")
        elif etype in COUNTED:
            counts[COUNTED[etype]] += 1
        elif etype == "question.scored" and d.get("retained"):
            retained += 1
        elif etype == "round.committed":
            out.append(
                {
                    **memory_sizes(draft.freeze()),
                    "questions": counts["questions"],
                    "retained": retained,
                    "failures": counts["failures"],
                    "new_causes": counts["new_causes"],
                    "attributions": counts["attributions"],
                    "promotions": counts["promotions"],
                    "reactivations": counts["reactivations"],
                    "merges": counts["merges"],
                    "failed_diagnoses": counts["failed_diagnoses"],
                    **{k: v for k, v in d.items() if isinstance(v, (int, float)) and k.startswith("heldout")},
                }
            )
            counts.clear()
            retained = 0
    for row in out:  # scores are recorded after the round's commit
        row.update(scores.get(row["round"], {}))
    return out
