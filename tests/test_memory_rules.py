"""Hand-computed cases for Eq. 1 and Eq. 5-7, and the Appendix B case study as a log."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from types import MappingProxyType

import pytest

from diagevo.catalog import CauseCreated, CausePromoted, NodeCreated
from diagevo.memory import (
    CauseState,
    DecisionError,
    InvariantError,
    Memory,
    apply_changes,
    decide_attribution,
    decide_merge,
    decide_new_cause,
    decide_promotions,
    fold,
    fold_until,
    sample_requests,
    schedule,
)
from diagevo.memory.fold import drafts, evolve
from tests.logs import Log, stored

A, M = CauseState.ACTIVE, CauseState.MASTERED


def state(mem: Memory, cause: str) -> tuple[CauseState, int]:
    c = mem.causes[cause]
    return c.state, c.frequency


def promote(log: Log, round_start: Memory, evidence: list[tuple[str | None, float]], theta: float = 0.7) -> None:
    for change in decide_promotions(round_start, evidence, theta):
        log.append(change)


def attribute(log: Log, mem: Memory, failure: str, cause: str, via: str = "recurrence") -> Memory:
    changes = decide_attribution(mem, failure, cause, via)  # type: ignore[arg-type]
    for change in changes:
        log.append(change)
    return apply_changes(mem, log.round, changes)


def base_log() -> Log:
    """Round 1: node N1 with causes C1 (f=2) and C2 (f=1); committed."""
    log = Log()
    log.node("N1").cause("C1", "N1").cause("C2", "N1").attribute("C1", "f1")
    return log.commit()


def test_a_frequency_power_below_one_draws_causes_with_few_failures_more() -> None:
    """``memory.frequency_power`` q: p(e) ∝ f(e)^q over Active causes. C1 f=4, C2 f=1: q = 1 is
    Eq. 1 (4/5, 1/5), q = 0.5 gives 2/3 and 1/3 (√4 = 2, √1 = 1), q = 0 draws both alike; ε,
    F_t and F_1 are Eq. 1's whatever q is; a stored power out of [0, 1] reads as 1."""
    log = Log()
    log.node("N1").cause("C1", "N1").cause("C2", "N1")
    for f in ("f1", "f2", "f3"):
        log.attribute("C1", f)
    mem = fold(log.commit().rows(), "r1")
    for q, want in ((1.0, {"C1": 0.8, "C2": 0.2}), (0.5, {"C1": 2 / 3, "C2": 1 / 3}), (0.0, {"C1": 0.5, "C2": 0.5})):
        powered = replace(mem, config=MappingProxyType({**mem.config, "memory": {"k": 0.5, "frequency_power": q}}))
        s = schedule(powered)
        assert s.p == pytest.approx(want), q
        assert (s.F, s.F1, s.epsilon) == (5, 5, pytest.approx(5 / (5 + 5 / mem.k)))
    odd = replace(mem, config=MappingProxyType({**mem.config, "memory": {"frequency_power": 7}}))
    assert schedule(odd).p == schedule(mem).p == {"C1": 0.8, "C2": 0.2}


# --- Eq. 6: promotion ---------------------------------------------------------------------------


def test_promotion_at_threshold_and_below() -> None:
    log = base_log()
    m1 = fold(log.rows(), "r1")
    assert state(m1, "C1") == (A, 2) and state(m1, "C2") == (A, 1)
    # C1: mean p1 = (0.6 + 0.8) / 2 = 0.70 >= θ_up -> promoted; C2: 0.65 < 0.70 -> stays
    changes = decide_promotions(m1, [("C1", 0.6), ("C1", 0.8), ("C2", 0.65), (None, 0.99)], 0.70)
    assert [type(c) for c in changes] == [CausePromoted]
    assert [c.model_dump() for c in changes] == [{"cause_id": "C1", "acc": pytest.approx(0.70), "n_candidates": 2}]
    m = apply_changes(m1, 2, changes)
    assert state(m, "C1") == (M, 0) and state(m, "C2") == (A, 1)


def test_promotion_compares_the_exact_mean_of_vote_shares() -> None:
    """p1 are ratios of counts (votes / 12). These fifteen have an exact mean of 126/180 = 7/10,
    which a float sum puts at 0.6999999999999998; five others reach 7/10 exactly in floats too.
    Both sets sit at θ_up and both are promoted."""
    m1 = fold(base_log().rows(), "r1")
    fifteen = [7, 8, 8, 6, 7, 7, 8, 10, 7, 11, 8, 11, 11, 8, 9]
    five = [0, 6, 12, 12, 12]
    assert sum(k / 12 for k in fifteen) / 15 < 0.70 and sum(k / 12 for k in five) / 5 == 0.70
    evidence = [("C1", k / 12) for k in fifteen] + [("C2", k / 12) for k in five]
    changes = decide_promotions(m1, evidence, 0.70)
    assert [(c.cause_id, c.acc, c.n_candidates) for c in changes if isinstance(c, CausePromoted)] == [
        ("C1", 0.7, 15),
        ("C2", 0.7, 5),
    ]
    # one vote fewer on one candidate is below θ_up, and stays so
    fewer = [("C1", k / 12) for k in [6, *fifteen[1:]]]
    assert decide_promotions(m1, fewer, 0.70) == []


def test_active_cause_without_candidates_is_not_promoted() -> None:
    m1 = fold(base_log().rows(), "r1")
    assert decide_promotions(m1, [("C1", 0.9)], 0.7) == [CausePromoted(cause_id="C1", acc=0.9, n_candidates=1)]
    # C2 has P_t(C2) empty: never promoted, whatever θ_up is
    assert all(getattr(c, "cause_id", None) != "C2" for c in decide_promotions(m1, [("C1", 0.9)], 0.0))


def test_mastered_or_unknown_causes_are_not_promoted_and_ablation_disables() -> None:
    log = base_log()
    m1 = fold(log.rows(), "r1")
    promote(log, m1, [("C1", 0.9)])
    log.commit()
    m2 = fold(log.rows(), "r1")
    assert state(m2, "C1") == (M, 0)
    assert decide_promotions(m2, [("C1", 1.0), ("C9", 1.0)], 0.7) == []
    assert decide_promotions(m1, [("C1", 1.0)], 0.7, enabled=False) == []


# --- Eq. 7: joint state and frequency update -----------------------------------------------------


def test_every_branch_of_eq7() -> None:
    log = Log()
    log.node("N1").cause("C1", "N1").cause("C2", "N1").attribute("C1", "f1").node("N2").cause("C3", "N2")
    log.commit()
    # round 2: C1 and C3 promoted (Mastered, 0); C2 stays (Active, 1)
    m1 = fold(log.rows(), "r1")
    promote(log, m1, [("C1", 0.75), ("C3", 0.9), ("C2", 0.2)])
    mem = fold(log.rows(), "r1")
    # Δ(C1) = 2 after promotion in the same round -> (Active, Δ) = (Active, 2)
    mem = attribute(log, mem, "f2", "C1")
    mem = attribute(log, mem, "f3", "C1", via="dedup")
    # Δ(C2) = 1 on an Active cause -> (Active, f̃ + Δ) = (Active, 2)
    mem = attribute(log, mem, "f4", "C2")
    log.commit()
    m2 = fold(log.rows(), "r1")
    assert state(m2, "C1") == (A, 2)  # promoted and reactivated in the same round
    assert state(m2, "C2") == (A, 2)
    assert state(m2, "C3") == (M, 0)  # Mastered with no failure keeps (Mastered, 0)
    types = [e.type for e in log.events() if e.round == 2]
    assert types.count("cause.reactivated") == 1  # only the first attribution reactivates
    # round 3: a Mastered cause promoted in an earlier round is reactivated by one failure
    mem = attribute(log, m2, "f5", "C3")
    log.commit()
    assert state(fold(log.rows(), "r1"), "C3") == (A, 1)


def refused_as_absent(rows: list, run: str, said: str) -> None:
    """The fold of ``rows`` passes the last one over: the memory as without it, and the row's
    seq, type and the rule in words kept with the memory (:attr:`Memory.refused`)."""
    mem = fold(rows, run)
    assert [(r.seq, r.type) for r in mem.refused] == [(rows[-1].seq, rows[-1].type)]
    assert re.search(said, mem.refused[0].why), mem.refused[0].why
    without = fold(rows[:-1], run)
    assert replace(mem, refused=(), last_seq=without.last_seq) == without


def test_attribution_to_mastered_without_reactivation_is_rejected() -> None:
    log = base_log()
    promote(log, fold(log.rows(), "r1"), [("C1", 0.9)])
    log.attribute("C1", "f9")  # skips cause.reactivated
    refused_as_absent(log.rows(), "r1", "Mastered cause C1 without cause.reactivated")
    with pytest.raises(InvariantError, match="Mastered cause C1 without cause.reactivated"):  # one event: raised
        evolve(fold(log.rows()[:-1], "r1"), log.rows()[-1].event, log.rows()[-1].round)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda log: log.attribute("C7", "f"), "unknown cause 'C7'"),
        (lambda log: log.cause("C9", "N7"), "unknown node 'N7'"),
        (lambda log: log.cause("C1", "N1"), "cause 'C1' created twice"),
        (lambda log: log.add("nodes.merged", survivor="N1", absorbed="N1", label="x"), "merged with itself"),
    ],
)
def test_invariants(mutate, message: str) -> None:  # noqa: ANN001
    log = base_log()
    mutate(log)
    refused_as_absent(log.rows(), "r1", message)


def test_rounds_cannot_go_backwards_or_commit_twice() -> None:
    log = base_log()
    rows = log.rows()
    late = stored(len(rows) + 1, 1, "question.scored", {})
    refused_as_absent([*rows, late], "r1", "round 1 goes backwards")
    refused_as_absent([*rows, stored(len(rows) + 1, 1, "round.committed", {})], "r1", "round 1 committed twice")
    refused_as_absent([*rows, stored(len(rows) + 1, 3, "round.started", {})], "r1", "round 3 starts before round 2")


def test_deciders_reject_invented_ids() -> None:
    m = fold(base_log().rows(), "r1")
    with pytest.raises(DecisionError):
        decide_attribution(m, "f", "C42", "dedup")
    with pytest.raises(DecisionError):
        decide_new_cause(m, "f", "desc", node_id="N42")
    with pytest.raises(DecisionError):
        decide_merge(m, "N1", "N42", "label")


def test_merge_reparents_and_keeps_states() -> None:
    log = base_log()
    log.node("N2", "second label").cause("C3", "N2")
    m = fold(log.rows(), "r1")
    for change in decide_merge(m, "N1", "N2", "merged label", 0.8):
        log.append(change)
    log.commit()
    m = fold(log.rows(), "r1")
    assert set(m.nodes) == {"N1"} and m.nodes["N1"].label == "merged label"
    assert {c.node for c in m.causes.values()} == {"N1"}
    assert [state(m, c) for c in ("C1", "C2", "C3")] == [(A, 2), (A, 1), (A, 1)]


def test_new_cause_ids_are_sequential_across_merges() -> None:
    m = fold(base_log().rows(), "r1")
    changes = decide_new_cause(m, "f7", "a new description", new_node_label="new node")
    assert changes[0] == NodeCreated(node_id="N2", label="new node")
    created = changes[1]
    assert isinstance(created, CauseCreated) and (created.cause_id, created.node_id) == ("C3", "N2")


# --- Eq. 1: schedule over several rounds --------------------------------------------------------


def test_schedule_over_rounds() -> None:
    log = base_log()  # F_1 = 3 (C1: 2, C2: 1), k = 0.5
    s = schedule(fold_until(log.rows(), "r1", 1))
    assert (s.round, s.F, s.F1) == (2, 3, 3)
    assert s.epsilon == pytest.approx(3 / (3 + 3 / 0.5))  # = 1/3
    assert s.p == pytest.approx({"C1": 2 / 3, "C2": 1 / 3})
    # round 2: C1 promoted, C2 gets 3 more failures, a new cause C3 (f=1): F_2 = 4 + 1 = 5
    promote(log, fold(log.rows(), "r1"), [("C1", 0.8)])
    mem = fold(log.rows(), "r1")
    for f in ("a", "b", "c"):
        mem = attribute(log, mem, f, "C2")
    log.cause("C3", "N1")
    log.commit()
    s = schedule(fold_until(log.rows(), "r1", 2))
    assert (s.F, s.F1) == (5, 3)
    assert s.epsilon == pytest.approx(3 / (3 + 5 / 0.5))  # = 3/13
    assert s.p == pytest.approx({"C2": 4 / 5, "C3": 1 / 5})
    # round 3: everything promoted -> F = 0 -> ε = 1, no p
    promote(log, fold(log.rows(), "r1"), [("C2", 0.9), ("C3", 0.71)])
    log.commit()
    s = schedule(fold_until(log.rows(), "r1", 3))
    assert (s.F, s.epsilon, s.p) == (0, 1.0, {})
    # the replay of an earlier round is unchanged by later events
    assert schedule(fold_until(log.rows(), "r1", 1)).epsilon == pytest.approx(1 / 3)


def test_f1_is_first_nonzero_f_when_round_one_has_none() -> None:
    log = Log(k=1.0)
    log.commit()  # round 1: no failures diagnosed
    assert fold(log.rows(), "r1").F1 is None
    assert schedule(fold(log.rows(), "r1")).epsilon == 1.0
    log.node("N1").cause("C1", "N1").cause("C2", "N1")
    log.commit()  # round 2: F = 2 becomes the reference
    m = fold(log.rows(), "r1")
    assert m.F1 == 2
    log.attribute("C1", "x").attribute("C1", "y")
    log.commit()  # F_3 = 4 -> ε_4 = 2 / (2 + 4 / 1)
    assert schedule(fold(log.rows(), "r1")).epsilon == pytest.approx(1 / 3)


# --- Appendix B case study ------------------------------------------------------------------------

DOMAIN = (
    "Fails to check whether candidate solutions remain valid under the original domain restrictions after algebraic "
    "transformation."
)
AMGM = (
    "Applies AM-GM to derive a lower bound but does not check whether an allowed input satisfies the equality "
    "condition."
)


def test_appendix_b_case_study() -> None:
    log = Log()
    # round 1: the AM-GM cause is diagnosed under "Checking Conditions after Algebraic Steps"
    log.node("N1", "Checking Conditions after Algebraic Steps").cause("C1", "N1", AMGM)
    log.commit()
    # round 2: targeted questions on C1 reach high self-consistency -> Mastered
    m = fold(log.rows(), "r1")
    log.question("q2a", 0.75, active="C1").question("q2b", 0.83, active="C1")
    promote(log, m, [("C1", 0.75), ("C1", 0.83)])
    log.commit()
    # round 3 (t): log2(x-1)+log2(x-5)=3, only the agreeing trajectory checks x > 5
    log.add(
        "failure.recorded",
        failure_id="fail-log",
        question_id="q3",
        response="x = 3 ± 2√3",
        reference="x > 5 so x = 3 + 2√3",
    )
    log.add("failure.diagnosed", failure_id="fail-log", error_cause=DOMAIN, model="diag")
    log.cause("C2", "N1", DOMAIN, failure="fail-log")
    log.commit()
    m3 = fold(log.rows(), "r1")
    assert state(m3, "C2") == (A, 1) and state(m3, "C1") == (M, 0)
    s = schedule(m3)
    assert s.p == {"C2": 1.0}
    # round t+1: the schedule targets C2 and stitching pairs it with its Mastered sibling C1
    reqs = sample_requests(m3, s, 50, random.Random(0))
    targeted = [r for r in reqs if r.mode != "free"]
    assert targeted and all(r.mode == "stitched" and r.mastered_cause == "C1" for r in targeted)
    assert all(r.node_label == "Checking Conditions after Algebraic Steps" for r in targeted)
    # mean self-consistency on C2's questions: 48.2% -> 65.6% -> 75.0% (promoted at the third)
    for acc, promoted in ((0.482, False), (0.656, False), (0.750, True)):
        start = fold(log.rows(), "r1")
        log.question(f"q{log.round}", acc, active="C2", mastered="C1")
        promote(log, start, [("C2", acc)])
        if not promoted:
            log.attribute("C2", f"fail-{log.round}")
        log.commit()
        assert state(fold(log.rows(), "r1"), "C2")[0] == (M if promoted else A)
    final = fold(log.rows(), "r1")
    assert state(final, "C2") == (M, 0)
    assert schedule(final).epsilon == 1.0  # nothing Active: back to free exploration


def test_nodes_are_listed_as_people_count_them() -> None:
    from types import MappingProxyType

    from diagevo.memory import Node

    ids = ["N10", "N2", "N²", "N١", "Nx", "N1"]  # '²'.isdigit() holds and int('²') fails
    mem = Memory(run="r", k=1.0, nodes=MappingProxyType({i: Node(i, i) for i in ids}))
    assert [n.id for n in mem.nodes_in_order()] == ["N1", "N2", "N10", "Nx", "N²", "N١"]


START = stored(1, 0, "run.started", {"config": {"k": 0.5}, "seed": 0}, 2)


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ((2, 1, "cause.promoted", {"acc": 1.0, "n_candidates": 1}, 1), "cause.promoted's data.cause_id is not a text"),
        ((2, 1, "node.created", {"node_id": "N1", "label": 7}, 1), "node.created's data.label is not a text"),
        ((2, 1, "run.configured", {"config": "k=1"}, 1), "run.configured's data.config is not a table"),
        (
            (2, 1, "run.configured", {"config": {"k": 1.0}, "seed": 1.5}, 1),
            "run.configured's data.seed is not a whole number",
        ),
    ],
)
def test_a_row_no_database_checked_is_named_by_its_seq_before_it_is_folded(row: tuple, said: str) -> None:
    """A stored row is built without validation: what the fold reads of it is checked first
    (data that is no JSON object is passed over by every read: tests/test_passed_over_rows.py)."""
    refused_as_absent([START, stored(*row)], "r", rf"^{said}$")
    assert [(row.seq, len(draft.refused)) for draft, row in drafts([START, stored(*row)], "r")] == [(1, 0), (2, 1)]
    with pytest.raises(InvariantError, match=r"^seq 1: run.started's data.config is not a table$"):
        fold([stored(1, 0, "run.started", {"config": None}, 2)], "r")
