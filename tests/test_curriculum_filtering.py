"""Double-confidence filtering (Eq. 3) at its exact boundaries, and the ablation modes."""

from __future__ import annotations

import pytest

from diagevo.config.sections import FilterConfig
from diagevo.curriculum.filtering import double_confidence, keep

P_LOW, P_HIGH, TAU = 0.25, 0.75, 1.6


def dc(top: int, second: int, n: int) -> bool:
    return double_confidence(top / n, second / n, P_LOW, P_HIGH, TAU)


def test_issue_examples() -> None:
    assert dc(6, 3, 12)  # 6/3/3: p1 = 0.5, p2 = 0.25, 0.5 >= 0.4
    assert not dc(5, 4, 12)  # 5/4/3: p1/p2 = 1.25 < 1.6


def test_absolute_bounds_are_inclusive() -> None:
    assert dc(3, 1, 12)  # p1 = 0.25 = p_low
    assert not dc(2, 1, 12)  # p1 = 1/6 < p_low
    assert dc(9, 3, 12)  # p1 = 0.75 = p_high, 0.75 >= 0.4
    assert not dc(10, 1, 12)  # p1 = 5/6 > p_high
    assert not dc(12, 0, 12)  # unanimous: too easy


def test_relative_bound_is_inclusive() -> None:
    # p1 = 1.6 p2 exactly; in floating point 1.6 * (5/14) > 8/14, the slack keeps it
    assert dc(8, 5, 14)
    assert dc(8, 5, 13)
    assert not dc(7, 5, 13)  # 1.4 < 1.6
    assert double_confidence(0.4, 0.25, P_LOW, P_HIGH, TAU)
    assert not double_confidence(0.4, 0.2500001, P_LOW, P_HIGH, TAU)


def test_p2_zero_passes_relative_bound() -> None:
    assert dc(6, 0, 12)
    assert double_confidence(0.5, 0.0, P_LOW, P_HIGH, TAU)


def test_p_low_above_p1_by_a_hair_is_dropped() -> None:
    assert not double_confidence(0.2499, 0.0, P_LOW, P_HIGH, TAU)
    assert not double_confidence(0.7501, 0.0, P_LOW, P_HIGH, TAU)


@pytest.mark.parametrize(
    ("mode", "p1", "p2", "kept"),
    [
        ("double", 6 / 12, 3 / 12, True),
        ("double", 5 / 12, 4 / 12, False),
        ("double", 10 / 12, 1 / 12, False),
        ("absolute", 5 / 12, 4 / 12, True),  # no relative constraint
        ("absolute", 10 / 12, 1 / 12, False),
        ("absolute", 2 / 12, 1 / 12, False),
        ("none", 12 / 12, 0.0, True),
        ("none", 1 / 12, 1 / 12, True),
        ("none", 0.0, 0.0, False),  # nobody answered: no pseudo-label to train on
        ("double", 0.0, 0.0, False),
    ],
)
def test_keep_modes(mode: str, p1: float, p2: float, kept: bool) -> None:
    assert keep(p1, p2, FilterConfig(mode=mode)) is kept


def test_keep_uses_config_thresholds() -> None:
    cfg = FilterConfig(p_low=0.5, p_high=0.9, tau=2.0)
    assert keep(0.6, 0.3, cfg)
    assert not keep(0.6, 0.31, cfg)
    assert not keep(0.45, 0.0, cfg)
    assert not keep(0.95, 0.0, cfg)
