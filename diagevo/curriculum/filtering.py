"""Double-confidence filtering (Eq. 3) and its Table 2 ablations."""

from __future__ import annotations

from diagevo.config.sections import FilterConfig

# Vote shares are ratios of small integers; 1.6 * (5/13) != 8/13 in binary floating point, so
# the paper's non-strict inequalities are evaluated with this slack to keep exact boundaries.
EPS = 1e-9


def absolute_confidence(p1: float, p_low: float, p_high: float) -> bool:
    """``p_low <= p1 <= p_high`` (both bounds inclusive)."""
    return p_low - EPS <= p1 <= p_high + EPS


def double_confidence(p1: float, p2: float, p_low: float, p_high: float, tau: float) -> bool:
    """Eq. 3: ``p_low <= p1 <= p_high`` and ``p1 >= tau * p2`` (p2 = 0 when one class)."""
    return absolute_confidence(p1, p_low, p_high) and p1 >= tau * p2 - EPS


def keep(p1: float, p2: float, cfg: FilterConfig) -> bool:
    """Whether a candidate enters the solver training set under ``cfg.mode`` (``double``: Eq. 3,
    ``absolute``: without the relative constraint, ``none``: any pseudo-label); a question no
    response answered cannot be trained on in any mode."""
    if p1 <= 0.0:
        return False
    if cfg.mode == "double":
        return double_confidence(p1, p2, cfg.p_low, cfg.p_high, cfg.tau)
    if cfg.mode == "absolute":
        return absolute_confidence(p1, cfg.p_low, cfg.p_high)
    if cfg.mode == "none":
        return True
    raise ValueError(f"unknown filter mode {cfg.mode!r}")


def confident(p1: float, p_high: float) -> bool:
    """Above the filter's upper bound: a question the solver already answers alike, which Eq. 3
    leaves out of the training set (the anchors of ``solver.anchor_share``)."""
    return p1 > p_high + EPS


def anchor_count(share: float, retained: int, available: int) -> int:
    """How many confident questions join ``retained`` ones so they make ``share`` of the solver's
    questions (``share / (1 - share)`` per retained one), as many as there are at most."""
    if share <= 0.0 or retained == 0:
        return 0
    return min(available, round(retained * share / (1.0 - share)))
