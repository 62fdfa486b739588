"""Skill families and their trap variants: the simulated world's skills, read from ``families.toml``.

A family is a skill (extraneous roots, inclusion-exclusion, ...). It has several trap
*variants*: distinct ways a solver gets that skill wrong (keeping a root that makes the radical's
side negative, keeping a root that zeroes a denominator, dropping the negative square root, ...).
A variant is a sub-skill of its own: its writer (``diagevo.train.sim.questions``) draws the
numbers of its own kind of question at a difficulty level (0-3), the true answer and the answer of
a solver that falls into the variant's trap; its templates word the question and both solution
paths as steps around them. The two paths share ``lead`` steps and
diverge at the first step of ``right`` / ``wrong``; that divergence is what the simulated
diagnostician looks for. Steps carry no context words, only numbers, so two steps of one variant
differ only numerically unless the reasoning differs, and the diverging steps of two variants
always differ in wording.

Language side (what the challenger and the diagnostician read through the embedding model), the
data of ``families.toml``:

- every variant has question and step templates, a skill description and 10-20 word verb-object
  cause paraphrases (what the simulated diagnostician reports, Appendix J). Paraphrases of sibling variants share the
  family's vocabulary, so they are similar but distinct, as real fine-grained causes are;
- every family has several 10-20 word skill-node labels: skill nodes correspond to families, and
  a family named twice under different label wordings gives two nodes that consolidation merges.

Real error causes are this fine-grained (the paper's memory holds 151-244 causes under about 36
skill nodes), so a cause collects only the failures of its own mechanism.
"""

from __future__ import annotations

import random
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from importlib import resources
from string import Formatter
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from diagevo.errors import BadInput
from diagevo.train.sim.questions import WRITERS, Writer, worded
from diagevo.train.sim.questions.common import field_expression


@dataclass(frozen=True, slots=True)
class Instance:
    skill: str  # variant key, "family.variant"
    family: str
    template: int  # surface template used (a "context" for transfer)
    text: str
    answer: Fraction
    trap: Fraction
    lead: tuple[str, ...]
    right: tuple[str, ...]
    wrong: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Variant:
    key: str  # "family.variant"
    family: str
    skill: str  # what the challenger matches a cause text against
    causes: tuple[str, ...]  # the diagnostician's paraphrases of this trap
    writer: Writer
    questions: tuple[str, ...]  # templates of the question, filled in with what the writer drew
    steps: tuple[tuple[str, ...], ...]  # templates of the lead, right and wrong steps

    def make(self, rng: random.Random, d: int) -> Instance:
        while True:  # the rare draw whose trap gives the true answer is redrawn, worded again
            draw = self.writer(rng, d)
            t, text, (lead, right, wrong) = worded(draw, rng, self.questions, self.steps)
            if Fraction(draw.answer) != Fraction(draw.trap):
                break
        return Instance(self.key, self.family, t, text, Fraction(draw.answer), Fraction(draw.trap), lead, right, wrong)


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    area: str
    skill: str
    labels: tuple[str, ...]  # 10-20 word skill-node labels
    variants: tuple[Variant, ...]

    @property
    def causes(self) -> tuple[str, ...]:
        return tuple(c for v in self.variants for c in v.causes)


@dataclass(frozen=True, slots=True)
class Catalogue:
    """Every family, in the file's order, and the two lookups the simulator needs."""

    families: tuple[Family, ...]
    family_by_name: Mapping[str, Family]
    variant_by_key: Mapping[str, Variant]  # "family.variant"


# ----------------------------------------------------------------------------- families.toml


def _ten_to_twenty_words(text: str) -> str:
    """A cause or a skill-node label is 10-20 words, as the paper's prompts ask (Appendix J)."""
    words = len(text.split())
    if not 10 <= words <= 20:
        raise ValueError(f"has {words} words; a cause or a label has 10-20")
    return text


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("is blank")
    return text


_Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
_Sentence = Annotated[str, AfterValidator(_not_blank)]


def _a_template(text: str) -> str:
    """A template of a question or a step: text with ``{name}`` or ``{name + 1}`` fields (``{{``
    for a brace)."""
    try:
        for _, field, _, _ in Formatter().parse(_not_blank(text)):
            if field is not None:
                field_expression(field)
    except ValueError as exc:
        raise ValueError(f"is not a template: {exc}") from None
    return text


_Phrase = Annotated[str, AfterValidator(_ten_to_twenty_words)]
_Template = Annotated[str, AfterValidator(_a_template)]


class _VariantEntry(BaseModel):
    """One ``[[family.variant]]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: _Name
    skill: _Sentence
    causes: tuple[_Phrase, ...] = Field(min_length=1)
    questions: tuple[_Template, ...] = Field(min_length=1)
    lead: tuple[_Template, ...] = ()
    right: tuple[_Template, ...] = Field(min_length=1)
    wrong: tuple[_Template, ...] = Field(min_length=1)


class _FamilyEntry(BaseModel):
    """One ``[[family]]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: _Name
    area: _Name
    skill: _Sentence
    labels: tuple[_Phrase, ...] = Field(min_length=1)
    variants: tuple[_VariantEntry, ...] = Field(alias="variant", min_length=1)


class _FamiliesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    families: tuple[_FamilyEntry, ...] = Field(alias="family", min_length=1)


def _where(loc: tuple[int | str, ...], doc: Any) -> str:
    """A pydantic error location in the file's words: ``("family", 2, "variant", 0, "causes", 3)``
    is ``family 'log_domain', variant 'argument_positive', causes[3]``."""
    parts: list[str] = []
    node, i = doc, 0
    while i < len(loc):
        key, index = loc[i], loc[i + 1] if i + 1 < len(loc) else None
        if not isinstance(index, int):
            parts.append(str(key))
            i += 1
            continue
        items = node.get(key) if isinstance(node, dict) else None
        node = items[index] if isinstance(items, list) and index < len(items) else None
        name = node.get("name") if isinstance(node, dict) and key in ("family", "variant") else None
        if key in ("family", "variant"):
            parts.append(f"{key} {name!r}" if isinstance(name, str) else f"{key} #{index + 1}")
        else:
            parts.append(f"{key}[{index}]")
        i += 2
    return ", ".join(parts)


def _check_unique(entries: tuple[_FamilyEntry, ...], source: str) -> None:
    """Names, labels and causes each name one thing: the diagnostician looks a text up to find
    its family or variant, so a text shared by two would be read as one of them only."""
    family_of: dict[str, str] = {}  # label -> family
    variant_of: dict[str, str] = {}  # cause -> "family.variant"
    for n, f in enumerate(entries):
        where = f"{source}: family {f.name!r}"
        if any(g.name == f.name for g in entries[:n]):
            raise BadInput(f"{where}: name: another family has this name")
        for i, label in enumerate(f.labels):
            if family_of.setdefault(label, f.name) != f.name:
                raise BadInput(f"{where}, labels[{i}]: the same text is a label of family {family_of[label]!r}")
        for m, v in enumerate(f.variants):
            if any(w.name == v.name for w in f.variants[:m]):
                raise BadInput(f"{where}, variant {v.name!r}: name: another variant of the family has this name")
            key = f"{f.name}.{v.name}"
            for i, cause in enumerate(v.causes):
                if variant_of.setdefault(cause, key) != key:
                    raise BadInput(
                        f"{where}, variant {v.name!r}, causes[{i}]: the same text is a cause of {variant_of[cause]!r}"
                    )


def _read_entries(text: str, source: str) -> tuple[_FamilyEntry, ...]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: {exc}") from None
    try:
        entries = _FamiliesFile.model_validate(doc).families
    except ValidationError as exc:
        err = exc.errors()[0]
        raise BadInput(f"{source}: {_where(err['loc'], doc)}: {err['msg'].removeprefix('Value error, ')}") from None
    _check_unique(entries, source)
    return entries


# ----------------------------------------------------------------------------- the catalogue


def _check_writers(entries: tuple[_FamilyEntry, ...], writers: Mapping[str, Writer], source: str) -> None:
    """Every variant has a question writer and every writer a variant: the key ``family.variant``
    joins the file's words to the code that writes the questions."""
    keys = {f"{f.name}.{v.name}": (f.name, v.name) for f in entries for v in f.variants}
    for key, (family, variant) in keys.items():
        if key not in writers:
            raise BadInput(f"{source}: family {family!r}, variant {variant!r}: no question writer has this key")
    unused = next((key for key in writers if key not in keys), None)
    if unused is not None:
        raise BadInput(f"{source}: the question writer {unused!r} has no variant of this key")


def _family_of(entry: _FamilyEntry, writers: Mapping[str, Writer]) -> Family:
    variants = tuple(
        Variant(
            key=f"{entry.name}.{v.name}",
            family=entry.name,
            skill=v.skill,
            causes=v.causes,
            writer=writers[f"{entry.name}.{v.name}"],
            questions=v.questions,
            steps=(v.lead, v.right, v.wrong),
        )
        for v in entry.variants
    )
    return Family(name=entry.name, area=entry.area, skill=entry.skill, labels=entry.labels, variants=variants)


def parse_catalogue(text: str, writers: Mapping[str, Writer], source: str = "families.toml") -> Catalogue:
    """The families of a ``families.toml`` text, each variant bound to the writer of its key.
    A bad entry, or a variant without a writer (or a writer without a variant), is a
    :class:`~diagevo.errors.BadInput` naming the family, the variant and the field."""
    entries = _read_entries(text, source)
    _check_writers(entries, writers, source)
    fams = tuple(_family_of(entry, writers) for entry in entries)
    return Catalogue(
        families=fams,
        family_by_name={f.name: f for f in fams},
        variant_by_key={v.key: v for f in fams for v in f.variants},
    )


@cache
def catalogue() -> Catalogue:
    """The families shipped in the package, read and validated once per process."""
    text = resources.files("diagevo.train.sim").joinpath("families.toml").read_text(encoding="utf-8")
    return parse_catalogue(text, WRITERS, "diagevo/train/sim/families.toml")


def families(n: int) -> tuple[Family, ...]:
    """The first ``n`` families of the catalogue (ordered so that any prefix of 5 or more spans
    every knowledge area)."""
    every = catalogue().families
    if not 1 <= n <= len(every):
        raise BadInput(f"sim.n_families must be between 1 and {len(every)}")
    return every[:n]


def variants_of(fams: Sequence[Family]) -> tuple[Variant, ...]:
    return tuple(v for f in fams for v in f.variants)
