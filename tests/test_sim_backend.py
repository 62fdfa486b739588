"""The sim backend end to end: the challenger reads cause texts through the real embedding model,
learns from the challenger reward on its texts, and a realistic round embeds nothing twice."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from diagevo.curriculum.answers import extract_answer
from diagevo.memory.sampler import FREE, GenerationRequest
from diagevo.train.config import Config
from diagevo.train.sim.backend import SimBackend

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def embedder():  # noqa: ANN201 - the real local MiniLM, loaded once for the module
    from diagevo.diagnosis.embedder import LocalEmbedder

    return LocalEmbedder()


def _backend(embedder, **params: float) -> SimBackend:  # noqa: ANN001
    cfg = Config()
    cfg.sim.params = dict(params)
    return SimBackend(cfg, embedder=embedder)


def _skills_of(b: SimBackend, outputs: list[str]) -> list[tuple[str, ...]]:
    return [b.registry.lookup(o).spec.skills for o in outputs]


# paraphrases written for this test: none of them is in the world's own paraphrase tables; the
# pairs within a family name sibling mechanisms, which the challenger must tell apart
TARGETS = {
    "extraneous_roots.radical_sign": "does not substitute roots back into the square root equation after squaring it",
    "extraneous_roots.plus_minus_root": (
        "solves a squared binomial equal to a number but reports only the positive root"
    ),
    "negative_remainder.negated_residue": "gives a remainder below zero when the number being divided is negative",
    "negative_remainder.floor_quotient": "rounds the quotient of a negative number towards zero instead of down",
    "inclusion_exclusion.union_two": (
        "sums two overlapping counts and never removes the elements shared by both conditions"
    ),
    "inclusion_exclusion.three_sets": (
        "leaves out the numbers divisible by all three values when counting a union of three"
    ),
    "sampling_without_replacement.both_same": (
        "keeps the same odds for the second pick although the first item was not put back"
    ),
    "successive_percentages.up_then_down": (
        "adds a percentage rise and a later percentage drop as if both used the same base"
    ),
    "successive_percentages.compound_years": (
        "treats several years of percentage growth as simple interest without compounding"
    ),
    "circular_arrangements.round_table": "counts seatings around a round table as if the seats were in a straight row",
    "circular_arrangements.necklace_reflection": "counts a bracelet and its mirror image as two different bracelets",
}


@pytest.mark.parametrize("key", sorted(TARGETS))
def test_targeted_generation_reads_the_cause_text(embedder, key: str) -> None:  # noqa: ANN001
    b = _backend(embedder)
    fam = next(f for f in b.fams if f.name == key.split(".")[0])
    req = GenerationRequest(
        mode="targeted", active_cause="c9", active_text=TARGETS[key], node="n1", node_label=fam.labels[0]
    )
    skills = Counter(s[0] for s in _skills_of(b, b.generate([req] * 10, random.Random(0))))
    assert skills.most_common(1)[0][0] == key
    assert all(k.startswith(fam.name + ".") for k in skills)  # misreadings stay within the skill


def test_stitched_generation_needs_both_skills(embedder) -> None:  # noqa: ANN001
    b = _backend(embedder)
    req = GenerationRequest(
        mode="stitched",
        active_cause="c1",
        active_text=TARGETS["inclusion_exclusion.union_two"],
        mastered_cause="c2",
        mastered_text=TARGETS["inclusion_exclusion.three_sets"],
        node="n1",
        node_label=b.fams[2].labels[0],
    )
    outs = b.generate([req] * 8, random.Random(1))
    pairs = Counter(b.registry.lookup(out).spec.skills for out in outs)
    assert pairs.most_common(1)[0][0] == ("inclusion_exclusion.union_two", "inclusion_exclusion.three_sets")
    for out in outs:
        q = b.registry.lookup(out)
        assert len(set(q.spec.skills)) == 2 and all(k.startswith("inclusion_exclusion.") for k in q.spec.skills)
        assert len({q.values[k] for k in q.values}) == 4  # each skill's trap changes the answer
    # the solver fails stitched questions through either trap
    answers = Counter()
    for out, resps in zip(outs, b.sample(outs, 40, random.Random(2)), strict=True):
        q = b.registry.lookup(out)
        inverse = {v: k for k, v in q.values.items()}
        for r in resps:
            key = next(
                (k for k, v in inverse.items() if extract_answer(f"\\boxed{{{_fmt(k)}}}") == extract_answer(r)), None
            )
            answers[inverse.get(key)] += 1
    assert answers[(True, False)] > 0 and answers[(False, True)] > 0


def _fmt(x) -> str:  # noqa: ANN001
    from diagevo.train.sim.text import boxed

    return boxed(x)[len("\\boxed{") : -1]


def test_challenger_learns_from_the_reward_on_its_texts(embedder) -> None:  # noqa: ANN001
    """A reward that pays for length moves the free policy towards padding (and nothing else)."""
    b = _backend(embedder)
    rng = random.Random(3)
    before = b.challenger.expected("free")["pad"]

    def reward(reqs, outs):  # noqa: ANN001, ANN202
        return [len(o.split()) / 100 for o in outs]

    for _ in range(5):
        b.train_challenger([FREE] * 64, reward, rng)
    assert b.challenger.expected("free")["pad"] > before + 1.0
    assert b.challenger.expected("guided")["pad"] == pytest.approx(before)


def test_a_realistic_round_embeds_nothing_twice(embedder) -> None:  # noqa: ANN001
    """What keeps a simulated round at milliseconds: after the cause texts are embedded once (as
    the loop's earlier phases do), a round of 192 requests, 128 challenger updates, 12 answers per
    question, a solver update and the evaluation embeds no text again. The round's wall-clock time
    is measured by ``benchmarks/bench_sim_round.py``, not asserted here."""
    from diagevo.diagnosis.embedder import LocalEmbedder

    computed: list[str] = []
    counting = LocalEmbedder()  # its own cache; the model itself is loaded once per process
    real = counting._compute
    counting._compute = lambda texts: (computed.extend(texts), real(texts))[1]  # type: ignore[method-assign]
    b = _backend(counting)
    rng = random.Random(4)
    causes = [
        GenerationRequest("targeted", f"c{i}", t, None, None, "n1", None)
        for i, t in enumerate(list(TARGETS.values())[:6])
    ]
    reqs = ([FREE] * 6 + causes) * 16  # 192 requests, a third of them targeted
    b.generate(causes, rng)  # warm the embedding cache, as the loop's earlier phases would
    warm = len(computed)
    assert warm >= len(causes) and len(set(computed)) == len(computed)

    def chal_reward(rs, outs):  # noqa: ANN001, ANN202
        votes = b.sample(outs, 10, rng)
        return [Counter(extract_answer(r) for r in v).most_common(1)[0][1] / 10 for v in votes]

    b.train_challenger(reqs[:128], chal_reward, rng)
    texts = b.generate(reqs, rng)
    construction = b.sample(texts, 12, rng)
    labels = [Counter(extract_answer(r) for r in rs).most_common(1)[0][0] for rs in construction]
    kept = list(range(128))
    b.train_solver(
        [texts[i] for i in kept],
        lambda i, rs: [1.0 if extract_answer(r) == labels[kept[i]] else -1.0 for r in rs],
        8,
        rng,
    )
    b.evaluate(rng)
    assert len(texts) == len(reqs) and len(construction) == len(texts)
    assert computed[warm:] == []  # every text the round reads was embedded before it
