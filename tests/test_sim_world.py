"""The simulator's question families and their trap variants: texts, answers, traps, steps."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from diagevo.curriculum.answers import extract_answer
from diagevo.train.config import Config
from diagevo.train.sim.families import catalogue, families, variants_of
from diagevo.train.sim.text import boxed, normalize_question, signature
from diagevo.train.sim.world import Registry, Spec, build, render_response

FAMILIES = catalogue().families
FAMS = catalogue().variant_by_key  # build() takes the variants by key
KEYS = sorted(FAMS)


def test_catalogue_spans_enough_skills_variants_and_areas() -> None:
    assert len(FAMILIES) >= 12
    assert len({f.area for f in FAMILIES[:12]}) >= 4
    default = variants_of(FAMILIES[:12])
    assert 40 <= len(default) <= 70
    texts: set[str] = set()
    for f in FAMILIES:
        assert 3 <= len(f.variants) <= 5, f.name
        assert len(f.labels) >= 3 and all(10 <= len(lbl.split()) <= 20 for lbl in f.labels), f.name
        for v in f.variants:
            assert v.key.startswith(f.name + ".") and v.family == f.name
            assert len(v.causes) >= 3
            assert all(10 <= len(c.split()) <= 20 for c in v.causes), v.key
            assert not texts & set(v.causes), v.key  # every paraphrase names one mechanism only
            texts |= set(v.causes)


def test_variants_diverge_at_distinct_steps() -> None:
    """The first steps of the right and wrong paths identify the variant: no two variants (and
    not the right and wrong path of one) share a diverging step wording."""
    owner: dict[str, str] = {}
    for key in KEYS:
        rng = random.Random(key)
        for d in range(4):
            for _ in range(30):
                inst = FAMS[key].make(rng, d)
                assert signature(inst.right[0]) != signature(inst.wrong[0]), key
                for step in (inst.right[0], inst.wrong[0]):
                    assert owner.setdefault(signature(step), key) == key, (key, step)


@pytest.mark.parametrize("family", KEYS)
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


@pytest.mark.parametrize("family", KEYS)
def test_templates_give_varied_wording(family: str) -> None:
    rng = random.Random(3)
    texts = [build(Spec((family,), rng.randint(0, 3), 0, 0, rng.getrandbits(48)), FAMS) for _ in range(60)]
    assert len({q.parts[0].template for q in texts}) >= 3
    openings = {" ".join(q.text.split()[:3]) for q in texts}
    assert len(openings) >= 3
    assert len({q.answer for q in texts}) >= 3


def test_padding_and_distractors_lengthen_questions() -> None:
    rng = random.Random(0)
    plain = [
        build(Spec(("log_domain.argument_positive",), 1, 0, 0, rng.getrandbits(48)), FAMS).words for _ in range(40)
    ]
    long = [build(Spec(("log_domain.argument_positive",), 1, 4, 3, rng.getrandbits(48)), FAMS).words for _ in range(40)]
    assert sum(long) / 40 > sum(plain) / 40 + 100


def test_stitched_question_needs_both_skills() -> None:
    q = build(Spec(("extraneous_roots.radical_sign", "log_domain.argument_positive"), 1, 0, 0, 12345), FAMS)
    assert [p.family for p in q.parts] == ["extraneous_roots", "log_domain"]
    assert [p.skill for p in q.parts] == ["extraneous_roots.radical_sign", "log_domain.argument_positive"]
    good = q.values[(True, True)]
    others = [q.values[k] for k in ((True, False), (False, True), (False, False))]
    assert good == q.answer
    assert good not in others and len(set(others)) == 3  # each trap changes the answer on its own
    text = render_response(q.paths[(True, False)], q.values[(True, False)])
    assert "radical equation" in text and "logarithmic equation" in text
    assert q.parts[0].text in q.text and q.parts[1].text in q.text


def test_rendering_is_deterministic_and_registry_finds_wrapped_text() -> None:
    spec = Spec(("negative_remainder.floor_quotient",), 2, 2, 1, 99)
    a, b = build(spec, FAMS), build(spec, FAMS)
    assert a.text == b.text and a.answer == b.answer
    assert Spec.from_list(spec.to_list()) == spec
    reg = Registry(FAMS)
    q = reg.register(spec)
    assert reg.lookup(f"<question>\n  {q.text}\n</question>") is not None
    assert normalize_question(f"<question>{q.text}</question>") == q.text
    assert reg.lookup("What is 2 + 2?") is None


def test_default_config_uses_twelve_families() -> None:
    fams = families(Config().sim.n_families)
    assert len(fams) == 12 and len({f.area for f in fams}) >= 4
    assert isinstance(build(Spec((fams[0].variants[0].key,), 0, 0, 0, 1), FAMS).answer, Fraction)
