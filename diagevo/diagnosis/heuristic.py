"""An offline heuristic diagnostician for the ``hf`` backend when no LLM endpoint is configured.

It is a heuristic, not a model: Prompt 1 is answered by finding the first step where the failed
response departs from the reference (the construction response that agrees with the
pseudo-label) and wording that departure as a cause; Prompts 2-4 are answered by embedding
similarity against the calibrated thresholds (θ_dup for causes, θ_merge for nodes). It lets the
whole loop run on a CPU offline; configure ``diagnosis.llm_url`` for real diagnoses.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

import numpy as np

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
_STEP_SPLIT = re.compile(r"\n+|(?=Step \d+:)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_OPERATIONS = (
    ("remainder", "remainder of a division"),
    ("divided", "division"),
    ("*", "multiplication"),
    ("times", "multiplication"),
    ("multiply", "multiplication"),
    ("-", "subtraction"),
    ("subtract", "subtraction"),
    ("+", "addition"),
    ("add", "addition"),
    ("boxed", "final answer"),
)


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
        words = f"Stops before finishing the {op} step that the correct solution still needs to complete".split()
    elif _NUMBER.sub("#", got) == _NUMBER.sub("#", want):
        words = f"Computes the {op} step with the right method but gets the wrong numerical result".split()
    else:
        words = f"Departs from the correct method at the {op} step and writes a different calculation".split()
    filler = "while the rest of the solution follows the same steps".split()
    return _fit(words, min_words, max_words, filler)


def node_label_for(cause: str, min_words: int = 10, max_words: int = 20) -> str:
    op = next((name for _, name in _OPERATIONS if name in cause), "reasoning")
    words = f"Carrying out {op} steps correctly within multi-step arithmetic word problems".split()
    return _fit(words, min_words, max_words, "and checking each intermediate result".split())


class HeuristicDiagnostician:
    """Implements :class:`~diagevo.diagnosis.interface.Diagnostician` without a language model."""

    model_name = MODEL

    def __init__(self, embedder: Embedder, theta_dup: float, theta_merge: float, min_words: int = 10, max_words: int = 20) -> None:
        self.embedder = embedder
        self.theta_dup, self.theta_merge = theta_dup, theta_merge
        self.min_words, self.max_words = min_words, max_words

    def _best(self, text: str, others: Sequence[str]) -> tuple[int, float]:
        if not others:
            return -1, -1.0
        v = self.embedder.embed([text, *others])
        sims = v[1:] @ v[0]
        i = int(np.argmax(sims))
        return i, float(sims[i])

    @staticmethod
    def _reply(value: object, started: float) -> Reply:
        return Reply(value=value, raw="", model=MODEL, latency_s=time.perf_counter() - started)

    async def extract(self, item: ExtractionInput) -> Reply[Extraction]:
        started = time.perf_counter()
        cause = cause_for(item.response, item.reference, self.min_words, self.max_words)
        if cause is None:
            return self._reply(Extraction(None, None), started)
        i, sim = self._best(cause, [k.description for k in item.known])
        if i >= 0 and sim >= self.theta_dup:
            return self._reply(Extraction(item.known[i].id, None), started)
        return self._reply(Extraction(None, cause), started)

    async def deduplicate(self, new_cause: str, candidates: Sequence[KnownCause]) -> Reply[Dedup]:
        started = time.perf_counter()
        i, sim = self._best(new_cause, [c.description for c in candidates])
        if i >= 0 and sim >= self.theta_dup:
            return self._reply(Dedup(True, candidates[i].id), started)
        return self._reply(Dedup(False, None), started)

    async def assign_node(self, new_cause: str, shortlist: Sequence[NodeView]) -> Reply[Assignment]:
        started = time.perf_counter()
        label = node_label_for(new_cause, self.min_words, self.max_words)
        i, sim = self._best(label, [n.label for n in shortlist])
        if i >= 0 and sim >= self.theta_merge:
            return self._reply(Assignment(False, None, shortlist[i].id), started)
        return self._reply(Assignment(True, label, None), started)

    async def consolidate(self, a: NodeView, b: NodeView) -> Reply[Consolidation]:
        started = time.perf_counter()
        _, sim = self._best(a.label, [b.label])
        if sim >= self.theta_merge:
            return self._reply(Consolidation(True, a.label), started)
        return self._reply(Consolidation(False, None), started)
