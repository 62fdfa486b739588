"""The simulated diagnostician: Prompts 1-4 decided from the texts it is shown.

Extraction (Prompt 1) reads the two numbered trajectories, finds the first step where they
differ, and classifies it: a purely numerical difference (same wording, other numbers) is a
non-skill slip; a difference in reasoning is recognised as one trap variant's step (it knows the
world's solution steps, as an LLM knows mathematics) and named with one of that variant's
10-20 word paraphrases, chosen per failure, so similarity screening and deduplication have real
wording differences to handle (sibling variants of one family read alike but are different
causes). Supplied known causes are matched when their text describes the same mechanism (the same
variant). Dedup (Prompt 2) confirms a duplicate only for the same variant, and the more readily the
closer the two wordings are (so a mechanism can end up with a few differently worded causes, as
in a real memory); node assignment
(Prompt 3) and consolidation (Prompt 4) work at the level of skills (families): a new cause goes
to a node of its family -- the more readily the closer it reads to the node's representative
cause, so a skill is sometimes opened a second node under another label wording --, and
consolidation merges two nodes of one family. Texts are mapped back to
variants through the paraphrase tables or, for unfamiliar text, the embedding model.

Each call errs with probability ``diagnostician_error_rate`` (a sibling or other wrong variant, a
slip called a skill or the reverse, a missed match, a flipped dedup/merge, a wrong or spurious
node). Each call
seeds its own RNG from a hash of its inputs, so decisions are reproducible under any concurrency.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import lru_cache
from typing import TypeVar

import numpy as np

from diagevo.diagnosis.heuristic import first_departure
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
from diagevo.train.sim.families import Family, catalogue, variants_of
from diagevo.train.sim.solver import sigmoid
from diagevo.train.sim.text import signature
from diagevo.train.sim.world import MAX_DIFFICULTY

MODEL = "sim-diagnostician"
_NUMBERED = re.compile(r"^Step \d+:\s*")
R = TypeVar("R", Extraction, Dedup, Assignment, Consolidation)


def _rng(*parts: object) -> random.Random:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return random.Random(int.from_bytes(hashlib.sha256(blob).digest()[:8], "big"))


def _reply(value: R) -> Reply[R]:
    """A decision as the model's reply: its fields as the JSON object the prompt asks for."""
    return Reply(value=value, raw=json.dumps(asdict(value)), model=MODEL)


def first_divergence(a: str, b: str) -> tuple[str, str] | None:
    """The first pair of differing steps of two trajectories, each without its ``Step n:`` (None if
    they never differ)."""
    found = first_departure(a, b)
    return None if found is None else (_NUMBERED.sub("", found[1]), _NUMBERED.sub("", found[2]))


@lru_cache(maxsize=8)
def _step_signatures(keys: tuple[str, ...], seed: int) -> dict[str, str]:
    """Signatures of the steps where each variant's right and wrong paths diverge -> variant key
    (the steps after the divergence are not needed, and some read alike across variants)."""
    rng = random.Random(f"sim-steps:{seed}")
    table: dict[str, str] = {}
    for key in keys:
        v = catalogue().variant_by_key[key]
        for d in range(MAX_DIFFICULTY + 1):
            for _ in range(40):
                inst = v.make(rng, d)
                for s in (inst.right[0], inst.wrong[0]):
                    table.setdefault(signature(s), key)
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
        dedup_mid: float = 0.5,
        dedup_width: float = 0.05,
        assign_mid: float = -1.0,
    ) -> None:
        self.fams = tuple(fams)
        self.by_name = {f.name: f for f in self.fams}
        self.variants = variants_of(self.fams)
        self.by_key = {v.key: v for v in self.variants}
        self.error_rate = error_rate
        self._embedder = embedder
        self.seed = seed
        self.dedup_mid = dedup_mid
        self.dedup_width = dedup_width
        self.assign_mid = assign_mid
        self.cause_table = {c: v.key for v in self.variants for c in (*v.causes, v.skill)}
        self.label_table = {lbl: f.name for f in self.fams for lbl in (*f.labels, f.skill)}
        self.step_table = _step_signatures(tuple(v.key for v in self.variants), seed)
        self._step_words = [(_words(s), key) for s, key in self.step_table.items()]
        self._embedded: dict[int, tuple[dict[str, int], np.ndarray]] = {}  # id(table) -> its texts' rows

    # ------------------------------------------------------------------ reading texts

    def step_variant(self, step: str) -> str | None:
        sig = signature(step)
        key = self.step_table.get(sig)
        if key is not None:
            return key
        w = _words(sig)
        best, best_j = None, 0.6
        for ws, name in self._step_words:
            j = len(w & ws) / max(1, len(w | ws))
            if j > best_j:
                best, best_j = name, j
        return best

    def _rows(self, table: dict[str, str]) -> tuple[dict[str, int], np.ndarray]:
        """The texts of ``table`` embedded once: text -> row, and the rows."""
        if id(table) not in self._embedded:
            texts = list(table)
            self._embedded[id(table)] = ({t: i for i, t in enumerate(texts)}, self._embedder().embed(texts))
        return self._embedded[id(table)]

    def _vec(self, text: str) -> np.ndarray:
        rows, mat = self._rows(self.cause_table)
        i = rows.get(text.strip())
        return mat[i] if i is not None else self._embedder().embed([text])[0]

    def _read(self, table: dict[str, str], text: str) -> str:
        """``table``'s value for ``text``, or for the table's text that reads most like it."""
        hit = table.get(text.strip())
        if hit is not None:
            return hit
        rows, mat = self._rows(table)
        return table[list(rows)[int(np.argmax(mat @ self._embedder().embed([text])[0]))]]

    def cause_variant(self, text: str) -> str:
        return self._read(self.cause_table, text)

    def same_cause(self, a: str, b: str, rng: random.Random) -> bool:
        """Prompt 2's judgement on one pair: the same mechanism (variant) is confirmed the more
        readily the closer the two wordings are, ``sigmoid((cos - dedup_mid) / dedup_width)``, as
        an LLM judge keeps differently emphasised phrasings of one mechanism apart now and then;
        different mechanisms are never confirmed (except through ``error_rate``)."""
        if a.strip() == b.strip():
            return True
        if self.cause_variant(a) != self.cause_variant(b):
            return False
        cos = float(self._vec(a) @ self._vec(b))
        return rng.random() < sigmoid((cos - self.dedup_mid) / self.dedup_width)

    def cause_family(self, text: str) -> str:
        return self.by_key[self.cause_variant(text)].family

    def node_family(self, node: NodeView) -> str:
        """The skill (family) most of a node's causes belong to (its label when it has none)."""
        if node.causes:
            votes = Counter(self.cause_family(c) for c in node.causes)
            return votes.most_common(1)[0][0]
        return self._read(self.label_table, node.label)

    def _wrong_variant(self, key: str, rng: random.Random) -> str:
        """A plausible misreading: usually a sibling mechanism of the same skill, else a skill of
        the same knowledge area."""
        fam = self.by_key[key].family
        siblings = [v.key for v in self.by_name[fam].variants if v.key != key]
        area = self.by_name[fam].area
        near = [v.key for v in self.variants if v.family != fam and self.by_name[v.family].area == area]
        pool = siblings if siblings and (not near or rng.random() < 0.7) else near
        pool = pool or [v.key for v in self.variants if v.key != key]
        return rng.choice(pool) if pool else key

    # ------------------------------------------------------------------ Prompt 1

    async def extract(self, item: ExtractionInput) -> Reply[Extraction]:
        rng = _rng("extract", self.seed, item.question, item.response, item.reference, [k.id for k in item.known])
        div = first_divergence(item.response, item.reference)
        key: str | None = None
        if div is not None and signature(div[0]) != signature(div[1]):
            key = self.step_variant(div[0]) or self.step_variant(div[1])
        known = [(k, self.cause_variant(k.description)) for k in item.known]
        skip_match = False
        if rng.random() < self.error_rate:
            kind = rng.choice(("wrong_skill", "flip_slip", "miss_match"))
            if kind == "wrong_skill" and key is not None:
                key = self._wrong_variant(key, rng)
            elif kind == "flip_slip":
                key = None if key is not None else rng.choice(self.variants).key
            else:
                skip_match = True
        value = Extraction(None, None)
        if key is not None:
            match = next((k for k, kv in known if kv == key), None)
            if match is not None and not skip_match:
                value = Extraction(match.id, None)
            else:
                value = Extraction(None, rng.choice(self.by_key[key].causes))
        return _reply(value)

    # ------------------------------------------------------------------ Prompt 2

    async def deduplicate(self, new_cause: str, candidates: Sequence[KnownCause]) -> Reply[Dedup]:
        rng = _rng("dedup", self.seed, new_cause, [(c.id, c.description) for c in candidates])
        match = next((c for c in candidates if self.same_cause(new_cause, c.description, rng)), None)
        if rng.random() < self.error_rate and candidates:
            match = None if match is not None else rng.choice(list(candidates))
        value = Dedup(True, match.id) if match is not None else Dedup(False, None)
        return _reply(value)

    # ------------------------------------------------------------------ Prompt 3

    async def assign_node(self, new_cause: str, shortlist: Sequence[NodeView]) -> Reply[Assignment]:
        rng = _rng("assign", self.seed, new_cause, [(n.id, n.label, n.causes) for n in shortlist])
        fam = self.cause_family(new_cause)
        target = next((n for n in shortlist if self.node_family(n) == fam), None)
        if target is not None and target.causes and self.assign_mid > -1.0:
            # Prompt 3 shows one representative cause per node: a different mechanism of the same
            # skill is recognised as belonging there the more readily the closer it reads
            cos = float(self._vec(new_cause) @ self._vec(target.representative))
            if rng.random() >= sigmoid((cos - self.assign_mid) / self.dedup_width):
                target = None  # a second node for the skill, under another label; Prompt 4 merges them
        if rng.random() < self.error_rate:
            if target is not None:
                target = None  # a spurious new node for an existing skill; consolidation repairs it
            elif shortlist:
                target = rng.choice(list(shortlist))
        if target is not None:
            value = Assignment(False, None, target.id)
        else:
            value = Assignment(True, rng.choice(self.by_name[fam].labels), None)
        return _reply(value)

    # ------------------------------------------------------------------ Prompt 4

    async def consolidate(self, a: NodeView, b: NodeView) -> Reply[Consolidation]:
        rng = _rng("consolidate", self.seed, a.id, a.label, a.causes, b.id, b.label, b.causes)
        fam_a, fam_b = self.node_family(a), self.node_family(b)
        merge = fam_a == fam_b
        if rng.random() < self.error_rate:
            merge = not merge
        label = (rng.choice(self.by_name[fam_a].labels) if fam_a == fam_b else a.label) if merge else None
        value = Consolidation(merge, label)
        return _reply(value)
