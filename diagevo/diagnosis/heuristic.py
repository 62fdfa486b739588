"""An offline heuristic diagnostician: the ``hf`` backend's when no LLM endpoint is configured,
and ``diagevo diagnose --diagnostician heuristic`` (to try the round protocol without a server).

It is a heuristic, not a model, and not the paper's LLM diagnostician. Prompt 1 is answered by
rules: by default (the hf backend) by finding the first step where the failed response departs
from the reference (the construction response that agrees with the pseudo-label) and wording
that departure as a cause; with ``answers=True`` (the CLI) first by how the final answer misses
the pseudo-label (no final answer, the sign, off by one, off by a factor, another number or
expression; :func:`answer_mismatch`), each with a fixed cause wording. Prompts 2-4 are answered
by embedding similarity against the calibrated thresholds (θ_dup for causes, θ_merge for nodes);
with ``answers=True`` only between texts one rule worded (a rule's texts are known from their
wording), so a cause or node of one rule never takes a failure or node of another, however close
their embeddings. Its decisions are deterministic; configure ``diagnosis.llm_url`` for real diagnoses.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from importlib import resources
from typing import Any, Protocol

import numpy as np

from diagevo.curriculum.answers import answer_key, extract_answer, simple_number
from diagevo.diagnosis.interface import (
    Assignment,
    Consolidation,
    Dedup,
    Embedder,
    Extraction,
    ExtractionInput,
    KnownCause,
    NodeView,
    Reply,
)

MODEL = "heuristic-first-departure"
ANSWER_MODEL = "heuristic-answer-mismatch"  # the model name ``diagnose --diagnostician heuristic`` records
NAMED_MODEL = "heuristic-named-errors"  # with a world's named errors (the mini world's)
_STEP_SPLIT = re.compile(r"\n+|(?=Step \d+:)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORDINGS = tomllib.loads(resources.files("diagevo.diagnosis").joinpath("heuristic.toml").read_text(encoding="utf-8"))
"""How causes and node labels are worded (``heuristic.toml`` beside this module)."""
_OPERATIONS: tuple[tuple[str, str], ...] = tuple((key, name) for key, name in _WORDINGS["operations"])
_OPERATION_NAMES = tuple(dict.fromkeys([*(name for _, name in _OPERATIONS), "reasoning"]))
_DEPARTURES: tuple[str, ...] = tuple(_WORDINGS["departures"])  # stopped early, a wrong result, another method
_NODE_LABEL: str = _WORDINGS["node_label"]
DEPARTURE_RULE = "first_departure"  # the rule of every cause_for wording and node_label_for label
_FILLER: list[str] = _WORDINGS["filler"].split()
_LABEL_FILLER: list[str] = _WORDINGS["label_filler"].split()


def steps_of(text: str) -> list[str]:
    return [" ".join(s.split()) for s in _STEP_SPLIT.split(text or "") if s.strip()]


def first_departure(response: str, reference: str) -> tuple[int, str, str] | None:
    """(1-based step, response step, reference step) of the first difference; None when equal."""
    a, b = steps_of(response), steps_of(reference)
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else ""
        y = b[i] if i < len(b) else ""
        if x != y:
            return i + 1, x, y
    return None


def _operation(step: str) -> str:
    low = step.lower()
    for key, name in _OPERATIONS:
        if key in low:
            return name
    return "reasoning"


def _fit(words: list[str], lo: int, hi: int, filler: Sequence[str]) -> str:
    words = words[:hi]
    for w in filler:
        if len(words) >= lo:
            break
        words.append(w)
    return " ".join(words)


def cause_for(response: str, reference: str, min_words: int = 10, max_words: int = 20) -> str | None:
    """The departure worded as a cause; None when the two agree step for step."""
    dep = first_departure(response, reference)
    if dep is None:
        return None
    _, got, want = dep
    op = _operation(want or got)
    if not got:
        template = _DEPARTURES[0]
    elif _NUMBER.sub("#", got) == _NUMBER.sub("#", want):
        template = _DEPARTURES[1]
    else:
        template = _DEPARTURES[2]
    return _fit(template.format(op=op).split(), min_words, max_words, _FILLER)


def node_label_for(cause: str, min_words: int = 10, max_words: int = 20) -> str:
    op = next((name for _, name in _OPERATIONS if name in cause), "reasoning")
    return _fit(_NODE_LABEL.format(op=op).split(), min_words, max_words, _LABEL_FILLER)


# how a final answer misses the pseudo-label -> the cause it is worded as, and its skill node
ANSWER_RULES: dict[str, tuple[str, str]] = {
    rule: (cause, label) for rule, (cause, label) in _WORDINGS["answer_rules"].items()
}
_FACTORS = frozenset({2, 3, 4, 5, 6, 8, 10, 12, 100, 1000})


def answer_mismatch(response: str, pseudo_label: str) -> str | None:
    """How the final answer of ``response`` misses ``pseudo_label``, as a key of
    :data:`ANSWER_RULES`; None when it agrees with the label (a slip elsewhere, not in the answer)."""
    got = extract_answer(response)
    if got is None:
        return "no_final_answer"
    have, want = answer_key(got), answer_key(pseudo_label)
    if have == want:
        return None
    g, w = simple_number(have), simple_number(want)
    if g is None or w is None:
        return "wrong_expression"
    if g == w:
        return None
    if w != 0 and g == -w:
        return "sign"
    if abs(g - w) == 1:
        return "off_by_one"
    if g != 0 and w != 0:
        ratio = abs(g / w)
        ratio = ratio if ratio >= 1 else 1 / ratio
        if ratio.denominator == 1 and int(ratio) in _FACTORS:
            return "off_by_factor"
    return "wrong_number"


class NamedErrors(Protocol):
    """A world's own named errors (the mini world's): every rule's (cause, node label), and the
    rule a failure falls under, read from its question, response and pseudo-label (None: a slip
    no rule names)."""

    def rules(self) -> Mapping[str, tuple[str, str]]: ...

    def name(self, question: str, response: str, pseudo_label: str) -> str | None: ...


class HeuristicDiagnostician:
    """Implements :class:`~diagevo.diagnosis.interface.Diagnostician` without a language model."""

    def __init__(
        self,
        embedder: Embedder,
        theta_dup: float,
        theta_merge: float,
        min_words: int = 10,
        max_words: int = 20,
        *,
        answers: bool = False,
        named: NamedErrors | None = None,
    ) -> None:
        """``answers``: Prompt 1 by how the final answer misses the pseudo-label first (the
        ``diagnose --diagnostician heuristic`` rules), and every reply's ``raw`` a JSON record
        that names the heuristic and its rule; else as the hf backend has always decided.
        ``named``: Prompt 1 by a world's named errors alone (implies ``answers``'s matching and
        records); their causes sharing a node label share a node."""
        self.embedder = embedder
        self.theta_dup, self.theta_merge = theta_dup, theta_merge
        self.min_words, self.max_words = min_words, max_words
        self.answers = answers or named is not None
        self.named = named
        self.model_name = ANSWER_MODEL if answers else NAMED_MODEL if named else MODEL
        as_cause, as_label = self._as_cause, self._as_label
        # every cause and node label a rule words at these limits -> the rule; the answer rules'
        # causes -> their node labels
        self._cause_rules = {as_cause(t.format(op=op)): DEPARTURE_RULE for t in _DEPARTURES for op in _OPERATION_NAMES}
        self._label_rules = {as_label(_NODE_LABEL.format(op=op)): DEPARTURE_RULE for op in _OPERATION_NAMES}
        self._labels: dict[str, str] = {}
        for rule, (cause, label) in {**ANSWER_RULES, **(named.rules() if named else {})}.items():
            worded, labelled = as_cause(cause), as_label(label)
            self._cause_rules[worded] = rule
            self._label_rules.setdefault(labelled, rule)  # a label's first rule stands for all of its causes
            self._labels[worded] = labelled

    def _as_cause(self, words: str) -> str:
        return _fit(words.split(), self.min_words, self.max_words, _FILLER)

    def _as_label(self, words: str) -> str:
        return _fit(words.split(), self.min_words, self.max_words, _LABEL_FILLER)

    def _same_rule(self, a: str | None, b: str | None) -> bool:
        """Whether two texts may match: with ``answers``, only when one rule worded both (texts
        no rule worded, written by another diagnostician, only among themselves)."""
        return not self.answers or a == b

    def _nearest(self, text: str, own: str | None, rules: dict[str, str], others: Sequence[str]) -> tuple[int, float]:
        """The index in ``others`` of the text nearest ``text`` among those one rule may match
        with it (``own``: its rule; ``rules``: each text's), and their similarity; -1 for none."""
        allowed = [i for i, other in enumerate(others) if self._same_rule(own, rules.get(other))]
        if not allowed:
            return -1, -1.0
        v = self.embedder.embed([text, *(others[i] for i in allowed)])
        sims = v[1:] @ v[0]
        best = int(np.argmax(sims))
        return allowed[best], float(sims[best])

    def _reply(self, value: Any, **why: object) -> Reply:
        raw = ""
        if self.answers:  # what decided, in the log: a rule of this heuristic, not an LLM
            raw = json.dumps(
                {"diagnostician": "heuristic", "not": "the paper's LLM diagnostician", **why, "decision": asdict(value)}
            )
        return Reply(value=value, raw=raw, model=self.model_name)

    def _cause(self, item: ExtractionInput) -> tuple[str | None, str]:
        """The failure's cause (None: a non-skill slip) and the rule that worded it."""
        if self.named is not None:
            rule = self.named.name(item.question, item.response, item.pseudo_label)
            if rule is None:
                return None, "unnamed"
            return self._as_cause(self.named.rules()[rule][0]), rule
        if self.answers:
            rule = answer_mismatch(item.response, item.pseudo_label)
            if rule is not None and (rule != "wrong_number" or first_departure(item.response, item.reference) is None):
                return self._as_cause(ANSWER_RULES[rule][0]), rule
            if rule is None:
                return None, "final_answer_agrees"
            return cause_for(
                item.response, item.reference, self.min_words, self.max_words
            ), "wrong_number, first_departure"
        return cause_for(item.response, item.reference, self.min_words, self.max_words), "first_departure"

    async def extract(self, item: ExtractionInput) -> Reply[Extraction]:
        cause, rule = self._cause(item)
        if cause is None:
            return self._reply(Extraction(None, None), rule=rule)
        own = self._cause_rules.get(cause)
        i, sim = self._nearest(cause, own, self._cause_rules, [k.description for k in item.known])
        if i >= 0 and sim >= self.theta_dup:
            return self._reply(Extraction(item.known[i].id, None), rule=rule, similarity=round(sim, 4))
        return self._reply(Extraction(None, cause), rule=rule)

    async def deduplicate(self, new_cause: str, candidates: Sequence[KnownCause]) -> Reply[Dedup]:
        own = self._cause_rules.get(new_cause)
        i, sim = self._nearest(new_cause, own, self._cause_rules, [c.description for c in candidates])
        if i >= 0 and sim >= self.theta_dup:
            return self._reply(Dedup(True, candidates[i].id), rule=own, similarity=round(sim, 4))
        return self._reply(Dedup(False, None), rule=own)

    async def assign_node(self, new_cause: str, shortlist: Sequence[NodeView]) -> Reply[Assignment]:
        label = (self._labels.get(new_cause) if self.answers else None) or node_label_for(
            new_cause, self.min_words, self.max_words
        )
        own = self._label_rules.get(label) if new_cause in self._cause_rules else None
        i, sim = self._nearest(label, own, self._label_rules, [n.label for n in shortlist])
        if i >= 0 and sim >= self.theta_merge:
            return self._reply(Assignment(False, None, shortlist[i].id), rule=own, similarity=round(sim, 4))
        return self._reply(Assignment(True, label, None), rule=own)

    async def consolidate(self, a: NodeView, b: NodeView) -> Reply[Consolidation]:
        rule = self._label_rules.get(a.label)
        if not self._same_rule(rule, self._label_rules.get(b.label)):
            return self._reply(Consolidation(False, None), rules=[rule, self._label_rules.get(b.label)])
        _, sim = self._nearest(a.label, rule, self._label_rules, [b.label])
        if sim >= self.theta_merge:
            return self._reply(Consolidation(True, a.label), rule=rule, similarity=round(sim, 4))
        return self._reply(Consolidation(False, None), rule=rule)
