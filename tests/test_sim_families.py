"""The simulator's families file: what it loads, that it loads once, and the one-line error a bad
entry gives (naming the family, the variant and the field)."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from diagevo.errors import BadInput
from diagevo.train.sim.families import Family, catalogue, parse_catalogue
from diagevo.train.sim.questions import WRITERS, Draw

# sha256 of the catalogue's words, and of what every writer draws for fixed seeds, as the Python
# literal that families.toml replaced produced them (computed once from that module): a run of the
# simulator is a function of its seed, so changing either changes every simulated run
LANGUAGE = "6706f97692e88240aace779a2657129bae996e41a8a2793c0764fcb932169b2d"
DRAWS = "404a9d71933df43831454aa28e8f909389e2acf9619469149172eba5ef4c9e5a"


def _language(fams: tuple[Family, ...]) -> str:
    doc = [
        {
            "name": f.name,
            "area": f.area,
            "skill": f.skill,
            "labels": list(f.labels),
            "variants": [
                {"key": v.key, "family": v.family, "skill": v.skill, "causes": list(v.causes)} for v in f.variants
            ],
        }
        for f in fams
    ]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _draws(fams: tuple[Family, ...]) -> str:
    h = hashlib.sha256()
    for v in (v for f in fams for v in f.variants):
        rng = random.Random(v.key)
        for d in range(4):
            for _ in range(5):
                i = v.make(rng, d)
                row = [i.skill, i.family, i.template, i.text, str(i.answer), str(i.trap), i.lead, i.right, i.wrong]
                h.update(json.dumps(row).encode())
    return h.hexdigest()


def test_the_file_holds_what_the_literal_held_and_the_writers_draw_the_same() -> None:
    fams = catalogue().families
    assert [f.name for f in fams[:2]] == ["extraneous_roots", "negative_remainder"]
    assert len(fams) == 14 and sum(len(f.variants) for f in fams) == 50
    assert _language(fams) == LANGUAGE
    assert _draws(fams) == DRAWS


def test_the_families_are_read_once_per_process() -> None:
    assert catalogue() is catalogue()
    assert catalogue().variant_by_key["log_domain.power_rule"].family == "log_domain"
    assert catalogue().family_by_name["log_domain"].variants[2].key == "log_domain.power_rule"


CAUSE = "keeps a root that makes a denominator zero after multiplying a rational equation through by it"
OTHER = "fails to exclude values where the denominator vanishes when solving an equation with fractions"
LABEL = "checks candidate roots of radical and rational equations against the original equation after transforming"
GOOD = f"""
[[family]]
name = "roots"
area = "algebra"
skill = "solutions must be checked"
labels = ["{LABEL}"]

[[family.variant]]
name = "pole"
skill = "a denominator may vanish"
causes = ["{CAUSE}"]
questions = ["What is {{a}} + 1?"]
right = ["Add: {{ans}}."]
wrong = ["Add: {{trap}}."]

[[family.variant]]
name = "sign"
skill = "a square root is never negative"
causes = ["{OTHER}"]
questions = ["What is {{a}} + 1?", "{{someone}} adds 1 to {{a}}. What is the sum?"]
right = ["Add: {{ans}}."]
wrong = ["Add: {{trap}}."]
"""


def _writer(rng: random.Random, d: int) -> Draw:
    return Draw(2, 3, a=1)


WRITES = {"roots.pole": _writer, "roots.sign": _writer}


def test_a_good_file_binds_each_variant_to_its_writer() -> None:
    cat = parse_catalogue(GOOD, WRITES)
    (fam,) = cat.families
    assert [v.key for v in fam.variants] == ["roots.pole", "roots.sign"]
    assert fam.labels == (LABEL,) and fam.causes == (CAUSE, OTHER)
    made = cat.variant_by_key["roots.sign"].make(random.Random(0), 0)
    assert (made.answer, made.trap, made.right, made.wrong) == (2, 3, ("Add: 2.",), ("Add: 3.",))
    assert made.text in ("What is 1 + 1?", f"{made.text.split()[0]} adds 1 to 1. What is the sum?")


@pytest.mark.parametrize(
    ("text", "writers", "message"),
    [
        (
            GOOD.replace(f'["{OTHER}"]', '["drops the minus sign"]'),
            WRITES,
            "family 'roots', variant 'sign', causes[0]: has 4 words; a cause or a label has 10-20",
        ),
        (
            GOOD.replace('skill = "a denominator may vanish"\n', ""),
            WRITES,
            "family 'roots', variant 'pole', skill: Field required",
        ),
        (GOOD.replace('area = "algebra"', 'area = "algebra"\ncolour = "red"'), WRITES, "family 'roots', colour: Extra"),
        (GOOD.replace('name = "sign"', 'name = "Sign Flip"'), WRITES, "family 'roots', variant 'Sign Flip', name: "),
        (GOOD.replace('labels = ["', 'labels = [7, "'), WRITES, "family 'roots', labels[0]: Input should be"),
        (
            GOOD.replace("Add: {ans}.", "Add: {ans."),
            WRITES,
            "family 'roots', variant 'pole', right[0]: is not a template: expected '}' before end of string",
        ),
        (
            GOOD.replace("Add: {trap}.", "Add: {trap[0]}."),
            WRITES,
            "variant 'pole', wrong[0]: is not a template: a field is a name in braces, {name}",
        ),
        (
            GOOD.replace('skill = "solutions must be checked"', 'skill = "  "'),
            WRITES,
            "family 'roots', skill: is blank",
        ),
        (GOOD.replace(OTHER, CAUSE), WRITES, "variant 'sign', causes[0]: the same text is a cause of 'roots.pole'"),
        (GOOD.replace('name = "sign"', 'name = "pole"'), WRITES, "variant 'pole': name: another variant of the"),
        (GOOD + GOOD, WRITES, "family 'roots': name: another family has this name"),
        (GOOD, {"roots.pole": _writer}, "family 'roots', variant 'sign': no question writer has this key"),
        (GOOD, {**WRITES, "roots.gone": _writer}, "the question writer 'roots.gone' has no variant of this key"),
        ("version = 2\n" + GOOD, WRITES, "t.toml: version: Extra inputs are not permitted"),
        (GOOD.replace('area = "algebra"', "area = algebra"), WRITES, "t.toml: Invalid value (at line 4"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_family_the_variant_and_the_field(
    text: str, writers: dict[str, object], message: str
) -> None:
    with pytest.raises(BadInput) as err:
        parse_catalogue(text, writers, "t.toml")  # type: ignore[arg-type]
    assert message in str(err.value) and str(err.value).startswith("t.toml: ")
    assert "\n" not in str(err.value)


def test_every_variant_of_the_shipped_file_has_a_writer_and_every_writer_a_variant() -> None:
    assert set(WRITERS) == set(catalogue().variant_by_key)
