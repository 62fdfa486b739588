"""The simulated diagnostician: Prompts 1-4 decided from the texts it is shown.

Extraction (Prompt 1) reads the two numbered trajectories, finds the first step where they
differ, and classifies it: a purely numerical difference (same wording, other numbers) is a
non-skill slip; a difference in reasoning is recognised as one family's skill step (it knows the
world's solution steps, as an LLM knows mathematics) and named with one of that family's
10-20 word paraphrases, chosen per failure, so similarity screening and deduplication have real
wording differences to handle. Supplied known causes are matched when their text describes the
same skill. Dedup (Prompt 2), node assignment (Prompt 3, by knowledge area) and consolidation
(Prompt 4) work on the cause and label texts they are given, mapped back to skills through the
paraphrase tables or, for unfamiliar text, the embedding model.

Each call errs with probability ``diagnostician_error_rate`` (a wrong skill, a slip called a
skill or the reverse, a missed match, a flipped dedup/merge, a wrong or spurious node). Each call
seeds its own RNG from a hash of its inputs, so decisions are reproducible under any concurrency.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from diagevo.diagnosis.interface import (
    Assignment,
    Consolidation,
    Dedup,
    Diagnostician,
    Embedder,
    Extraction,
    ExtractionInput,
    KnownCause,
    NodeView,
    Reply,
)
from diagevo.train.sim.families import AREAS, FAMILY_BY_NAME, Family
from diagevo.train.sim.text import signature

MODEL = "sim-diagnostician"
_STEP = re.compile(r"^Step \d+:\s*(.*)$")


def _rng(*parts: object) -> random.Random:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return random.Random(int.from_bytes(hashlib.sha256(blob).digest()[:8], "big"))


def steps_of(trajectory: str) -> list[str]:
    out = []
    for line in trajectory.splitlines():
        m = _STEP.match(line.strip())
        if m:
            out.append(m.group(1).strip())
    return out


def first_divergence(a: str, b: str) -> tuple[str, str] | None:
    """The first pair of differing steps of two trajectories (None if they never differ)."""
    sa, sb = steps_of(a), steps_of(b)
    for x, y in zip(sa, sb):
        if x != y:
            return x, y
    if len(sa) != len(sb):
        n = min(len(sa), len(sb))
        return (sa[n] if n < len(sa) else ""), (sb[n] if n < len(sb) else "")
    return None


@lru_cache(maxsize=8)
def _step_signatures(names: tuple[str, ...], seed: int) -> dict[str, str]:
    """Signatures of every skill step the families write (right and wrong paths) -> family."""
    rng = random.Random(f"sim-steps:{seed}")
    table: dict[str, str] = {}
    for name in names:
        f = FAMILY_BY_NAME[name]
        for d in range(4):
            for _ in range(60):
                inst = f.make(rng, d)
                for s in (*inst.right, *inst.wrong):
                    table.setdefault(signature(s), f.name)
    return table


def _words(s: str) -> set[str]:
    return set(re.findall(r"[a-z]+", s.lower()))


class SimDiagnostician(Diagnostician):
    model_name = MODEL

    def __init__(
        self,
        fams: Sequence[Family],
        error_rate: float,
        embedder: Callable[[], Embedder],
        seed: int = 0,
    ) -> None:
        self.fams = tuple(fams)
        self.by_name = {f.name: f for f in self.fams}
        self.error_rate = error_rate
        self._embedder = embedder
        self.seed = seed
        self.cause_table = {c: f.name for f in self.fams for c in (*f.causes, f.skill)}
        self.label_table = {lbl: a for a, labels in AREAS.items() for lbl in labels}
        self.step_table = _step_signatures(tuple(f.name for f in self.fams), seed)
        self._step_words = [(_words(s), fam) for s, fam in self.step_table.items()]
        self._text_emb: tuple[list[str], np.ndarray] | None = None

    # ------------------------------------------------------------------ reading texts

    def step_family(self, step: str) -> str | None:
        sig = signature(step)
        fam = self.step_table.get(sig)
        if fam is not None:
            return fam
        w = _words(sig)
        best, best_j = None, 0.6
        for ws, name in self._step_words:
            j = len(w & ws) / max(1, len(w | ws))
            if j > best_j:
                best, best_j = name, j
        return best

    def cause_family(self, text: str) -> str:
        fam = self.cause_table.get(text.strip())
        if fam is not None:
            return fam
        if self._text_emb is None:
            texts = list(self.cause_table)
            self._text_emb = (texts, self._embedder().embed(texts))
        texts, mat = self._text_emb
        v = self._embedder().embed([text])[0]
        return self.cause_table[texts[int(np.argmax(mat @ v))]]

    def node_area(self, node: NodeView) -> str:
        """The knowledge area most of a node's causes belong to (its label when it has none)."""
        if node.causes:
            votes = Counter(self.by_name[self.cause_family(c)].area for c in node.causes)
            return votes.most_common(1)[0][0]
        area = self.label_table.get(node.label.strip())
        if area is not None:
            return area
        return self.by_name[self.cause_family(node.label)].area

    # ------------------------------------------------------------------ Prompt 1

    async def extract(self, item: ExtractionInput) -> Reply[Extraction]:
        rng = _rng("extract", self.seed, item.question, item.response, item.reference, [k.id for k in item.known])
        div = first_divergence(item.response, item.reference)
        fam: str | None = None
        if div is not None and signature(div[0]) != signature(div[1]):
            fam = self.step_family(div[0]) or self.step_family(div[1])
        known = [(k, self.cause_family(k.description)) for k in item.known]
        skip_match = False
        if rng.random() < self.error_rate:
            kind = rng.choice(("wrong_skill", "flip_slip", "miss_match"))
            if kind == "wrong_skill" and fam is not None:
                area = self.by_name[fam].area
                pool = [f.name for f in self.fams if f.area == area and f.name != fam] or [
                    f.name for f in self.fams if f.name != fam
                ]
                fam = rng.choice(pool) if pool else fam
            elif kind == "flip_slip":
                fam = None if fam is not None else rng.choice(self.fams).name
            else:
                skip_match = True
        value = Extraction(None, None)
        if fam is not None:
            match = next((k for k, kf in known if kf == fam), None)
            if match is not None and not skip_match:
                value = Extraction(match.id, None)
            else:
                value = Extraction(None, rng.choice(self.by_name[fam].causes))
        raw = json.dumps({"matched_cause_id": value.matched_cause_id, "error_cause": value.error_cause})
        return Reply(value=value, raw=raw, model=MODEL)

    # ------------------------------------------------------------------ Prompt 2

    async def deduplicate(self, new_cause: str, candidates: Sequence[KnownCause]) -> Reply[Dedup]:
        rng = _rng("dedup", self.seed, new_cause, [(c.id, c.description) for c in candidates])
        fam = self.cause_family(new_cause)
        match = next((c for c in candidates if self.cause_family(c.description) == fam), None)
        if rng.random() < self.error_rate and candidates:
            match = None if match is not None else rng.choice(list(candidates))
        value = Dedup(True, match.id) if match is not None else Dedup(False, None)
        raw = json.dumps({"duplicate": value.duplicate, "matched_cause_id": value.matched_cause_id})
        return Reply(value=value, raw=raw, model=MODEL)

    # ------------------------------------------------------------------ Prompt 3

    async def assign_node(self, new_cause: str, shortlist: Sequence[NodeView]) -> Reply[Assignment]:
        rng = _rng("assign", self.seed, new_cause, [(n.id, n.label, n.causes) for n in shortlist])
        area = self.by_name[self.cause_family(new_cause)].area
        target = next((n for n in shortlist if self.node_area(n) == area), None)
        if rng.random() < self.error_rate:
            if target is not None:
                target = None  # a spurious new node for an existing area; consolidation repairs it
            elif shortlist:
                target = rng.choice(list(shortlist))
        if target is not None:
            value = Assignment(False, None, target.id)
        else:
            value = Assignment(True, rng.choice(AREAS[area]), None)
        raw = json.dumps(
            {"create_new_node": value.create_new_node, "new_node_label": value.new_node_label, "assigned_node": value.assigned_node}
        )
        return Reply(value=value, raw=raw, model=MODEL)

    # ------------------------------------------------------------------ Prompt 4

    async def consolidate(self, a: NodeView, b: NodeView) -> Reply[Consolidation]:
        rng = _rng("consolidate", self.seed, a.id, a.label, a.causes, b.id, b.label, b.causes)
        area_a, area_b = self.node_area(a), self.node_area(b)
        merge = area_a == area_b
        if rng.random() < self.error_rate:
            merge = not merge
        label = (rng.choice(AREAS[area_a]) if area_a == area_b else a.label) if merge else None
        value = Consolidation(merge, label)
        raw = json.dumps({"merge": value.merge, "merged_label": value.merged_label})
        return Reply(value=value, raw=raw, model=MODEL)
