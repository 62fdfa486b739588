"""The simulated diagnostician: first divergence, slips, known causes, dedup, nodes, merges."""

from __future__ import annotations

import asyncio
import random
from fractions import Fraction

import pytest

from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView
from diagevo.train.sim.diagnostician import SimDiagnostician, first_divergence
from diagevo.train.sim.families import AREAS, FAMILIES, FAMILY_BY_NAME
from diagevo.train.sim.world import Question, Spec, build, render_response


def _no_embedder():  # noqa: ANN202 - every text in these tests is in the paraphrase tables
    raise AssertionError("the embedder should not be needed for texts the world wrote")


def _diag(rate: float = 0.0) -> SimDiagnostician:
    return SimDiagnostician(FAMILIES, rate, _no_embedder)


def _run(coro):  # noqa: ANN001, ANN202
    return asyncio.run(coro)


def _item(q: Question, failing: str, reference: str, known: tuple[KnownCause, ...] = ()) -> ExtractionInput:
    return ExtractionInput("f1", "q1", q.text, "x", failing, reference, known)


def _resp(q: Question, ok: tuple[bool, ...], value: Fraction | None = None) -> str:
    return render_response(q.paths[ok], q.values[ok] if value is None else value)


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_finds_the_planted_divergence(family: str) -> None:
    rng = random.Random(family)
    q = build(Spec((family,), rng.randint(0, 3), 1, 1, rng.getrandbits(48)), FAMILY_BY_NAME)
    reply = _run(_diag().extract(_item(q, _resp(q, (False,)), _resp(q, (True,)))))
    assert reply.value.matched_cause_id is None
    assert reply.value.error_cause in FAMILY_BY_NAME[family].causes
    assert '"error_cause"' in reply.raw and reply.model == "sim-diagnostician"
    # the reference can be the wrong one (a trap pseudo-label): the divergence is the same skill
    swapped = _run(_diag().extract(_item(q, _resp(q, (True,)), _resp(q, (False,)))))
    assert swapped.value.error_cause in FAMILY_BY_NAME[family].causes


def test_pure_arithmetic_slip_is_non_skill() -> None:
    q = build(Spec(("inclusion_exclusion",), 2, 0, 0, 5), FAMILY_BY_NAME)
    slipped = _resp(q, (True,), q.answer + 3)
    reply = _run(_diag().extract(_item(q, slipped, _resp(q, (True,)))))
    assert reply.value.matched_cause_id is None and reply.value.error_cause is None
    # a slip after a trap: the earlier reasoning difference is what counts
    both = _resp(q, (False,), q.trap + 2)
    assert _run(_diag().extract(_item(q, both, _resp(q, (True,))))).value.error_cause is not None


def test_stitched_failure_matches_the_supplied_cause_of_its_skill() -> None:
    q = build(Spec(("extraneous_roots", "log_domain"), 1, 0, 0, 8), FAMILY_BY_NAME)
    failing = _resp(q, (True, False))  # the logarithm domain check was skipped
    a, b = first_divergence(failing, _resp(q, (True, True)))
    assert "logarithm" in a + b
    known = (
        KnownCause("c-act", "active", FAMILY_BY_NAME["extraneous_roots"].causes[0]),
        KnownCause("c-mas", "mastered", FAMILY_BY_NAME["log_domain"].causes[3]),
    )
    reply = _run(_diag().extract(_item(q, failing, _resp(q, (True, True)), known)))
    assert reply.value.matched_cause_id == "c-mas" and reply.value.error_cause is None
    other = (KnownCause("c-x", "active", FAMILY_BY_NAME["negative_remainder"].causes[0]),)
    reply = _run(_diag().extract(_item(q, failing, _resp(q, (True, True)), other)))
    assert reply.value.matched_cause_id is None and reply.value.error_cause in FAMILY_BY_NAME["log_domain"].causes


def test_paraphrases_vary_across_failures_of_one_skill() -> None:
    rng = random.Random(0)
    seen = set()
    for _ in range(30):
        q = build(Spec(("sign_flip_inequality",), 1, 0, 0, rng.getrandbits(48)), FAMILY_BY_NAME)
        seen.add(_run(_diag().extract(_item(q, _resp(q, (False,)), _resp(q, (True,))))).value.error_cause)
    assert len(seen) >= 3


def test_deduplicate_by_mechanism_not_wording() -> None:
    fam = FAMILY_BY_NAME["successive_percentages"]
    cands = (
        KnownCause("c1", "active", FAMILY_BY_NAME["reverse_percentage"].causes[0]),
        KnownCause("c2", "mastered", fam.causes[2]),
    )
    reply = _run(_diag().deduplicate(fam.causes[0], cands))
    assert reply.value.duplicate and reply.value.matched_cause_id == "c2"
    reply = _run(_diag().deduplicate(fam.causes[0], cands[:1]))
    assert not reply.value.duplicate and reply.value.matched_cause_id is None


def test_node_assignment_and_consolidation_follow_knowledge_areas() -> None:
    algebra = NodeView("n1", AREAS["algebra"][0], (FAMILY_BY_NAME["log_domain"].causes[0],))
    counting = NodeView("n2", AREAS["combinatorics"][1], (FAMILY_BY_NAME["polygon_diagonals"].causes[1],))
    reply = _run(_diag().assign_node(FAMILY_BY_NAME["amgm_equality"].causes[1], (counting, algebra)))
    assert reply.value.assigned_node == "n1" and not reply.value.create_new_node
    reply = _run(_diag().assign_node(FAMILY_BY_NAME["negative_remainder"].causes[1], (counting, algebra)))
    assert reply.value.create_new_node and reply.value.new_node_label in AREAS["number_theory"]
    twin = NodeView("n3", AREAS["algebra"][2], (FAMILY_BY_NAME["sign_flip_inequality"].causes[0],))
    merged = _run(_diag().consolidate(algebra, twin))
    assert merged.value.merge and merged.value.merged_label in AREAS["algebra"]
    assert not _run(_diag().consolidate(algebra, counting)).value.merge


def test_decisions_are_deterministic_and_err_at_the_configured_rate() -> None:
    rng = random.Random(1)
    qs = [build(Spec((f.name,), 1, 0, 0, rng.getrandbits(48)), FAMILY_BY_NAME) for f in FAMILIES for _ in range(15)]
    items = [_item(q, _resp(q, (False,)), _resp(q, (True,))) for q in qs]

    def wrong(rate: float) -> float:
        d = _diag(rate)
        bad = 0
        for q, it in zip(qs, items, strict=True):
            cause = _run(d.extract(it)).value.error_cause
            bad += cause not in FAMILY_BY_NAME[q.parts[0].family].causes
        return bad / len(qs)

    assert wrong(0.0) == 0.0
    assert 0.03 < wrong(0.3) < 0.45
    assert _run(_diag(0.3).extract(items[0])) == _run(_diag(0.3).extract(items[0]))
