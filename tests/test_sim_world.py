"""The simulator's question families: texts, answers, traps and solution steps."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from diagevo.config import Config
from diagevo.curriculum.answers import extract_answer
from diagevo.train.sim.families import AREAS, FAMILIES, FAMILY_BY_NAME
from diagevo.train.sim.text import boxed, normalize_question
from diagevo.train.sim.world import Registry, Spec, build, render_response

FAMS = {f.name: f for f in FAMILIES}


def test_catalogue_spans_enough_skills_and_areas() -> None:
    assert len(FAMILIES) >= 12
    assert len({f.area for f in FAMILIES[:12]}) >= 4
    for f in FAMILIES:
        assert len(f.causes) >= 3
        assert all(10 <= len(c.split()) <= 20 for c in f.causes), f.name
    for labels in AREAS.values():
        assert len(labels) >= 3
        assert all(10 <= len(lbl.split()) <= 20 for lbl in labels)


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_boxed_answer_and_trap_differ(family: str) -> None:
    rng = random.Random(7)
    for d in range(4):
        for _ in range(25):
            q = build(Spec((family,), d, rng.randint(0, 4), rng.randint(0, 3), rng.getrandbits(48)), FAMS)
            right = render_response(q.paths[(True,)], q.values[(True,)])
            wrong = render_response(q.paths[(False,)], q.values[(False,)])
            assert right.startswith("Step 1: ") and right.rstrip().endswith(".")
            assert extract_answer(right) == extract_answer(boxed(q.answer))
            assert q.trap != q.answer
            assert extract_answer(wrong) != extract_answer(right)
            assert q.misread not in (q.answer, q.trap)


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_templates_give_varied_wording(family: str) -> None:
    rng = random.Random(3)
    texts = [build(Spec((family,), rng.randint(0, 3), 0, 0, rng.getrandbits(48)), FAMS) for _ in range(60)]
    assert len({q.parts[0].template for q in texts}) >= 3
    openings = {" ".join(q.text.split()[:3]) for q in texts}
    assert len(openings) >= 3


def test_padding_and_distractors_lengthen_questions() -> None:
    rng = random.Random(0)
    plain = [build(Spec(("log_domain",), 1, 0, 0, rng.getrandbits(48)), FAMS).words for _ in range(40)]
    long = [build(Spec(("log_domain",), 1, 4, 3, rng.getrandbits(48)), FAMS).words for _ in range(40)]
    assert sum(long) / 40 > sum(plain) / 40 + 100


def test_stitched_question_needs_both_skills() -> None:
    q = build(Spec(("extraneous_roots", "log_domain"), 1, 0, 0, 12345), FAMS)
    assert [p.family for p in q.parts] == ["extraneous_roots", "log_domain"]
    good = q.values[(True, True)]
    others = [q.values[k] for k in ((True, False), (False, True), (False, False))]
    assert good == q.answer
    assert good not in others and len(set(others)) == 3  # each trap changes the answer on its own
    text = render_response(q.paths[(True, False)], q.values[(True, False)])
    assert "radical equation" in text and "logarithmic equation" in text
    assert q.parts[0].text in q.text and q.parts[1].text in q.text


def test_rendering_is_deterministic_and_registry_finds_wrapped_text() -> None:
    spec = Spec(("negative_remainder",), 2, 2, 1, 99)
    a, b = build(spec, FAMS), build(spec, FAMS)
    assert a.text == b.text and a.answer == b.answer
    reg = Registry(FAMILY_BY_NAME)
    q = reg.register(spec)
    assert reg.lookup(f"<question>\n  {q.text}\n</question>") is not None
    assert normalize_question(f"<question>{q.text}</question>") == q.text
    assert reg.lookup("What is 2 + 2?") is None


def test_default_config_uses_twelve_families() -> None:
    from diagevo.train.sim.families import families

    fams = families(Config().sim.n_families)
    assert len(fams) == 12 and len({f.area for f in fams}) >= 4
    assert isinstance(build(Spec((fams[0].name,), 0, 0, 0, 1), FAMS).answer, Fraction)
