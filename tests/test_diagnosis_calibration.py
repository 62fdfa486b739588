"""Thresholds belong to an embedding model: the local MiniLM's and its static distillation's are
measured here."""

from __future__ import annotations

import numpy as np
import pytest

from diagevo.config.sections import DiagnosisConfig
from diagevo.diagnosis import calibration as cal
from diagevo.diagnosis.embedder import LOCAL_MODEL_NAME
from diagevo.diagnosis.static import STATIC_MODEL_NAME
from diagevo.diagnosis.tools import make_embedder

SPEC = {LOCAL_MODEL_NAME: "local", STATIC_MODEL_NAME: "static"}


@pytest.fixture(scope="module", params=sorted(SPEC))
def measured(request: pytest.FixtureRequest) -> tuple[str, dict[str, np.ndarray]]:
    e = make_embedder(SPEC[request.param])
    return request.param, {name: cal.pair_similarities(e, pairs) for name, pairs in cal.labelled_pairs().items()}


def test_the_labelled_set_is_made_of_10_to_20_word_phrases() -> None:
    groups = list(cal.labelled_pairs().values())
    assert sum(len(g) for g in groups) >= 60
    for group in groups:
        for a, b in group:
            assert a != b
            for t in (a, b):
                assert 10 <= len(t.split()) <= 20, t


def test_recorded_figures_match_a_fresh_measurement(measured: tuple[str, dict[str, np.ndarray]]) -> None:
    model, sims = measured
    for name, (lo, mean, hi, n) in cal.figures()[model].items():
        s = sims[name]
        assert len(s) == n
        assert (s.min(), s.mean(), s.max()) == pytest.approx((lo, mean, hi), abs=0.01), name


def test_dup_threshold_keeps_unrelated_causes_from_prompt_2(measured: tuple[str, dict[str, np.ndarray]]) -> None:
    model, sims = measured
    theta = cal.CALIBRATED[model].dup
    para, unrel = sims["cause_paraphrase"], sims["cause_unrelated"]
    assert (unrel < theta).all()  # no unrelated pair reaches Prompt 2
    assert (para >= theta).sum() >= len(para) - 2  # MiniLM misses one paraphrase, the static vectors two
    assert theta == pytest.approx(cal.choose_threshold(para, unrel), abs=0.01)


def test_local_dup_threshold_catches_more_duplicates_than_the_papers() -> None:
    e = make_embedder("local")
    para = cal.pair_similarities(e, cal.labelled_pairs()["cause_paraphrase"])
    assert (para >= 0.5).sum() < (para >= cal.CALIBRATED[LOCAL_MODEL_NAME].dup).sum()


def test_merge_threshold_separates_label_pairs(measured: tuple[str, dict[str, np.ndarray]]) -> None:
    model, sims = measured
    theta = cal.CALIBRATED[model].merge
    assert sims["label_paraphrase"].min() >= theta > sims["label_unrelated"].max()
    assert theta == pytest.approx(cal.choose_threshold(sims["label_paraphrase"], sims["label_unrelated"]), abs=0.01)


def test_the_pipeline_uses_the_threshold_of_the_embedder_in_use() -> None:
    default = DiagnosisConfig()
    assert cal.thresholds_for(default, LOCAL_MODEL_NAME) == cal.CALIBRATED[LOCAL_MODEL_NAME]
    assert cal.thresholds_for(default, STATIC_MODEL_NAME) == cal.CALIBRATED[STATIC_MODEL_NAME]
    assert cal.thresholds_for(default, "text-embedding-v4") == cal.Thresholds(0.5, 0.5)
    explicit = DiagnosisConfig(theta_dup=0.6)
    assert cal.thresholds_for(explicit, LOCAL_MODEL_NAME) == cal.Thresholds(0.6, cal.CALIBRATED[LOCAL_MODEL_NAME].merge)


def test_choose_threshold() -> None:
    assert cal.choose_threshold(np.array([0.6, 0.8]), np.array([0.1, 0.4])) == pytest.approx(0.5)
    # overlapping: the cut with the fewest errors (one), in the widest gap
    assert cal.choose_threshold(np.array([0.2, 0.6, 0.7]), np.array([0.1, 0.3])) == pytest.approx(0.45)
