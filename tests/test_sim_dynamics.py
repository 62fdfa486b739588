"""Question composition, the per-round measures and the dynamics the ablation stores."""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from diagevo.catalog import EvalRecorded
from diagevo.curriculum.stats import mean_words
from diagevo.log import open_log
from diagevo.memory.sampler import FREE
from diagevo.train.config import load_config
from diagevo.train.sim.backend import SimBackend
from diagevo.train.sim.challenger import Challenger, Choice
from diagevo.train.sim.config import SimParams
from diagevo.train.sim.families import families, variants_of
from diagevo.train.sim.measures import bigram_diversity, share_covered, skill_coverage
from diagevo.train.sim.world import MAX_PARTS, Spec, build
from tests.test_cli_memory import run_cli

FAMS = families(14)
V = {v.key: v for v in variants_of(FAMS)}


def _no_embedder():  # free exploration never reads a cause
    raise AssertionError("free exploration must not embed")


def test_measures_on_known_texts() -> None:
    assert mean_words(["a b c", "d e"]) == 2.5
    assert mean_words([]) == 0.0
    assert bigram_diversity(["a b a b"]) == pytest.approx(100 * 2 / 3)  # (a b), (b a), (a b)
    assert bigram_diversity(["x y", "x y"]) == 50.0  # pooled over questions
    assert skill_coverage(["a", "b", "c", "d"], 4) == pytest.approx(1.0)
    assert skill_coverage(["a"] * 9, 4) == 0.0
    assert 0 < skill_coverage(["a"] * 9 + ["b"], 4) < 0.5
    assert share_covered(["a", "a", "b"], 4) == 0.5


def test_chained_question_needs_every_part() -> None:
    keys = ("extraneous_roots.radical_sign", "log_domain.argument_positive", "inclusion_exclusion.union_two")
    q = build(Spec(keys, 1, 0, 0, 4242), V)
    assert [p.skill for p in q.parts] == list(keys)
    assert all(p.text in q.text for p in q.parts)
    assert q.answer == sum((c * p.answer for c, p in zip(q.coef, q.parts, strict=True)), Fraction(0))
    assert len(q.values) == 2**3 and len(set(q.values.values())) > 1
    assert q.paths[(True, True, True)][-1].startswith("Combine the parts:")
    one = build(Spec(keys[:1], 1, 0, 0, 4242), V)
    assert q.words > one.words + 40  # each extra part adds its statement


def _draw_parts(composition: bool, depth_logits: list[float] | None = None) -> list[int]:
    ch = Challenger(FAMS, SimParams(), _no_embedder, composition=composition)
    if depth_logits is not None:
        ch.heads["free"]["depth"] = np.array(depth_logits)
    rng = random.Random(3)
    return [len(ch.propose(FREE, rng)[0].skills) for _ in range(300)]


def test_depth_is_a_choice_of_the_free_challenger() -> None:
    assert set(_draw_parts(False, [-9.0, -9.0, 9.0])) == {1}  # switched off: one sub-problem
    assert set(_draw_parts(True, [-9.0, -9.0, 9.0])) == {MAX_PARTS}
    default = _draw_parts(True)
    assert 1.0 < float(np.mean(default)) < 1.3  # mostly single problems at the start


def test_reinforce_moves_depth_towards_rewarded_parts() -> None:
    ch = Challenger(FAMS, SimParams(), _no_embedder)
    before = ch.expected("free")["depth"]
    choices = [Choice("free", (0,) * (1 + d), 0, 0, 0, d) for d in (0, 1, 2) for _ in range(10)]
    advantages = [-1.0] * 10 + [0.0] * 10 + [1.0] * 10  # three parts rewarded, one part penalised
    ch.update(choices, advantages)
    assert ch.expected("free")["depth"] > before
    off = Challenger(FAMS, SimParams(), _no_embedder, composition=False)
    assert "depth" not in off.expected("free")
    off.update([Choice("free", (0,), 0, 0, 0, None)], [1.0])  # no depth draw, no depth gradient


@pytest.mark.slow
def test_ablate_stores_dynamics_per_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ab.db"
    code, out, err = run_cli(
        capsys,
        "ablate",
        "--seeds",
        "1",
        "--rounds",
        "2",
        "--variant",
        "full",
        "--variant",
        "pure free",
        "--world",
        "all on",
        "--out",
        str(db),
        "--json",
        "--set",
        "train.challenger_questions=16",
        "--set",
        "train.curriculum_questions=48",
    )
    assert code == 0, err
    rows = {r["variant"]: r for r in json.loads(out)["all on"]}
    assert rows["full"]["reference"] == "pure free"
    for r in rows.values():
        dyn = r["dynamics"]
        assert len(dyn["question_words"]) == 2 and all(w > 20 for w in dyn["question_words"])
        assert all(0.0 <= a <= 1.0 for a in dyn["shared_label_acc"])
        assert all(0.0 < c <= 1.0 for c in dyn["skill_coverage"])
        assert dyn["promotions"][0] == 0.0  # nothing to promote in round 1
        assert all(1.0 <= p <= 3.0 for p in dyn["parts_per_question"])
        assert all(0.3 < a <= 1.0 for a in dyn["train_label_acc"])
        assert dyn["solver_care"][0] != 0.0  # read from the solver phase
    # both variants were measured on the same shared questions
    assert rows["full"]["dynamics"]["shared_question_words"] == rows["pure free"]["dynamics"]["shared_question_words"]
    # pure free never targets a cause: no memory-guided question, so no promotions
    assert rows["pure free"]["dynamics"]["mastered"] == [0.0, 0.0]
    with open_log(f"sqlite:///{db}") as store:
        stored = [
            e for e in store.read("ablate/all on/full/s0", types=(EvalRecorded,)) if e.event.measure == "sim-dynamics"
        ]
    assert [e.round for e in stored] == [1, 2]
    assert stored[1].event.metrics["shared_label_acc"] == rows["full"]["dynamics"]["shared_label_acc"][1]
    with open_log(f"sqlite:///{db}") as store:
        from diagevo.report.data import load_run
        from diagevo.views.verify import verify_run

        assert verify_run(store, "ablate/all on/full/s0") == []  # measures appended after commit
        report = load_run(store, "ablate/all on/full/s0")
    # the loop's per-family held-out accuracy is still what the report draws for those rounds
    assert sorted({a.round for a in report.heldout_detail}) == [1, 2]
    # a second call resumes: nothing is trained or stored twice
    code, out2, err = run_cli(
        capsys,
        "ablate",
        "--seeds",
        "1",
        "--rounds",
        "2",
        "--variant",
        "full",
        "--variant",
        "pure free",
        "--world",
        "all on",
        "--out",
        str(db),
        "--json",
        "--set",
        "train.challenger_questions=16",
        "--set",
        "train.curriculum_questions=48",
    )
    assert code == 0, err
    assert json.loads(out2) == json.loads(out)


def test_shared_questions_are_the_reference_challengers(tmp_path: Path) -> None:
    from diagevo.train.sim.dynamics import SHARED_QUESTIONS, shared_questions

    cfg = load_config("configs/sim.toml", [])
    b = SimBackend(cfg)
    b.challenger.heads["free"]["depth"] = np.array([-9.0, -9.0, 9.0])
    b.save(tmp_path / "long")
    b.challenger.heads["free"]["depth"] = np.array([9.0, -9.0, -9.0])
    b.save(tmp_path / "short")
    fresh = SimBackend(cfg)
    long = shared_questions(fresh, tmp_path / "long", 0, 3)
    short = shared_questions(fresh, tmp_path / "short", 0, 3)
    assert len(long) == SHARED_QUESTIONS
    assert all(len(q.parts) == 3 for q in long) and all(len(q.parts) == 1 for q in short)
    assert [q.text for q in shared_questions(fresh, tmp_path / "long", 0, 3)] == [q.text for q in long]
