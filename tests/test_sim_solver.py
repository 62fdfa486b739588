"""The simulated solver learns each trap variant from pseudo-label rewards, drifts when left
alone, and the backend's evaluation and checkpoints are reproducible."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from diagevo.curriculum.answers import extract_answer
from diagevo.train.config import Config
from diagevo.train.sim.backend import SimBackend
from diagevo.train.sim.text import boxed
from diagevo.train.sim.world import Spec


def _backend(**sim: object) -> SimBackend:
    cfg = Config()
    for k, v in sim.items():
        setattr(cfg.sim, k, v)
    return SimBackend(cfg)


def _questions(b: SimBackend, family: str, n: int, rng: random.Random) -> list[str]:
    return [b.registry.register(Spec((family,), rng.randint(0, 3), 0, 0, rng.getrandbits(48))).text for _ in range(n)]


def _train(b: SimBackend, texts: list[str], labels: list[str], rng: random.Random) -> None:
    """One solver round with +1/-1 rewards by agreement with the given labels."""

    def reward(i: int, responses: list[str]) -> list[float]:
        return [1.0 if extract_answer(r) == labels[i] else -1.0 for r in responses]

    b.train_solver(texts, reward, 8, rng)


def _truth(b: SimBackend, texts: list[str]) -> list[str]:
    return [extract_answer(boxed(b.registry.lookup(t).answer)) for t in texts]


def test_skill_practised_with_correct_pseudo_labels_improves() -> None:
    b = _backend()
    rng = random.Random(1)
    weakest = min(b.variants, key=lambda v: b.solver.theta[b.solver.index[v.key]])
    i = b.solver.index[weakest.key]
    before = b.solver.theta.copy()
    acc_before = b.evaluate(random.Random(5))[f"acc/{weakest.family}"]
    for _ in range(3):
        texts = _questions(b, weakest.key, 48, rng)
        _train(b, texts, _truth(b, texts), rng)
    gain = b.solver.theta - before
    assert gain[i] > 0.5
    assert b.evaluate(random.Random(5))[f"acc/{weakest.family}"] > acc_before + 0.03
    # practice mostly trains the practised variant; siblings gain a share, other skills nothing
    sib = [b.solver.index[v.key] for v in b.variants if v.family == weakest.family and v.key != weakest.key]
    other = [b.solver.index[v.key] for v in b.variants if v.family != weakest.family]
    assert all(0 < gain[j] < 0.5 * gain[i] for j in sib)
    assert all(gain[j] == 0.0 for j in other)


def test_training_towards_the_trap_unlearns_the_skill() -> None:
    """The solver never sees the truth: wrong pseudo-labels (the trap) are reinforced too."""
    b = _backend()
    rng = random.Random(2)
    key = b.variants[0].key
    i = b.solver.index[key]
    before = b.solver.theta[i]
    texts = _questions(b, key, 48, rng)
    traps = [extract_answer(boxed(b.registry.lookup(t).trap)) for t in texts]
    _train(b, texts, traps, rng)
    assert b.solver.theta[i] < before - 0.2


def _drift_run(drift: bool) -> tuple[float, float, float]:
    b = _backend(drift=drift)
    rng = random.Random(3)
    left, practised = b.fams[0].variants[0].key, b.fams[1].variants[0].key  # different skills
    j = b.solver.index[left]
    b.solver.theta[j] += 2.0  # as if the skill had been mastered in earlier rounds
    mastered = b.solver.theta[j]
    for _ in range(3):
        texts = _questions(b, practised, 32, rng)
        _train(b, texts, _truth(b, texts), rng)
    return mastered, b.solver.theta[j], b.solver.theta0[j]


def test_skill_left_alone_drifts_back() -> None:
    mastered, after, base = _drift_run(drift=True)
    assert base < after < mastered - 0.8
    mastered, after, _ = _drift_run(drift=False)
    assert after == mastered


def _context_gains(transfer: bool) -> tuple[float, float, float]:
    """Logit gains of a variant in a practised context (difficulty 0), in an unpractised one (3),
    and of a sibling variant of the same skill."""
    b = _backend(transfer=transfer)
    rng = random.Random(4)
    key, sibling = b.fams[2].variants[0].key, b.fams[2].variants[1].key
    easy = b.registry.question(Spec((key,), 0, 0, 0, 77))
    hard = b.registry.question(Spec((key,), 3, 0, 0, 77))
    other = b.registry.question(Spec((sibling,), 0, 0, 0, 77))

    def logits() -> tuple[float, ...]:
        return tuple(float(np.log(p / (1 - p))) for p in (b.solver.p_skill(q, 0) for q in (easy, hard, other)))

    e0, h0, s0 = logits()
    texts: list[str] = []
    while len(texts) < 48:  # practise the easy question's own context: same template, difficulty 0
        q = b.registry.register(Spec((key,), 0, 0, 0, rng.getrandbits(48)))
        if q.parts[0].template == easy.parts[0].template:
            texts.append(q.text)
    _train(b, texts, _truth(b, texts), rng)
    e1, h1, s1 = logits()
    return e1 - e0, h1 - h0, s1 - s0


def test_transfer_switch_decides_whether_practice_generalises() -> None:
    practised, other, sibling = _context_gains(transfer=True)
    assert practised > 0.2 and abs(practised - other) < 1e-9
    assert 0 < sibling < 0.5 * practised  # some, not all, reaches the sibling mechanism
    practised_off, other_off, sibling_off = _context_gains(transfer=False)
    assert practised_off > 3 * other_off > 0
    assert 0 < sibling_off < sibling


def test_cheap_difficulty_raises_slips_only_when_switched_on() -> None:
    on, off = _backend(), _backend(cheap_difficulty=False)
    short = on.registry.question(Spec(("inclusion_exclusion.union_two",), 0, 0, 0, 5))
    long = on.registry.question(Spec(("inclusion_exclusion.union_two",), 0, 4, 3, 5))
    assert on.solver.p_attention(long) > 5 * on.solver.p_attention(short)
    assert off.solver.p_attention(long) == off.solver.p_attention(short)
    assert on.solver.p_shared(long) > on.solver.p_shared(short)
    assert _backend(label_noise=False).solver.p_shared(long) == 0.0


def test_evaluate_is_deterministic_given_the_seed() -> None:
    a, b = _backend(), _backend()
    ra, rb = a.evaluate(random.Random(11)), b.evaluate(random.Random(11))
    assert ra == rb
    assert set(ra) >= {"heldout_acc", "pseudo_label_acc"} | {f"acc/{f.name}" for f in a.fams}
    assert 0.5 < ra["heldout_acc"] < 0.85 and 0.6 < ra["pseudo_label_acc"] < 0.95


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    b = _backend()
    rng = random.Random(6)
    texts = _questions(b, b.variants[3].key, 16, rng)
    _train(b, texts, _truth(b, texts), rng)
    b.save(tmp_path)
    c = _backend()
    c.load(tmp_path)
    assert np.allclose(b.solver.theta, c.solver.theta) and b.solver.care == c.solver.care
    assert np.allclose(b.challenger.skill_logits, c.challenger.skill_logits) and b.solver.ctx == c.solver.ctx
    assert c.registry.lookup(texts[0]) is not None
    assert b.sample(texts[:3], 4, random.Random(0)) == c.sample(texts[:3], 4, random.Random(0))
    assert c.evaluate(random.Random(1)) == b.evaluate(random.Random(1))


def test_checkpoint_of_another_world_is_refused(tmp_path: Path) -> None:
    import pytest

    _backend().save(tmp_path)
    with pytest.raises(ValueError, match="variants"):
        _backend(n_families=13).load(tmp_path)


def test_unknown_question_gets_answers_without_truth() -> None:
    b = _backend()
    out = b.sample(["What is the airspeed of an unladen swallow?"], 5, random.Random(0))
    assert len(out[0]) == 5 and all(extract_answer(r) is not None for r in out[0])
