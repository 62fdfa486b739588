"""The simulated diagnostician: first divergence, slips, known causes, dedup, nodes, merges --
all at the level of trap variants (causes) and families (skill nodes)."""

from __future__ import annotations

import asyncio
import random
from fractions import Fraction

import pytest

from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView
from diagevo.train.sim.diagnostician import SimDiagnostician, first_divergence
from diagevo.train.sim.families import catalogue
from diagevo.train.sim.solver import sigmoid
from diagevo.train.sim.world import SimQuestion, Spec, build, render_response

FAMILIES = catalogue().families
FAMILY_BY_NAME = catalogue().family_by_name
V = catalogue().variant_by_key


def _no_embedder():  # noqa: ANN202 - every text in these tests is in the paraphrase tables
    raise AssertionError("the embedder should not be needed for texts the world wrote")


def _diag(rate: float = 0.0) -> SimDiagnostician:
    return SimDiagnostician(FAMILIES, rate, _no_embedder)


def _run(coro):  # noqa: ANN001, ANN202
    return asyncio.run(coro)


def _item(q: SimQuestion, failing: str, reference: str, known: tuple[KnownCause, ...] = ()) -> ExtractionInput:
    return ExtractionInput(
        failure_id="f1",
        question_id="q1",
        question=q.text,
        pseudo_label="x",
        response=failing,
        reference=reference,
        known=known,
    )


def _resp(q: SimQuestion, ok: tuple[bool, ...], value: Fraction | None = None) -> str:
    return render_response(q.paths[ok], q.values[ok] if value is None else value)


@pytest.mark.parametrize("key", sorted(V))
def test_finds_the_planted_divergence(key: str) -> None:
    rng = random.Random(key)
    for _ in range(3):
        q = build(Spec((key,), rng.randint(0, 3), 1, 1, rng.getrandbits(48)), V)
        reply = _run(_diag().extract(_item(q, _resp(q, (False,)), _resp(q, (True,)))))
        assert reply.value.matched_cause_id is None
        assert reply.value.error_cause in V[key].causes  # this variant's, not a sibling's
        assert '"error_cause"' in reply.raw and reply.model == "sim-diagnostician"
        # the reference can be the wrong one (a trap pseudo-label): the divergence is the same
        swapped = _run(_diag().extract(_item(q, _resp(q, (True,)), _resp(q, (False,)))))
        assert swapped.value.error_cause in V[key].causes


def test_pure_arithmetic_slip_is_non_skill() -> None:
    q = build(Spec(("inclusion_exclusion.union_two",), 2, 0, 0, 5), V)
    slipped = _resp(q, (True,), q.answer + 3)
    reply = _run(_diag().extract(_item(q, slipped, _resp(q, (True,)))))
    assert reply.value.matched_cause_id is None and reply.value.error_cause is None
    # a slip after a trap: the earlier reasoning difference is what counts
    both = _resp(q, (False,), q.trap + 2)
    assert _run(_diag().extract(_item(q, both, _resp(q, (True,))))).value.error_cause is not None


def test_stitched_failure_matches_the_supplied_cause_of_its_skill() -> None:
    q = build(Spec(("extraneous_roots.radical_sign", "extraneous_roots.rational_pole"), 1, 0, 0, 8), V)
    failing = _resp(q, (True, False))  # the denominator check was skipped
    a, b = first_divergence(failing, _resp(q, (True, True)))
    assert "denominator" in a + b
    known = (
        KnownCause("c-act", "active", V["extraneous_roots.radical_sign"].causes[0]),
        KnownCause("c-mas", "mastered", V["extraneous_roots.rational_pole"].causes[3]),
    )
    reply = _run(_diag().extract(_item(q, failing, _resp(q, (True, True)), known)))
    assert reply.value.matched_cause_id == "c-mas" and reply.value.error_cause is None
    # a supplied cause of a sibling variant (same skill, other mechanism) is not a match
    sibling = (KnownCause("c-x", "active", V["extraneous_roots.plus_minus_root"].causes[0]),)
    reply = _run(_diag().extract(_item(q, failing, _resp(q, (True, True)), sibling)))
    assert reply.value.matched_cause_id is None
    assert reply.value.error_cause in V["extraneous_roots.rational_pole"].causes


def test_paraphrases_vary_across_failures_of_one_skill() -> None:
    rng = random.Random(0)
    seen = set()
    for _ in range(30):
        q = build(Spec(("sign_flip_inequality.divide_negative",), 1, 0, 0, rng.getrandbits(48)), V)
        seen.add(_run(_diag().extract(_item(q, _resp(q, (False,)), _resp(q, (True,))))).value.error_cause)
    assert len(seen) >= 3


class _Embedder:
    """The real MiniLM, loaded lazily once (dedup compares wordings by cosine similarity)."""

    inner = None

    def __call__(self):  # noqa: ANN204
        if _Embedder.inner is None:
            from diagevo.diagnosis.embedder import LocalEmbedder

            _Embedder.inner = LocalEmbedder()
        return _Embedder.inner


def test_deduplicate_by_mechanism_not_wording() -> None:
    d = SimDiagnostician(FAMILIES, 0.0, _Embedder())
    up = V["successive_percentages.up_then_down"]
    cands = (
        KnownCause("c1", "active", V["reverse_percentage.undo_raise"].causes[0]),
        KnownCause("c0", "active", V["successive_percentages.compound_years"].causes[0]),  # a sibling
        KnownCause("c2", "mastered", up.causes[0]),
    )
    reply = _run(d.deduplicate(up.causes[0], cands))
    assert reply.value.duplicate and reply.value.matched_cause_id == "c2"
    reply = _run(d.deduplicate(up.causes[0], cands[:2]))
    assert not reply.value.duplicate and reply.value.matched_cause_id is None
    # other wordings of the same mechanism: confirmed more often the closer they read (over 60
    # draws, the stored cause's id changed), as often as sigmoid((cos - dedup_mid) / dedup_width)
    # says; never a sibling
    rates: dict[float, float] = {}
    for i, new in enumerate(up.causes[1:]):
        for j, c in enumerate(V["successive_percentages.compound_years"].causes):
            assert not _run(d.deduplicate(new, (KnownCause(f"s{j}", "active", c),))).value.duplicate
        assert _run(d.deduplicate(new, cands)).value.matched_cause_id in (None, "c2"), i
        draws = [_run(d.deduplicate(new, (KnownCause(f"m{k}", "mastered", up.causes[0]),))) for k in range(60)]
        cos = float(_Embedder()().embed([new])[0] @ _Embedder()().embed([up.causes[0]])[0])
        rates[cos] = sum(r.value.duplicate for r in draws) / len(draws)
        assert abs(rates[cos] - sigmoid((cos - d.dedup_mid) / d.dedup_width)) < 0.2, (new, cos, rates[cos])
    by_closeness = [rates[cos] for cos in sorted(rates)]
    assert by_closeness == sorted(by_closeness) and by_closeness[0] < by_closeness[-1], rates
    always = SimDiagnostician(FAMILIES, 0.0, _Embedder(), dedup_mid=-1.0)
    assert all(_run(always.deduplicate(new, cands)).value.matched_cause_id == "c2" for new in up.causes[1:])
    never = SimDiagnostician(FAMILIES, 0.0, _Embedder(), dedup_mid=2.0)
    assert not any(_run(never.deduplicate(new, cands)).value.duplicate for new in up.causes[1:])


def test_node_assignment_and_consolidation_follow_skills() -> None:
    logs = FAMILY_BY_NAME["log_domain"]
    roots = NodeView("n1", logs.labels[0], (V["log_domain.argument_positive"].causes[0],))
    counting = NodeView(
        "n2", FAMILY_BY_NAME["polygon_diagonals"].labels[1], (V["polygon_diagonals.one_vertex"].causes[1],)
    )
    # a new mechanism of the same skill joins its node
    reply = _run(_diag().assign_node(V["log_domain.power_rule"].causes[1], (counting, roots)))
    assert reply.value.assigned_node == "n1" and not reply.value.create_new_node
    # another skill of the same knowledge area (algebra) gets a node of its own, labelled by skill
    reply = _run(_diag().assign_node(V["amgm_equality.endpoint_upper"].causes[1], (counting, roots)))
    assert reply.value.create_new_node and reply.value.new_node_label in FAMILY_BY_NAME["amgm_equality"].labels
    # two nodes created for one skill under different label wordings are merged
    twin = NodeView("n3", logs.labels[2], (V["log_domain.base_domain"].causes[0],))
    merged = _run(_diag().consolidate(roots, twin))
    assert merged.value.merge and merged.value.merged_label in logs.labels
    assert not _run(_diag().consolidate(roots, counting)).value.merge
    amgm = NodeView("n4", FAMILY_BY_NAME["amgm_equality"].labels[0], (V["amgm_equality.endpoint_lower"].causes[0],))
    assert not _run(_diag().consolidate(roots, amgm)).value.merge  # same area, different skills
    # a judge that reads sibling mechanisms as different skills opens a second node for the skill
    strict = SimDiagnostician(FAMILIES, 0.0, _Embedder(), assign_mid=2.0)
    reply = _run(strict.assign_node(V["log_domain.power_rule"].causes[1], (counting, roots)))
    assert reply.value.create_new_node and reply.value.new_node_label in logs.labels
    # an empty node is read from its label
    assert (
        _run(
            _diag().assign_node(V["log_domain.base_domain"].causes[2], (NodeView("n5", logs.labels[1]),))
        ).value.assigned_node
        == "n5"
    )


def test_decisions_are_deterministic_and_err_at_the_configured_rate() -> None:
    rng = random.Random(1)
    qs = [
        build(Spec((v.key,), 1, 0, 0, rng.getrandbits(48)), V) for f in FAMILIES for v in f.variants for _ in range(4)
    ]
    items = [_item(q, _resp(q, (False,)), _resp(q, (True,))) for q in qs]

    def wrong(rate: float) -> float:
        d = _diag(rate)
        bad = 0
        for q, it in zip(qs, items, strict=True):
            cause = _run(d.extract(it)).value.error_cause
            bad += cause not in V[q.parts[0].skill].causes
        return bad / len(qs)

    assert wrong(0.0) == 0.0
    assert 0.03 < wrong(0.3) < 0.45
    assert _run(_diag(0.3).extract(items[0])) == _run(_diag(0.3).extract(items[0]))
