"""The simulated challenger: a learned distribution over what to ask, trained by REINFORCE.

Policy heads (softmax logits): the trap variant to exercise (free exploration only), and per prompt kind
("free" or "guided" by the memory) difficulty 0-3, padding level 0-4 and distractor count 0-3.
With ``sim.composition`` on, free exploration also has a depth head: how many sub-problems
(1 to ``MAX_PARTS``, each a variant drawn from the variant head) one question chains into a
single answer, so length and compositional depth are choices the update can make (the drift to
long compound questions of Figure 4a). Guided prompts fix the content to the cause (one part,
two when stitched). The initial padding/distractor/depth logits put the mean question at about
46 words, the unguided round-1 length of Figure 4a. In targeted and stitched modes the challenger reads only the cause
text and node label: it embeds them and picks the variant whose prototype (skill description plus
the mean of the ways that mechanism is described) is most similar
(softmax over cosine similarities at ``target_temperature``, plus ``node_label_weight`` times how
much the node label reads like the variant's family), never a cause or skill id.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from diagevo.diagnosis.interface import Embedder
from diagevo.memory.sampler import GenerationRequest
from diagevo.train.sim.config import SimParams
from diagevo.train.sim.families import Family, variants_of
from diagevo.train.sim.world import MAX_DIFFICULTY, MAX_DISTRACT, MAX_PAD, MAX_PARTS, Spec

HEADS = {"difficulty": MAX_DIFFICULTY + 1, "pad": MAX_PAD + 1, "distract": MAX_DISTRACT + 1, "depth": MAX_PARTS}
_INIT = {
    "difficulty": [0.0, 0.0, 0.0, 0.0],
    "pad": [0.0, 0.3, -0.7, -2.0, -3.0],
    "distract": [0.0, -1.5, -2.5, -3.5],
    # depth - 1; see config.py ("Composition") for the source of the initial mix
    "depth": [0.0, -2.5, -4.0],
}
_CLIP = 8.0


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _draw(logits: np.ndarray, rng: random.Random) -> int:
    p = softmax(logits)
    u, acc = rng.random(), 0.0
    for i, pi in enumerate(p):
        acc += pi
        if u < acc:
            return i
    return len(p) - 1


@dataclass(frozen=True, slots=True)
class Choice:
    """What the policy sampled for one question (for the score-function gradient)."""

    kind: str  # "free" | "guided"
    skills: tuple[int, ...]  # variant head draws (free mode only; one per chained part)
    difficulty: int
    pad: int
    distract: int
    depth: int | None  # depth head draw, parts - 1 (free mode with composition only)


class Challenger:
    def __init__(
        self,
        fams: Sequence[Family],
        params: SimParams,
        embedder: Callable[[], Embedder],
        *,
        composition: bool = True,
        skewed_start: bool = False,
    ) -> None:
        self.composition = composition
        self.fams = tuple(fams)
        self.variants = variants_of(self.fams)
        fam_index = {f.name: i for i, f in enumerate(self.fams)}
        self._family_of = np.array([fam_index[v.family] for v in self.variants], dtype=int)
        self.params = params
        self._embedder = embedder
        self.skill_logits = np.zeros(len(self.variants))
        self.heads = {kind: {h: np.array(_INIT[h]) for h in HEADS} for kind in ("free", "guided")}
        if skewed_start:
            # a base model asked for a challenging question writes some kinds of problem far more
            # often than others, and easy ones more often than hard ones: the held-out set's
            # uniform mix is not where it starts (the world seed fixes which families it favours)
            fam = np.random.default_rng([params.world_seed, 2]).normal(0.0, params.start_family_spread, len(self.fams))
            self.skill_logits = fam[self._family_of].astype(float)
            tilt = -params.start_difficulty_tilt * np.arange(HEADS["difficulty"], dtype=float)
            for hs in self.heads.values():
                hs["difficulty"] = tilt.copy()

    # ------------------------------------------------------------------ reading causes

    @cached_property
    def _tables(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The challenger's picture of each sub-skill: its description together with the ways its
        failure mechanism is described (a prototype, never one exact cause text); each family's
        skill and labels."""
        emb = self._embedder()
        skills = emb.embed([v.skill for v in self.variants])
        protos = []
        for v, s in zip(self.variants, skills, strict=True):
            p = s + emb.embed(list(v.causes)).mean(axis=0)
            protos.append(p / np.linalg.norm(p))
        return np.stack(protos).astype(np.float32), [emb.embed([f.skill, *f.labels]) for f in self.fams]

    def read_cause(self, cause: str, node_label: str | None, rng: random.Random, exclude: int | None = None) -> int:
        """A variant drawn by the cosine similarity of a cause text to every variant's prototype,
        plus a small bonus for the variants of the family the node label reads like."""
        skills, labels = self._tables
        emb = self._embedder()
        scores = skills @ emb.embed([cause])[0]
        if node_label:
            v = emb.embed([node_label])[0]
            fam_sim = np.array([float((m @ v).max()) for m in labels])
            scores = scores + self.params.node_label_weight * fam_sim[self._family_of]
        scores = scores / self.params.target_temperature
        if exclude is not None and len(scores) > 1:
            scores[exclude] = -np.inf
        return _draw(scores, rng)

    # ------------------------------------------------------------------ acting

    def propose(self, req: GenerationRequest, rng: random.Random) -> tuple[Spec, Choice]:
        kind = "free" if req.mode == "free" or not req.active_text else "guided"
        idx: tuple[int, ...] = ()
        depth: int | None = None
        names: tuple[str, ...]
        if kind == "free":
            depth = _draw(self.heads["free"]["depth"], rng) if self.composition else None
            idx = tuple(_draw(self.skill_logits, rng) for _ in range(1 + (depth or 0)))
            names = tuple(self.variants[i].key for i in idx)
        else:
            a = self.read_cause(req.active_text or "", req.node_label, rng)
            names = (self.variants[a].key,)
            if req.mode == "stitched" and req.mastered_text:
                b = self.read_cause(req.mastered_text, req.node_label, rng, exclude=a)
                names = (self.variants[a].key, self.variants[b].key)
        h = self.heads[kind]
        choice = Choice(kind, idx, _draw(h["difficulty"], rng), _draw(h["pad"], rng), _draw(h["distract"], rng), depth)
        spec = Spec(names, choice.difficulty, choice.pad, choice.distract, rng.getrandbits(48))
        return spec, choice

    # ------------------------------------------------------------------ learning

    def update(self, choices: Sequence[Choice], advantages: Sequence[float]) -> None:
        """One REINFORCE step: logits += lr * mean(advantage * (onehot - softmax))."""
        if not choices:
            return
        lr = self.params.challenger_lr / len(choices)
        g_skill = np.zeros_like(self.skill_logits)
        g = {kind: {h: np.zeros(n) for h, n in HEADS.items()} for kind in self.heads}
        for c, adv in zip(choices, advantages, strict=True):
            if adv == 0.0:
                continue
            for i in c.skills:
                g_skill += adv * (np.eye(len(g_skill))[i] - softmax(self.skill_logits))
            for h, n in HEADS.items():
                if h == "depth" and c.depth is None:
                    continue
                logits = self.heads[c.kind][h]
                g[c.kind][h] += adv * (np.eye(n)[getattr(c, h)] - softmax(logits))
        self.skill_logits = np.clip(self.skill_logits + lr * g_skill, -_CLIP, _CLIP)
        for kind in self.heads:
            for h in HEADS:
                self.heads[kind][h] = np.clip(self.heads[kind][h] + lr * g[kind][h], -_CLIP, _CLIP)

    def expected(self, kind: str) -> dict[str, float]:
        """Mean difficulty, padding, distractors (and parts per free question) the policy asks for."""
        return {
            h: float(softmax(v) @ np.arange(len(v))) + (1.0 if h == "depth" else 0.0)
            for h, v in self.heads[kind].items()
            if h != "depth" or (kind == "free" and self.composition)
        }

    # ------------------------------------------------------------------ state

    def state(self) -> dict:
        return {
            "skill_logits": self.skill_logits.tolist(),
            "heads": {k: {h: v.tolist() for h, v in hs.items()} for k, hs in self.heads.items()},
        }

    def load_state(self, data: dict) -> None:
        self.skill_logits = np.asarray(data["skill_logits"], dtype=float)
        self.heads = {k: {h: np.asarray(v, dtype=float) for h, v in hs.items()} for k, hs in data["heads"].items()}
        for hs in self.heads.values():  # a checkpoint from before the depth head
            hs.setdefault("depth", np.array(_INIT["depth"]))
