"""The three world switches of issue 23: spread wrong answers, the paper's challenger schedule and
a challenger that does not start at the held-out distribution."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import numpy as np

from diagevo.memory.sampler import FREE, GenerationRequest
from diagevo.train.config import Config
from diagevo.train.sim.backend import SimBackend
from diagevo.train.sim.world import Spec


def _backend(**sim: object) -> SimBackend:
    cfg = Config()
    for k, v in sim.items():
        setattr(cfg.sim, k, v)
    return SimBackend(cfg)


def _wrong_values(b: SimBackend, n_questions: int = 30) -> list[int]:
    """Distinct wrong (non-slip) final values per question of the weakest variant."""
    weakest = b.solver.variants[int(np.argmin(b.solver.theta0))].key
    rng = random.Random(1)
    out = []
    for _ in range(n_questions):
        q = b.registry.question(Spec((weakest,), 3, 0, 0, rng.getrandbits(48)))
        wrong = {o.value for o in b.solver.outcomes(q, 64, rng) if not o.ok[0] and not o.slipped}
        out.append(len(wrong))
    return out


def test_wrong_answers_spread_over_several_values_only_when_switched_on() -> None:
    on, off = _wrong_values(_backend()), _wrong_values(_backend(wrong_answer_spread=False))
    assert max(off) == 1
    assert np.mean(on) > 2.0 and max(on) == 3
    # the weights belong to the sub-skill: the trap's share differs between variants
    cums = _backend().solver.wrong_cum
    assert len({round(c[0], 6) for c in cums}) == len(cums)


def test_wrong_values_are_never_the_answer_and_leave_the_text_alone() -> None:
    b = _backend()
    rng = random.Random(2)
    for v in b.variants[:20]:
        q = b.registry.question(Spec((v.key,), 1, 0, 0, rng.getrandbits(48)))
        assert q.wrong[0][0] == q.parts[0].trap and len(set(q.wrong[0])) == 3
        assert q.parts[0].answer not in q.wrong[0]
    off = _backend(wrong_answer_spread=False).registry.question(Spec((b.variants[0].key,), 1, 0, 0, 7))
    assert off.text == b.registry.question(Spec((b.variants[0].key,), 1, 0, 0, 7)).text


def _first_round(b: SimBackend, n: int = 64) -> tuple[dict[str, float], list[int]]:
    sizes: list[int] = []

    def reward(requests: Sequence[GenerationRequest], outputs: Sequence[str]) -> list[float]:
        sizes.append(len(outputs))
        return [float(len(o) % 7) for o in outputs]

    stats = b.train_challenger([FREE] * n, reward, random.Random(0))
    return stats, sizes


def test_the_challenger_trains_on_the_paper_schedule() -> None:
    stats, sizes = _first_round(_backend())
    assert stats["steps"] == 6.0  # challenger.max_steps
    assert sum(sizes) == 64 * 8 and len(sizes) == 6  # every prompt once, a group of 8 questions each
    assert all(s % 8 == 0 for s in sizes)
    stats, sizes = _first_round(_backend(paper_challenger_steps=False))
    assert stats["steps"] == 2.0 and sizes == [64, 64]


def _start(b: SimBackend) -> tuple[Counter[str], float]:
    rng = random.Random(0)
    fams = Counter(b.registry.lookup(t).parts[0].family for t in _texts(b, rng))
    return fams, b.challenger.expected("free")["difficulty"]


def _texts(b: SimBackend, rng: random.Random) -> list[str]:
    return [t.split("\n")[1] for t in b.generate([FREE] * 600, rng)]


def test_the_frozen_challenger_does_not_start_at_the_held_out_mix() -> None:
    skewed, d_skewed = _start(_backend())
    uniform, d_uniform = _start(_backend(skewed_challenger_start=False))
    assert abs(d_uniform - 1.5) < 1e-9 and d_skewed < 1.2  # easier questions first
    # held-out: every family equally often; the skewed start favours some families several-fold
    assert max(skewed.values()) > 3 * min(skewed.values())
    assert max(uniform.values()) < 2 * min(uniform.values())
