"""The simulated solver: per-sub-skill competences learned by group-normalised policy gradient.

Every trap variant of every family is a sub-skill with its own competence logit. A response to a
question applies each needed sub-skill correctly with probability
``sigmoid(theta[variant] + ctx[variant, template, difficulty] - difficulty_slope * difficulty)``;
a misapplied sub-skill takes that variant's wrong path and lands on its trap or, with
``sim.wrong_answer_spread``, on one of two near misses, with weights that belong to the variant.
Practice on a variant trains that variant; a share ``sibling_transfer`` of each update also reaches
the other variants of the same family (practising one way of checking roots helps a little with
the others). Independently it may slip
(``slip_base``, plus attention slips that grow with length and distractors when cheap difficulty
is on, reduced by the learned ``care``); a slip changes the final number, to the question's
shared misreading with a probability that grows with length when label noise is on.

Learning is REINFORCE on these Bernoulli choices with GRPO advantages: every response's reward
comes from the loop (agreement with the pseudo-label), never from the truth. Each choice's
score-function gradient ``(outcome - p)`` times the response's group-normalised advantage is
averaged over the step's responses (Table 7/8: one update per GRPO step).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from diagevo.train.sim.config import SimConfig
from diagevo.train.sim.families import Family, variants_of
from diagevo.train.sim.world import WRONG_VALUES, SimQuestion

_OFFSETS = (-3, -2, -1, 1, 2, 3, 4, 5, 6, 9)
REF_WORDS = 46  # length of an unpadded round-1 question (Figure 4a), the slip rate without (a)


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: tuple[bool, ...]  # per part: skill applied correctly
    attention: bool | None  # attention slip drawn (None: not drawn, a base slip happened)
    slipped: bool
    value: Fraction


@dataclass(slots=True)
class _Grad:
    theta: np.ndarray
    ctx: dict[tuple[int, int, int], float]
    care: float = 0.0
    count: int = 0


class Solver:
    def __init__(self, fams: Sequence[Family], sim: SimConfig) -> None:
        self.params = params = sim.params
        self.sim = sim
        self.variants = variants_of(tuple(fams))
        self.index = {v.key: i for i, v in enumerate(self.variants)}
        fam_index = {f.name: i for i, f in enumerate(fams)}
        self.family_of = np.array([fam_index[v.family] for v in self.variants], dtype=int)
        # siblings[i, j] = 1 when variants i != j belong to the same family
        same = self.family_of[:, None] == self.family_of[None, :]
        self.siblings = (same & ~np.eye(len(self.variants), dtype=bool)).astype(float)
        # family competences spread evenly over [lo, hi], assigned to families by the world seed;
        # the variants of a family scatter around it by up to +-variant_logit_spread (mean kept)
        gen = np.random.default_rng(params.world_seed)
        spread = np.linspace(params.skill_logit_lo, params.skill_logit_hi, len(fams))
        gen.shuffle(spread)
        offsets = gen.uniform(-params.variant_logit_spread, params.variant_logit_spread, len(self.variants))
        for f in range(len(fams)):
            members = self.family_of == f
            offsets[members] -= offsets[members].mean()
        self.theta0 = (spread[self.family_of] + offsets).astype(float)
        self.theta = self.theta0.copy()
        # wrong-answer spread: per sub-skill, the cumulative weights of its WRONG_VALUES wrong values
        # (the trap's share drawn in [trap_share_lo, trap_share_hi], the rest halving), from their
        # own stream so theta0 is the same with the switch on or off
        share = np.random.default_rng([params.world_seed, 1]).uniform(
            params.trap_share_lo, params.trap_share_hi, len(self.variants)
        )
        rest = np.array([0.5**i for i in range(WRONG_VALUES - 1)])
        rest = rest / rest.sum()
        self.wrong_cum = [np.cumsum([s, *((1.0 - s) * rest)]).tolist() for s in share]
        self.ctx: dict[tuple[int, int, int], float] = {}
        self.care = 0.0

    # ------------------------------------------------------------------ probabilities

    def _key(self, q: SimQuestion, j: int) -> tuple[int, int, int]:
        part = q.parts[j]
        return (self.index[part.skill], part.template, q.spec.difficulty)

    def p_skill(self, q: SimQuestion, j: int) -> float:
        key = self._key(q, j)
        z = self.theta[key[0]] + self.ctx.get(key, 0.0) - self.params.difficulty_slope * q.spec.difficulty
        return sigmoid(z)

    def p_attention(self, q: SimQuestion) -> float:
        p = self.params
        if self.sim.cheap_difficulty:
            load = p.attention_per_100_words * q.words / 100 + p.attention_per_distractor * q.spec.distract
        else:
            load = p.attention_per_100_words * REF_WORDS / 100
        return sigmoid(p.attention_bias + load - self.care)

    def p_shared(self, q: SimQuestion) -> float:
        if not self.sim.label_noise:
            return 0.0
        p = self.params
        return sigmoid(
            p.shared_bias + p.shared_per_100_words * q.words / 100 + p.shared_per_distractor * q.spec.distract
        )

    # ------------------------------------------------------------------ acting

    def outcomes(self, q: SimQuestion, n: int, rng: random.Random) -> list[Outcome]:
        ps = [self.p_skill(q, j) for j in range(len(q.parts))]
        p_att, p_sh, base = self.p_attention(q), self.p_shared(q), self.params.slip_base
        out = []
        spread = self.sim.wrong_answer_spread and bool(q.wrong)
        cums = [self.wrong_cum[self.index[part.skill]] for part in q.parts] if spread else []
        for _ in range(n):
            ok = tuple(rng.random() < p for p in ps)
            value = q.values[ok]
            if spread:
                for j, good in enumerate(ok):
                    if not good:
                        u = rng.random()
                        k = next((i for i, c in enumerate(cums[j]) if u < c), len(cums[j]) - 1)
                        if k:  # a near miss instead of the trap
                            value = value + q.coef[j] * (q.wrong[j][min(k, len(q.wrong[j]) - 1)] - q.wrong[j][0])
            if rng.random() < base:
                attention, slipped = None, True
            else:
                attention = rng.random() < p_att
                slipped = attention
            if slipped:
                if rng.random() < p_sh:
                    value = value + (q.misread - q.answer)
                else:
                    value = value + rng.choice(_OFFSETS)
            out.append(Outcome(ok, attention, slipped, value))
        return out

    # ------------------------------------------------------------------ learning

    def new_grad(self) -> _Grad:
        return _Grad(np.zeros_like(self.theta), {})

    def accumulate(self, g: _Grad, q: SimQuestion, outs: Sequence[Outcome], advantages: Sequence[float]) -> None:
        ps = [self.p_skill(q, j) for j in range(len(q.parts))]
        keys = [self._key(q, j) for j in range(len(q.parts))]
        p_att = self.p_attention(q)
        share = 1.0 if self.sim.transfer else self.params.transfer_off_share
        for o, adv in zip(outs, advantages, strict=True):
            g.count += 1
            if adv == 0.0:
                continue
            for ok, p, key in zip(o.ok, ps, keys, strict=True):
                score = adv * ((1.0 if ok else 0.0) - p)
                g.theta[key[0]] += share * score
                if share < 1.0:
                    g.ctx[key] = g.ctx.get(key, 0.0) + (1.0 - share) * score
            if o.attention is not None:
                # log-prob of the attention draw w.r.t. care: z = ... - care
                g.care -= adv * ((1.0 if o.attention else 0.0) - p_att)

    def apply(self, g: _Grad) -> None:
        if not g.count:
            return
        lr = self.params.solver_lr / g.count
        self.theta += lr * (g.theta + self.params.sibling_transfer * (self.siblings @ g.theta))
        for key, v in g.ctx.items():
            self.ctx[key] = self.ctx.get(key, 0.0) + lr * v
        self.care += lr * self.params.care_lr_scale * g.care

    def drift(self, practice: Sequence[int]) -> None:
        """Unpractised sub-skills fall back towards their base competence (world property d);
        ``practice`` counts applications per variant in the round's solver update."""
        if not self.sim.drift:
            return
        p = self.params
        factor = np.array([p.drift_rate * math.exp(-n / p.drift_practice_scale) for n in practice])
        self.theta -= factor * (self.theta - self.theta0)
        for key in list(self.ctx):
            self.ctx[key] *= 1.0 - factor[key[0]]

    # ------------------------------------------------------------------ state

    def state(self) -> dict:
        return {
            "theta": self.theta.tolist(),
            "theta0": self.theta0.tolist(),
            "ctx": [[*k, v] for k, v in sorted(self.ctx.items())],
            "care": self.care,
        }

    def load_state(self, data: dict) -> None:
        self.theta = np.asarray(data["theta"], dtype=float)
        self.theta0 = np.asarray(data["theta0"], dtype=float)
        self.ctx = {(int(a), int(b), int(c)): float(v) for a, b, c, v in data["ctx"]}
        self.care = float(data["care"])


def group_advantages(rewards: Sequence[float]) -> list[float]:
    """GRPO: rewards normalised within the group (zero when they are all equal)."""
    arr = np.asarray(rewards, dtype=float)
    std = float(arr.std())
    if std < 1e-8:
        return [0.0] * len(arr)
    return ((arr - arr.mean()) / std).tolist()
