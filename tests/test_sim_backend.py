"""The sim backend end to end: the challenger reads cause texts through the real embedding model,
learns from the challenger reward on its texts, and a realistic round costs milliseconds."""

from __future__ import annotations

import os
import random
import time
from collections import Counter

import pytest

from diagevo.config import Config
from diagevo.curriculum.answers import extract_answer
from diagevo.memory.sampler import FREE, GenerationRequest
from diagevo.train.sim import SimBackend
from diagevo.train.sim.families import AREAS

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def embedder():  # noqa: ANN201 - the real local MiniLM, loaded once for the module
    from diagevo.diagnosis.embedder import LocalEmbedder

    return LocalEmbedder()


def _backend(embedder, **params: float) -> SimBackend:  # noqa: ANN001
    cfg = Config()
    cfg.sim.params = dict(params)
    return SimBackend(cfg, seed=0, embedder=embedder)


def _families_of(b: SimBackend, outputs: list[str]) -> list[tuple[str, ...]]:
    return [b.registry.lookup(o).spec.families for o in outputs]


# paraphrases written for this test: none of them is in the world's own paraphrase tables
TARGETS = {
    "extraneous_roots": "does not substitute roots back into the square root equation after squaring it",
    "negative_remainder": "gives a remainder below zero when the number being divided is negative",
    "inclusion_exclusion": "sums two overlapping counts and never removes the elements shared by both conditions",
    "sampling_without_replacement": "keeps the same odds for the second pick although the first item was not put back",
    "successive_percentages": "adds a percentage rise and a later percentage drop as if both used the same base",
    "circular_arrangements": "counts seatings around a round table as if the seats were in a straight row",
}


@pytest.mark.parametrize("family", sorted(TARGETS))
def test_targeted_generation_reads_the_cause_text(embedder, family: str) -> None:  # noqa: ANN001
    b = _backend(embedder)
    area = next(f.area for f in b.fams if f.name == family)
    req = GenerationRequest(mode="targeted", active_cause="c9", active_text=TARGETS[family], node="n1", node_label=AREAS[area][0])
    fams = _families_of(b, b.generate([req] * 10, random.Random(0)))
    assert Counter(f[0] for f in fams).most_common(1)[0][0] == family


def test_stitched_generation_needs_both_skills(embedder) -> None:  # noqa: ANN001
    b = _backend(embedder)
    req = GenerationRequest(
        mode="stitched",
        active_cause="c1",
        active_text=TARGETS["inclusion_exclusion"],
        mastered_cause="c2",
        mastered_text=TARGETS["circular_arrangements"],
        node="n1",
        node_label=AREAS["combinatorics"][0],
    )
    outs = b.generate([req] * 8, random.Random(1))
    for out in outs:
        q = b.registry.lookup(out)
        assert q.spec.families == ("inclusion_exclusion", "circular_arrangements")
        assert len({q.values[k] for k in q.values}) == 4  # each skill's trap changes the answer
    # the solver fails stitched questions through either trap
    answers = Counter()
    for out, resps in zip(outs, b.sample(outs, 40, random.Random(2)), strict=True):
        q = b.registry.lookup(out)
        inverse = {v: k for k, v in q.values.items()}
        for r in resps:
            key = next((k for k, v in inverse.items() if extract_answer(f"\\boxed{{{_fmt(k)}}}") == extract_answer(r)), None)
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


def test_realistic_round_costs_milliseconds(embedder) -> None:  # noqa: ANN001
    b = _backend(embedder)
    rng = random.Random(4)
    causes = [GenerationRequest("targeted", f"c{i}", t, None, None, "n1", None) for i, t in enumerate(TARGETS.values())]
    reqs = ([FREE] * 6 + causes) * 16  # 192 requests, a third of them targeted
    b.generate(causes, rng)  # warm the embedding cache, as the loop's earlier phases would

    def chal_reward(rs, outs):  # noqa: ANN001, ANN202
        votes = b.sample(outs, 10, rng)
        return [Counter(extract_answer(r) for r in v).most_common(1)[0][1] / 10 for v in votes]

    t0 = time.perf_counter()
    b.train_challenger(reqs[:128], chal_reward, rng)
    t1 = time.perf_counter()
    texts = b.generate(reqs, rng)
    construction = b.sample(texts, 12, rng)
    t2 = time.perf_counter()
    labels = [Counter(extract_answer(r) for r in rs).most_common(1)[0][0] for rs in construction]
    kept = list(range(128))
    b.train_solver(
        [texts[i] for i in kept],
        lambda i, rs: [1.0 if extract_answer(r) == labels[kept[i]] else -1.0 for r in rs],
        8,
        rng,
    )
    t3 = time.perf_counter()
    b.evaluate(rng)
    t4 = time.perf_counter()
    # generous bounds (answer extraction by the test is included); the world itself is far faster
    assert t1 - t0 < 3.0 and t2 - t1 < 2.0 and t3 - t2 < 2.0 and t4 - t3 < 2.0
