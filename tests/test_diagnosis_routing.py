"""The routing stages of Sec. 2.3 as pure functions: hand-built memories, hand-computed decisions.

The pipeline tests (tests/test_diagnosis_pipeline.py) hold the same rules end to end, against
an HTTP diagnostician and a store; here each stage is called alone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from diagevo.catalog import CauseCreated, FailureAttributed, NodeCreated, NodesMerged
from diagevo.diagnosis import routing
from diagevo.diagnosis.interface import Assignment, Consolidation, Dedup, Extraction, KnownCause, NodeView
from diagevo.diagnosis.routing import ReplyRefusal, Routed
from diagevo.memory.fold import fold
from diagevo.memory.state import Memory
from tests.logs import stored, wire_event

RUN = "routing"


def memory(nodes: dict[str, tuple[str, list[tuple[str, str]]]], mastered: tuple[str, ...] = ()) -> Memory:
    """Round 1 created ``nodes`` ({node: (label, [(cause, description)])}) and was committed;
    ``mastered`` causes were promoted in round 2 (open)."""
    rows: list[tuple[str, int, dict[str, Any]]] = [("run.started", 0, {"config": {"k": 0.5}})]
    for nid, (label, causes) in nodes.items():
        rows.append(("node.created", 1, {"node_id": nid, "label": label}))
        for cid, desc in causes:
            rows.append(
                ("cause.created", 1, {"cause_id": cid, "node_id": nid, "description": desc, "failure_id": None})
            )
    rows.append(("round.committed", 1, {}))
    rows += [("cause.promoted", 2, {"cause_id": c, "acc": 0.9, "n_candidates": 3}) for c in mastered]
    return fold([stored(seq, rnd, etype, data) for seq, (etype, rnd, data) in enumerate(rows, 1)], RUN)


MEM = memory(
    {"N1": ("label one", [("C1", "cause one"), ("C2", "cause two")]), "N2": ("label two", [("C3", "cause three")])},
    mastered=("C2",),
)


# --- Prompt 1 ---------------------------------------------------------------------------------


def test_an_extraction_naming_a_supplied_cause_or_none_passes() -> None:
    ext = Extraction("C1", None)
    assert routing.check_extraction(ext, None, ("C1",)) is ext
    new = Extraction(None, "a new cause")
    assert routing.check_extraction(new, None, ()) is new


def test_an_extraction_naming_an_unsupplied_cause_is_refused_even_if_it_exists() -> None:
    assert routing.check_extraction(Extraction("C3", None), None, ("C1",)) == ReplyRefusal(
        "extract", "matched_cause_id 'C3' was not supplied"
    )


def test_no_extraction_is_refused_with_its_reason() -> None:
    assert routing.check_extraction(None, "endpoint: timed out", ("C1",)) == ReplyRefusal(
        "extract", "endpoint: timed out"
    )
    assert routing.check_extraction(None, None, ()) == ReplyRefusal("extract", "no decision")


def test_recurrence_on_an_active_cause_counts_one_failure() -> None:
    assert routing.recurrence(MEM, "f1", "C1") == Routed(
        (FailureAttributed(**{"failure_id": "f1", "cause_id": "C1", "via": "recurrence", "similarity": None}),),
        {"outcome": "recurrence", "cause": "C1"},
    )


def test_recurrence_on_a_mastered_cause_reactivates_it_first() -> None:
    decision = routing.recurrence(MEM, "f1", "C2")
    assert isinstance(decision, Routed)
    assert [c.name for c in decision.changes] == ["cause.reactivated", "failure.attributed"]
    assert decision.changes[0].model_dump() == {"cause_id": "C2", "failure_id": "f1"}


def test_recurrence_on_an_unknown_cause_is_refused_by_the_memory() -> None:
    assert routing.recurrence(MEM, "f1", "C9") == ReplyRefusal("route", "unknown cause 'C9'")


def test_known_causes_show_id_state_and_description() -> None:
    assert routing.known_causes(MEM, ["C2", "C1"]) == (
        KnownCause("C2", "mastered", "cause two"),
        KnownCause("C1", "active", "cause one"),
    )


# --- stage 2a and Prompt 2 --------------------------------------------------------------------

SCREENED = [("C3", 0.81234567), ("C1", 0.6)]  # best first, as VectorIndex.screen returns them


def test_prompt_2_is_shown_the_screened_causes_in_their_order() -> None:
    assert [c.id for c in routing.known_causes(MEM, [cid for cid, _ in SCREENED])] == ["C3", "C1"]


def test_a_confirmed_duplicate_is_attributed_with_its_rounded_similarity() -> None:
    decision = routing.after_dedup(MEM, "f1", SCREENED, Dedup(True, "C3"), None)
    assert decision == Routed(
        (FailureAttributed(**{"failure_id": "f1", "cause_id": "C3", "via": "dedup", "similarity": 0.812346}),),
        {"outcome": "duplicate", "cause": "C3", "similarity": 0.812346},
    )


def test_a_duplicate_of_a_mastered_cause_reactivates_it() -> None:
    decision = routing.after_dedup(MEM, "f1", [("C2", 0.7)], Dedup(True, "C2"), None)
    assert isinstance(decision, Routed) and [c.name for c in decision.changes] == [
        "cause.reactivated",
        "failure.attributed",
    ]


def test_no_duplicate_goes_on_to_node_assignment() -> None:
    assert routing.after_dedup(MEM, "f1", SCREENED, Dedup(False, None), None) is None


def test_a_duplicate_outside_the_candidates_is_refused() -> None:
    # C2 exists, but stage 2a did not pass it: Prompt 2 may only pick a screened cause
    assert routing.after_dedup(MEM, "f1", SCREENED, Dedup(True, "C2"), None) == ReplyRefusal(
        "deduplicate", "matched_cause_id 'C2' was not among the candidates"
    )


def test_no_dedup_reply_is_refused_with_its_reason() -> None:
    assert routing.after_dedup(MEM, "f1", SCREENED, None, "invalid reply after a re-ask") == ReplyRefusal(
        "deduplicate", "invalid reply after a re-ask"
    )


# --- stage 3a, Prompt 3 and stage 3.5 ---------------------------------------------------------


def test_the_shortlist_shows_each_node_with_its_best_member() -> None:
    views = routing.shortlist_views(MEM, [("N2", 0.4, "C3"), ("N1", 0.3, "C2")])
    assert views == (NodeView("N2", "label two", ("cause three",)), NodeView("N1", "label one", ("cause two",)))
    assert routing.shortlist_views(memory({"N1": ("empty", [])}), [("N1", float("-inf"), None)]) == (
        NodeView("N1", "empty", ()),
    )


VIEWS = (NodeView("N2", "label two", ("cause three",)),)


def test_a_new_node_takes_the_next_ids() -> None:
    decision = routing.route_assignment(MEM, "f1", "a new cause", VIEWS, Assignment(True, "a new label", None), None)
    assert decision == Routed(
        (
            NodeCreated(**{"node_id": "N3", "label": "a new label"}),
            CauseCreated(**{"cause_id": "C4", "node_id": "N3", "description": "a new cause", "failure_id": "f1"}),
        ),
        {"outcome": "new_node"},
    )


def test_an_assigned_node_on_the_shortlist_gets_the_cause() -> None:
    decision = routing.route_assignment(MEM, "f1", "a new cause", VIEWS, Assignment(False, None, "N2"), None)
    assert decision == Routed(
        (CauseCreated(**{"cause_id": "C4", "node_id": "N2", "description": "a new cause", "failure_id": "f1"}),),
        {"outcome": "existing_node"},
    )


def test_a_node_off_the_shortlist_is_refused_even_if_it_exists() -> None:
    decision = routing.route_assignment(MEM, "f1", "a new cause", VIEWS, Assignment(False, None, "N1"), None)
    assert decision == ReplyRefusal("assign_node", "assigned_node 'N1' was not on the shortlist")


def test_no_assignment_is_refused() -> None:
    assert routing.route_assignment(MEM, "f1", "x", VIEWS, None, None) == ReplyRefusal("assign_node", "no decision")


# --- stage 4a and Prompt 4 --------------------------------------------------------------------


def test_node_pairs_at_or_above_theta_merge_best_first_then_by_age() -> None:
    s = np.sqrt(0.5)
    ids = ["N1", "N2", "N3", "N4"]
    vecs = np.array([[1, 0, 0], [s, s, 0], [0, 1, 0], [1, 0, 0]], dtype=np.float32)
    # N1.N2 = N2.N3 = N2.N4 = 0.707107, N1.N4 = 1, N1.N3 = N3.N4 = 0
    assert routing.node_pairs(ids, vecs, 0.7) == [
        (1.0, "N1", "N4"),
        (0.707107, "N1", "N2"),
        (0.707107, "N2", "N3"),
        (0.707107, "N2", "N4"),
    ]
    assert routing.node_pairs(ids, vecs, 0.8) == [(1.0, "N1", "N4")]
    assert routing.node_pairs(ids, vecs, 0.707107) == routing.node_pairs(ids, vecs, 0.7)  # rounded, then compared
    assert routing.node_pairs([], np.zeros((0, 3)), 0.5) == []


def test_node_pairs_across_blocks_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(9, 4))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = [f"N{i}" for i in range(1, 10)]
    whole = routing.node_pairs(ids, vecs, 0.0)
    monkeypatch.setattr(routing, "PAIR_BLOCK", 2)
    assert routing.node_pairs(ids, vecs, 0.0) == whole and len(whole) > 0


def test_a_pair_is_open_while_both_nodes_live_and_were_not_absorbed() -> None:
    assert routing.pair_open(MEM, "N1", "N2", set())
    assert not routing.pair_open(MEM, "N1", "N2", {"N2"})
    assert not routing.pair_open(MEM, "N1", "N9", set())


def test_prompt_4_sees_all_of_a_nodes_causes() -> None:
    assert routing.node_view(MEM, "N1") == NodeView("N1", "label one", ("cause one", "cause two"))


def test_a_merge_keeps_the_older_node_relabelled() -> None:
    decision = routing.after_consolidation(MEM, "N1", "N2", 0.9, Consolidation(True, "merged label"), None)
    assert decision == Routed(
        (NodesMerged(**{"survivor": "N1", "absorbed": "N2", "label": "merged label", "similarity": 0.9}),),
        {"outcome": "merged"},
    )


def test_distinct_nodes_or_no_reply_change_nothing() -> None:
    assert routing.after_consolidation(MEM, "N1", "N2", 0.9, Consolidation(False, None), None) == Routed(
        outcome={"outcome": "distinct"}
    )
    assert routing.after_consolidation(MEM, "N1", "N2", 0.9, None, "no JSON") == ReplyRefusal(
        "consolidate", "nodes N1 and N2: no JSON"
    )
    assert routing.after_consolidation(MEM, "N1", "N2", 0.9, Consolidation(True, None), None) == ReplyRefusal(
        "consolidate", "nodes N1 and N2: merge is true but merged_label is null"
    )


def test_phrases_of_a_diagnostician_in_code_are_bounded_before_they_are_embedded() -> None:
    """What a diagnostician in code (the heuristic, the simulator's, a trainer's) answers is held
    to the parser's bound too: a phrase past ``limits.phrase_bytes`` decides nothing, and an id
    that is not supplied is quoted cut."""
    huge = " ".join(["y" * 60_000] * 15)
    bound = f"is {len(huge):,} bytes long: a phrase is at most 4,096 (limits.phrase_bytes)"
    assert routing.check_extraction(Extraction(None, huge), None, ()) == ReplyRefusal("extract", f"error_cause {bound}")
    assert routing.route_assignment(MEM, "f1", "x", VIEWS, Assignment(True, huge, None), None) == ReplyRefusal(
        "assign_node", f"new_node_label {bound}"
    )
    assert routing.after_consolidation(MEM, "N1", "N2", 0.9, Consolidation(True, huge), None) == ReplyRefusal(
        "consolidate", f"nodes N1 and N2: merged_label {bound}"
    )
    refused = routing.check_extraction(Extraction(huge, None), None, ("C1",))
    assert isinstance(refused, ReplyRefusal) and len(refused.reason) < 200


# --- the pipeline around the stages -----------------------------------------------------------


def test_a_consolidation_retried_after_another_producer_keeps_the_round_summary(tmp_path: Path) -> None:
    """Another producer appends a node while Prompt 4 is asked: the pair is decided again
    against the memory as it now is, and the summary still counts the round's screened pairs."""
    from diagevo.config.sections import DiagnosisConfig
    from diagevo.diagnosis.embedder import APIEmbedder
    from diagevo.diagnosis.interface import Reply
    from diagevo.diagnosis.pipeline import diagnose_round
    from diagevo.log import Recorder, open_log
    from diagevo.views.memory import load_memory
    from tests.llm_server import LLMServer

    l1 = "verify candidate solutions against the domain and constraints of the original equation"
    l2 = "check candidate solutions against the domain of the original equation after transforming it"
    merged = "verify candidate solutions against the domain and the constraints of every original equation"

    class Diagnostician:
        model_name = "scripted"

        def __init__(self, store: Recorder) -> None:
            self.store, self.asked = store, 0

        async def consolidate(self, a: NodeView, b: NodeView) -> Reply[Consolidation]:
            self.asked += 1
            if self.asked == 1:  # another producer, meanwhile
                self.store.append([wire_event("node.created", RUN, 2, "other", node_id="N3", label="another skill")])
            return Reply(Consolidation(True, merged), raw="merge", model=self.model_name)

    with LLMServer() as srv, open_log(f"sqlite:///{tmp_path / 'r.db'}") as store:
        srv.similar(l2, like=l1, cosine=0.9)
        store.append(
            [
                wire_event("run.started", RUN, 0, "start", config={"k": 0.5}),
                wire_event("node.created", RUN, 1, "n1", node_id="N1", label=l1),
                wire_event("node.created", RUN, 1, "n2", node_id="N2", label=l2),
                wire_event("round.committed", RUN, 1, "commit-1"),
            ]
        )
        dx = Diagnostician(store)
        cfg = DiagnosisConfig(theta_dup=0.5, theta_merge=0.5)
        summary = asyncio.run(
            diagnose_round(
                store=store,
                run=RUN,
                t=2,
                failures=[],
                diagnostician=dx,  # type: ignore[arg-type]
                embedder=APIEmbedder(srv.url, "test-embed"),
                cfg=cfg,
            )
        )
        mem = load_memory(store, RUN)
    assert dx.asked == 2  # asked again after the memory moved
    assert (summary.merge_candidates, summary.merges) == (1, 1)
    assert set(mem.nodes) == {"N1", "N3"} and mem.nodes["N1"].label == merged


def test_diagnosis_folds_each_row_of_the_round_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every flush of decisions is checked against the memory at the log's head, folded on the
    memory the round last checked against, not again from the round's start: each of the round's
    memory rows is folded once (a round of N failures costs N, not N^2)."""
    from collections import Counter

    import diagevo
    from diagevo.log import open_log
    from diagevo.rounds import Round, start_run
    from diagevo.train.config import Config
    from diagevo.views import memory as memory_view

    folded: Counter[int] = Counter()
    real = memory_view.fold_rows

    def watched(*args: Any, **kwargs: Any) -> Any:
        for row in real(*args, **kwargs):
            if row.round == 1:
                folded[row.seq] += 1
            yield row

    monkeypatch.setattr(memory_view, "fold_rows", watched)
    misses = ("\\boxed{{{}}}", "so the answer is \\boxed{{{}}}", "I could not finish.")
    failures = [
        diagevo.Failure(
            failure_id=f"f{i:03d}",
            question_id=f"q{i:03d}",
            question=f"How many apples are {i} and 7?",
            pseudo_label=str(i + 7),
            response=misses[i % 3].format(-(i + 7) if i % 3 == 0 else i + 8),
            reference=f"\\boxed{{{i + 7}}}",
        )
        for i in range(60)
    ]
    with open_log(f"sqlite:///{tmp_path / 'fold.db'}") as store:
        start_run(store, RUN, Config(), seed=1)
        rnd = Round(store, RUN, 1)
        summary = diagevo.diagnose(rnd, diagnostician="heuristic", failures=failures)
        assert summary.failed == 0 and summary.duplicates + summary.recurrences > 40  # 4 flushes of decisions
        assert len(folded) > 40  # the decisions of every flush but the last, checked by the next
        assert max(folded.values()) == 1, f"rows folded again: {sum(folded.values())} folds of {len(folded)} rows"
        assert rnd.memory() == fold(real(store, RUN), RUN)  # folded on where it stood, as from the start
