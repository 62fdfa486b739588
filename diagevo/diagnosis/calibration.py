"""Screening thresholds belong to an embedding model.

The paper's θ_dup = θ_merge = 0.5 were set for its API embedder. Stage 2a and 4a only decide
which pairs the diagnostician gets to see (Prompts 2 and 4 confirm), so a threshold should let
through nearly every paraphrase while keeping the unrelated pairs out. The labelled pairs below
are 10-20 word phrases in the style Prompt 1 and Prompt 3 ask for; :func:`measure` scores them
with an embedder and :func:`choose_threshold` picks the midpoint of the gap between the two
distributions (or, when they overlap, the value with the fewest misclassified pairs).

Figures for ``all-MiniLM-L6-v2`` (local, normalised, cosine) and for its static distillation
(:mod:`diagevo.diagnosis.static`, the default) are recorded in :data:`FIGURES`;
``tests/test_diagnosis_calibration.py`` re-measures them and checks the chosen thresholds. For
another model, ``measure(make_embedder(url, model))`` gives the same figures and suggested
thresholds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from diagevo.config.sections import DiagnosisConfig
from diagevo.diagnosis.embedder import LOCAL_MODEL_NAME
from diagevo.diagnosis.interface import Embedder
from diagevo.diagnosis.static import STATIC_MODEL_NAME

Pair = tuple[str, str]


def _pairs(texts: Any, *keys: tuple[Any, Any]) -> tuple[Pair, ...]:
    """The pairs of ``texts`` named by ``keys`` (keys of a dict, indices of a tuple)."""
    return tuple((texts[a], texts[b]) for a, b in keys)


# --- error causes, by key (the groups of pairs below name them) -----------------------------
_C = {
    "dom": "fails to check candidate solutions against the original domain after a transformation",
    "tri": "misapplies the triangle inequality when the side lengths are algebraic expressions",
    "circ": "double counts arrangements by ignoring rotational symmetry in circular permutation problems",
    "dep": (
        "treats dependent events as independent when multiplying probabilities of successive draws without replacement"
    ),
    "neg": "drops the negative root when taking the square root of both sides of an equation",
    "ineq": "reverses the inequality direction incorrectly or not at all when multiplying by a negative quantity",
    "comb": "confuses combinations with permutations when the order of selected items does not matter",
    "arith": "misidentifies the number of terms in an arithmetic sequence by an off-by-one counting error",
    "chain": "applies the chain rule incompletely by omitting the derivative of the inner function",
    "scale": "assumes a geometric figure is drawn to scale and reads lengths from the diagram",
    "lead": "neglects the case where the leading coefficient is zero when analysing a parametric quadratic",
    "mod": "misapplies modular arithmetic by dividing both sides of a congruence without checking invertibility",
    "cond": "confuses the conditional probability of A given B with the probability of B given A",
    "log": "applies the logarithm product rule to a sum inside the logarithm as if it were a product",
    "rep": "forgets to account for repeated letters when counting distinct arrangements of a word",
    "max": "assumes the maximum of a function occurs at a critical point without checking interval endpoints",
    "word": "sets up the wrong equation by misreading the relation between quantities stated in a word problem",
    "area": "uses the formula for the area of a triangle with a side and a non-perpendicular height",
    "bound": "omits the boundary cases when counting integer solutions of an inequality with endpoints",
}

# --- error causes: same mechanism, different wording ------------------------------------------
# Written the way two diagnostician calls phrase one mechanism: few shared content words.
_DOMAIN = (
    "fails to check candidate solutions against the original domain after a transformation",
    "does not confirm that solutions of the transformed equation remain valid in the original problem",
    "neglects to test whether values obtained after rewriting the equation satisfy the initial constraints",
    "skips verifying that answers derived from a substituted form are admissible for the original variable",
)
_CAUSE_REWORDED = {  # a cause's key -> the same mechanism in other words
    "tri": "uses the condition that any two sides must exceed the third incorrectly for symbolic side lengths",
    "circ": "treats seatings around a round table that differ only by rotation as distinct arrangements",
    "dep": "keeps the same probability for every pick even though earlier picks were not returned to the pool",
    "neg": "keeps only the positive value after extracting a square root, losing the other sign of the solution",
    "ineq": "keeps the inequality sign unchanged after dividing both sides by a number that is negative",
    "comb": "counts ordered selections where the problem asks for unordered groups of chosen objects",
    "arith": "computes how many evenly spaced values lie between two endpoints and ends up one short or over",
    "chain": "differentiates a nested function but forgets to multiply by the rate of change of its inside",
    "scale": "takes measurements from how the picture looks instead of deriving them from the given data",
    "lead": "overlooks that the equation stops being quadratic for the parameter value that kills the squared term",
    "mod": "cancels a common factor in a congruence even though that factor shares a divisor with the modulus",
    "cond": "swaps the roles of the event and the condition when computing a conditional probability",
    "log": "splits the log of a sum into a sum of logs as though the argument were multiplied",
    "rep": "counts orderings of a word without dividing out the duplicates created by identical letters",
    "max": "searches for the largest value only where the derivative vanishes and ignores the ends of the interval",
}
CAUSE_PARAPHRASES: tuple[Pair, ...] = (
    *_pairs(_DOMAIN, (0, 1), (0, 2), (0, 3), (1, 2), (2, 3)),
    *((_C[key], other) for key, other in _CAUSE_REWORDED.items()),
)

# --- error causes: different areas and mechanisms ------------------------------------------
CAUSE_UNRELATED: tuple[Pair, ...] = _pairs(
    _C,
    ("dom", "circ"),
    ("dom", "cond"),
    ("tri", "dep"),
    ("neg", "arith"),
    ("ineq", "chain"),
    ("scale", "mod"),
    ("lead", "cond"),
    ("area", "rep"),
    ("log", "word"),
    ("max", "comb"),
    ("circ", "chain"),
    ("dep", "scale"),
    ("mod", "max"),
    ("arith", "log"),
    ("cond", "tri"),
    ("rep", "ineq"),
    ("word", "neg"),
    ("comb", "lead"),
    ("chain", "area"),
    ("log", "circ"),
    ("dom", "rep"),
    ("mod", "word"),
)

# --- error causes: same area, different mechanism (screening may let these through: Prompt 2
# tells them apart; reported, not used to choose the threshold) ------------------------------
CAUSE_NEAR: tuple[Pair, ...] = _pairs(
    _C, ("circ", "rep"), ("tri", "area"), ("arith", "bound"), ("neg", "dom"), ("comb", "dep"), ("chain", "max")
)

# --- skill-node labels: the same skill in other words vs. different skills ----------------------
_LABELS = (
    "verify candidate solutions against the domain and constraints of the original equation",
    "count arrangements correctly while accounting for symmetry and indistinguishable objects",
    "compute probabilities correctly for dependent events and sampling without replacement",
    "manipulate inequalities correctly including sign changes and the inclusion of boundary points",
    "differentiate composite and implicit functions correctly using the chain rule",
    "reason about triangle side lengths areas and heights using correct geometric formulas",
    "apply modular arithmetic rules correctly including division and cancellation in congruences",
    "translate word problem statements into correct algebraic equations and relations",
    "locate extrema of functions by checking critical points and interval endpoints",
    "apply logarithm and exponent laws correctly without inventing rules for sums",
)
_LABELS_REWORDED = (  # each of _LABELS in other words, in order
    "check that solutions obtained after algebraic transformations satisfy the original equation's domain",
    "count permutations and arrangements without overcounting symmetric or identical configurations",
    "handle dependence between events when calculating probabilities of sequential draws",
    "transform and solve inequalities while tracking sign reversals and whether endpoints are included",
    "apply the chain rule correctly when differentiating nested and composite functions",
    "apply triangle geometry formulas for sides heights and areas without misusing definitions",
    "work with congruences correctly, checking invertibility before cancelling or dividing modulo n",
    "model verbal descriptions of quantities as correct equations before solving them",
    "find maxima and minima of functions over intervals including endpoint evaluation",
    "use the laws of logarithms and exponents correctly when simplifying expressions",
)
LABEL_PARAPHRASES: tuple[Pair, ...] = tuple(zip(_LABELS, _LABELS_REWORDED, strict=True))
LABEL_UNRELATED: tuple[Pair, ...] = _pairs(
    _LABELS, (0, 1), (2, 4), (3, 5), (6, 8), (7, 9), (1, 2), (4, 8), (0, 3), (5, 6), (9, 1)
)


# the groups by the names FIGURES and measure give them
PAIRS: dict[str, tuple[Pair, ...]] = {
    "cause_paraphrase": CAUSE_PARAPHRASES,
    "cause_unrelated": CAUSE_UNRELATED,
    "cause_near": CAUSE_NEAR,
    "label_paraphrase": LABEL_PARAPHRASES,
    "label_unrelated": LABEL_UNRELATED,
}


@dataclass(frozen=True, slots=True)
class Thresholds:
    dup: float
    merge: float


PAPER = Thresholds(dup=0.5, merge=0.5)  # set in the paper for its API embedder (text-embedding-v4)

# Measured on the pairs above, per embedder: (min, mean, max) cosine, n pairs.
FIGURES: dict[str, dict[str, tuple[float, float, float, int]]] = {
    LOCAL_MODEL_NAME: {
        "cause_paraphrase": (0.208, 0.580, 0.799, 20),  # 2nd lowest 0.424; the 0.208 pair is a known miss
        "cause_unrelated": (-0.151, 0.051, 0.314, 22),
        "cause_near": (0.097, 0.320, 0.503, 6),  # same area, other mechanism: Prompt 2's job
        "label_paraphrase": (0.574, 0.709, 0.830, 10),
        "label_unrelated": (-0.047, 0.142, 0.304, 10),
    },
    STATIC_MODEL_NAME: {
        "cause_paraphrase": (0.485, 0.654, 0.784, 20),  # 2nd lowest 0.530
        "cause_unrelated": (0.210, 0.396, 0.549, 22),
        "cause_near": (0.463, 0.549, 0.606, 6),
        "label_paraphrase": (0.661, 0.754, 0.857, 10),
        "label_unrelated": (0.281, 0.398, 0.580, 10),
    },
}
# Chosen from those figures with choose_threshold (rounded). MiniLM: θ_dup in the middle of the
# gap 0.314 (top unrelated) .. 0.424 (lowest paraphrase except the lexically disjoint off-by-one
# pair, which no cut above the unrelated can catch); θ_merge in the middle of 0.304 .. 0.574; the
# paper's 0.5 would miss 5 of 20 cause paraphrases. The static vectors score every pair higher and
# the two groups overlap: θ_dup 0.56 keeps every unrelated pair out and misses 2 of 20 paraphrases;
# θ_merge in the middle of 0.580 .. 0.661.
CALIBRATED: dict[str, Thresholds] = {
    LOCAL_MODEL_NAME: Thresholds(dup=0.37, merge=0.44),
    STATIC_MODEL_NAME: Thresholds(dup=0.56, merge=0.62),
}


def thresholds_for(cfg: DiagnosisConfig, embedder_name: str) -> Thresholds:
    """θ_dup and θ_merge for the embedder in use: explicit config values win, then the
    calibrated values of that model, then the paper's 0.5."""
    base = CALIBRATED.get(embedder_name, PAPER)
    return Thresholds(
        dup=cfg.theta_dup if cfg.theta_dup is not None else base.dup,
        merge=cfg.theta_merge if cfg.theta_merge is not None else base.merge,
    )


def pair_similarities(embedder: Embedder, pairs: Sequence[Pair]) -> np.ndarray:
    texts = sorted({t for p in pairs for t in p})
    vecs = embedder.embed(texts)
    pos = {t: i for i, t in enumerate(texts)}
    return np.array([float(vecs[pos[a]] @ vecs[pos[b]]) for a, b in pairs])


def choose_threshold(positive: np.ndarray, negative: np.ndarray) -> float:
    """The cut with the fewest misclassified pairs (a positive below it, a negative at or above
    it); among equally good cuts, the middle of the widest gap between neighbouring scores."""
    values = np.unique(np.concatenate([positive, negative]))
    cuts = (values[:-1] + values[1:]) / 2 if len(values) > 1 else values
    best: tuple[int, float, float] | None = None
    for i, cut in enumerate(cuts):
        errors = int((positive < cut).sum() + (negative >= cut).sum())
        margin = float(values[i + 1] - values[i]) if len(values) > 1 else 0.0
        if best is None or (errors, -margin) < (best[0], -best[1]):
            best = (errors, margin, float(cut))
    assert best is not None
    return best[2]


def measure(embedder: Embedder) -> dict[str, dict[str, float]]:
    """Distributions and suggested thresholds for ``embedder`` on the labelled pairs."""
    sims = {name: pair_similarities(embedder, pairs) for name, pairs in PAIRS.items()}
    out = {
        name: {"min": float(s.min()), "mean": float(s.mean()), "max": float(s.max()), "n": float(len(s))}
        for name, s in sims.items()
    }
    out["suggested"] = {
        "dup": choose_threshold(sims["cause_paraphrase"], sims["cause_unrelated"]),
        "merge": choose_threshold(sims["label_paraphrase"], sims["label_unrelated"]),
    }
    return out
