"""Challenger reward (Eq. 8-10): hand-computed batches."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import diagevo.curriculum.reward as reward
from diagevo.curriculum.bleu import pairwise_bleu_distance
from diagevo.curriculum.reward import (
    challenger_output_rewards,
    challenger_rewards,
    repetition_penalties,
    uncertainty_reward,
)

A = "Find the smallest positive integer n such that n^2 + 1 is divisible by 13 and n is odd."
A_NEAR = "Find the smallest positive integer n such that n^2 + 1 is divisible by 17 and n is odd."
C = "How many ways can seven distinct books be arranged on three shelves if no shelf is empty?"
D = "A fair die is rolled four times. What is the probability that the maximum roll equals 5?"


@pytest.mark.parametrize(("p1", "r"), [(0.0, 0.0), (0.25, 0.5), (0.5, 1.0), (7 / 12, 5 / 6), (0.75, 0.5), (1.0, 0.0)])
def test_uncertainty_reward(p1: float, r: float) -> None:
    assert uncertainty_reward(p1) == pytest.approx(r)


def test_fixture_distances() -> None:
    d = pairwise_bleu_distance([A, A_NEAR, C, D])
    assert d[0, 1] < 0.5  # near duplicates (one number changed)
    assert min(d[0, 2], d[0, 3], d[1, 2], d[1, 3], d[2, 3]) > 0.9


def test_exact_duplicates_and_invalid() -> None:
    # B = 4 (the invalid question counts); clusters {0, 1}, {2}
    r = challenger_rewards([A, A, C, None], [0.5, 0.5, 0.25, 0.5])
    assert r == pytest.approx([1 - 2 / 4, 1 - 2 / 4, 0.5 - 1 / 4, 0.0])


def test_near_duplicates_cluster() -> None:
    r = challenger_rewards([A, A_NEAR, C, D], [0.5, 0.75, 0.5, 1.0])
    # r_unc = 1, 0.5, 1, 0; r_rep = 2/4, 2/4, 1/4, 1/4
    assert r == pytest.approx([0.5, 0.0, 0.75, 0.0])
    assert repetition_penalties([A, A_NEAR, C, D]) == pytest.approx([0.5, 0.5, 0.25, 0.25])


def test_lambda() -> None:
    r = challenger_rewards([A, A, C, None], [0.5, 0.5, 0.5, 0.5], lam=0.5)
    assert r == pytest.approx([1 - 0.25, 1 - 0.25, 1 - 0.125, 0.0])


def test_invalid_questions() -> None:
    assert challenger_rewards([None, "", "   "], [0.5, 0.5, 0.5]) == [0.0, 0.0, 0.0]
    # a lone valid question: |C| / B = 1/4
    assert challenger_rewards([None, A, None, None], [0.9, 0.5, 0.5, 0.5]) == pytest.approx([0.0, 0.75, 0.0, 0.0])
    assert challenger_rewards([], []) == []
    assert challenger_rewards([A], [0.5]) == [0.0]  # B = 1: penalty 1


def test_length_mismatch() -> None:
    with pytest.raises(ValueError):
        challenger_rewards([A, C], [0.5])


def test_order_invariant() -> None:
    qs = [A, C, A_NEAR, D, A, None, C]
    p1 = [0.5, 0.25, 0.75, 0.5, 0.5, 0.5, 1 / 3]
    base = challenger_rewards(qs, p1)
    perm = [3, 6, 0, 5, 2, 4, 1]
    assert challenger_rewards([qs[i] for i in perm], [p1[i] for i in perm]) == pytest.approx([base[i] for i in perm])


def _fixed_distances(monkeypatch: pytest.MonkeyPatch, d: list[list[float]]) -> None:
    monkeypatch.setattr(reward, "pairwise_bleu_distance", lambda texts: np.array(d, dtype=float))


def test_average_linkage(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0-1 merge at 0.2; {0,1}-2 average (0.9 + 0.45) / 2 = 0.675 >= 0.5: stays apart
    # (single linkage would merge it at 0.45)
    _fixed_distances(monkeypatch, [[0, 0.2, 0.9], [0.2, 0, 0.45], [0.9, 0.45, 0]])
    assert repetition_penalties(["x", "y", "z"]) == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    # with (0.5 + 0.45) / 2 = 0.475 < 0.5 the third joins
    _fixed_distances(monkeypatch, [[0, 0.2, 0.5], [0.2, 0, 0.45], [0.5, 0.45, 0]])
    assert repetition_penalties(["x", "y", "z"]) == pytest.approx([1.0, 1.0, 1.0])


def test_threshold_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_distances(monkeypatch, [[0, 0.5], [0.5, 0]])
    assert repetition_penalties(["x", "y"]) == pytest.approx([0.5, 0.5])  # at threshold: apart
    _fixed_distances(monkeypatch, [[0, 0.4999], [0.4999, 0]])
    assert repetition_penalties(["x", "y"]) == pytest.approx([1.0, 1.0])
    assert repetition_penalties(["x", "y"], threshold=0.3) == pytest.approx([0.5, 0.5])


def test_output_rewards_answer_only_the_valid_questions() -> None:
    asked: list[list[str]] = []

    def answer(questions: list[str]) -> list[list[str]]:
        asked.append(questions)
        # 4 responses each: 2 of 4 agree on the first question (p1 = 0.5), all 4 on the second
        return [["\\boxed{1}", "\\boxed{1}", "\\boxed{2}", "\\boxed{3}"], ["\\boxed{7}"] * 4]

    outputs = [
        "<question>How many apples are left when 3 of 5 are eaten?</question>",
        "no question here",
        "<question>What is the remainder of 17 divided by 5 in this puzzle?</question>",
    ]
    rewards = challenger_output_rewards(outputs, answer, lam=1.0, threshold=0.5)
    assert asked == [[
        "How many apples are left when 3 of 5 are eaten?", "What is the remainder of 17 divided by 5 in this puzzle?",
    ]]  # fmt: skip
    # Eq. 9: r_unc = 1 - 2|p1 - 1/2|; the two valid questions are far apart, so r_rep = 1/3 each (B = 3)
    assert rewards == pytest.approx([1.0 - 1 / 3, 0.0, 0.0])


def test_no_scikit_learn_or_scipy_needed() -> None:
    """BLEU, the clusters and the reward run where neither is installed (a core install)."""
    code = (
        "import json, sys; sys.modules['sklearn'] = None; sys.modules['scipy'] = None\n"
        "from diagevo.curriculum.reward import challenger_rewards\n"
        f"print(json.dumps(challenger_rewards({json.dumps([A, A_NEAR, C, D])}, [0.5, 0.75, 0.5, 1.0])))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == pytest.approx([0.5, 0.0, 0.75, 0.0])  # test_near_duplicates_cluster's
