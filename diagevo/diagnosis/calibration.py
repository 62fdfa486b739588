"""Screening thresholds belong to an embedding model.

The paper's θ_dup = θ_merge = 0.5 were set for its API embedder. Stage 2a and 4a only decide
which pairs the diagnostician gets to see (Prompts 2 and 4 confirm), so a threshold should let
through nearly every paraphrase while keeping the unrelated pairs out. The labelled pairs
are 10-20 word phrases in the style Prompt 1 and Prompt 3 ask for; :func:`measure` scores them
with an embedder and :func:`choose_threshold` picks the midpoint of the gap between the two
distributions (or, when they overlap, the value with the fewest misclassified pairs).
The pairs are data, in ``calibration.toml`` beside this module.

Figures for ``all-MiniLM-L6-v2`` (local, normalised, cosine) and for its static distillation
(:mod:`diagevo.diagnosis.static`, the default) are recorded beside the pairs (:func:`figures`);
``tests/test_diagnosis_calibration.py`` re-measures them and checks the chosen thresholds. For
another model, ``measure(make_embedder(url, model))`` gives the same figures and suggested
thresholds.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from diagevo.config.sections import DiagnosisConfig
from diagevo.diagnosis.interface import Embedder

Pair = tuple[str, str]


@cache
def _data() -> dict[str, Any]:
    return tomllib.loads(resources.files("diagevo.diagnosis").joinpath("calibration.toml").read_text(encoding="utf-8"))


def labelled_pairs() -> dict[str, tuple[Pair, ...]]:
    """The labelled pairs by group (``calibration.toml``: each group names its texts by key), by
    the names :func:`figures` and :func:`measure` give them."""
    groups = {name: keys for name, keys in _data().items() if isinstance(keys, list)}
    texts = {name: _data()["causes"] if name.startswith("cause_") else _data()["labels"] for name in groups}
    return {name: tuple((texts[name][a], texts[name][b]) for a, b in keys) for name, keys in groups.items()}


def figures() -> dict[str, dict[str, list[float]]]:
    """What the pairs measured, per embedder and group: min, mean and max cosine, and n pairs."""
    return _data()["figures"]


@dataclass(frozen=True, slots=True)
class Thresholds:
    dup: float
    merge: float


PAPER = Thresholds(dup=0.5, merge=0.5)  # set in the paper for its API embedder (text-embedding-v4)

CALIBRATED: dict[str, Thresholds] = {name: Thresholds(**t) for name, t in _data()["thresholds"].items()}
"""θ_dup and θ_merge by embedder, chosen from the recorded figures (``calibration.toml`` says how)."""


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
    sims = {name: pair_similarities(embedder, pairs) for name, pairs in labelled_pairs().items()}
    out = {
        name: {"min": float(s.min()), "mean": float(s.mean()), "max": float(s.max()), "n": float(len(s))}
        for name, s in sims.items()
    }
    out["suggested"] = {
        "dup": choose_threshold(sims["cause_paraphrase"], sims["cause_unrelated"]),
        "merge": choose_threshold(sims["label_paraphrase"], sims["label_unrelated"]),
    }
    return out
