"""``diagevo models mini``: the mini world's challenger/solver pair, built from a seed.

One character-level ``Qwen3ForCausalLM`` (0.8M parameters) is warmed up on both roles, so both
start from one base model as in the paper: solver steps on ``47+38=`` -> ``\\boxed{85}`` with the
skills mixed by ``world.json``'s weights (a skill seen rarely stays weak: that is what sets the
per-skill accuracies the memory has to find), and every ``chal_every``-th step a challenger step
on ``@<cause>:`` -> ``<question>...</question>`` (a cause's text -> a question of its skill; ``@:``
-> a question of any skill). The step count is fixed: the weak skills close their gap if training
runs on, so a wall-clock budget would not give the same pair twice. Held-out questions come from
each skill's held-out split and never occur in the warm-up; the mix is chosen by each skill's
validation split (recorded in ``mini.json``), never by the held-out one.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.equivalence import agrees
from diagevo.curriculum.prompts import parse_question
from diagevo.errors import require_use
from diagevo.files.written import refuse_filled
from diagevo.model_dirs import MINI_RECORD
from diagevo.runtime.progress import ProgressFn, no_progress, quiet_libraries
from diagevo.train.hf import warm
from diagevo.train.mini import world as w
from diagevo.train.mini.kernels import KERNELS, pin_kernels
from diagevo.train.mini.tokenizer import EOS, build_tokenizer, challenger_prompt


@dataclass(frozen=True)
class MiniSpec:
    """The pair's size and warm-up (defaults: the feasibility note's 0.79M model and ~1,300 solver steps)."""

    skills: tuple[str, ...] = ("add_nc", "add_c", "sub_nb", "sub_b", "mul", "mod")
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    positions: int = 128
    steps: int = 1600  # 1,200 solver steps, 400 challenger steps
    batch: int = 128
    chal_every: int = 4
    chal_batch: int = 32
    lr: float = 1e-3
    warmup: int = 100
    heldout: int = 100
    validation: int = 100  # questions per skill the warm-up mix is chosen by
    seed: int = 0
    threads: int = 1
    probes: int = 24  # challenger samples per cause (and per skill, free) when measuring targeting
    mix: tuple[tuple[str, float], ...] = ()  # (skill, weight) in place of world.json's warm-up weight
    device: str = "cpu"  # where the warm-up runs (cuda on a GPU machine: the pair is built there, not carried)
    kernels: str = "avx2"  # on a CPU: the same vector kernels on any x86 processor (kernels.py), or "native"

    def __post_init__(self) -> None:
        known = w.world().skills
        bad = [s for s in self.skills if s not in known]
        if bad or not self.skills:
            raise ValueError(f"skills must be some of {sorted(known)}, not {list(self.skills)}")
        if not (self.device == "cpu" or self.device == "cuda" or self.device.startswith("cuda:")):
            raise ValueError(f"the device is cpu, cuda or cuda:N, not {self.device!r}")
        if self.kernels not in KERNELS:
            raise ValueError(f"kernels are {' or '.join(KERNELS)}, not {self.kernels!r}")
        for skill, weight in self.mix:
            if skill not in self.skills or not weight > 0:
                raise ValueError(
                    f"a mix weight is SKILL=W, W > 0, SKILL one of {list(self.skills)}, not {skill}={weight}"
                )

    def weights(self) -> list[float]:
        """Each skill's warm-up weight: the mix given, else world.json's."""
        given = dict(self.mix)
        return [given.get(s, w.world().skills[s][1]) for s in self.skills]


@dataclass
class MiniReport:
    """What a build measured: parameters, seconds, held-out and validation accuracy per skill, targeting."""

    parameters: int
    seconds: float
    accuracy: dict[str, float]  # held-out
    validation_accuracy: dict[str, float] = field(default_factory=dict)
    targeted_share: dict[str, float] = field(default_factory=dict)  # cause -> share of its skill
    free_share: dict[str, float] = field(default_factory=dict)  # skill -> share among free questions
    valid: float = 0.0  # share of challenger samples that parse as a question of the world
    kernels: str = ""  # the vector kernels torch ran the warm-up on (AVX2, AVX512), or the device


def _solver_rows(
    rng: random.Random, pools: dict[str, list[str]], weights: list[float], n: int
) -> list[tuple[str, str]]:
    skills = rng.choices(list(pools), weights=weights, k=n)
    return [(q, f"\\boxed{{{w.answer(q)}}}") for q in (rng.choice(pools[s]) for s in skills)]


def _challenger_rows(rng: random.Random, pools: dict[str, list[str]], n: int) -> list[tuple[str, str]]:
    causes = [c for c in w.world().causes.values() if c.skill in pools]
    rows = []
    for _ in range(n):
        cause = rng.choice([None, *causes]) if rng.random() > 1 / 3 else None
        skill = cause.skill if cause else rng.choice(list(pools))
        rows.append(
            (challenger_prompt(cause.text if cause else None), f"<question>{rng.choice(pools[skill])}</question>")
        )
    return rows


def sample(model: Any, tok: Any, prompts: list[str], max_new: int, temperature: float = 0.0) -> list[str]:
    """Completions of raw (already templated) prompts, 128 at a time; greedy at temperature 0
    (``generate`` runs without gradients)."""
    out: list[str] = []
    for i in range(0, len(prompts), 128):
        enc = tok(prompts[i : i + 128], return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        gen = model.generate(
            **enc,
            max_new_tokens=max_new,
            do_sample=temperature > 0,
            temperature=temperature or None,
            top_p=None,
            top_k=None,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
        out += tok.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return out


def _graded(questions: dict[str, list[str]]) -> list[dict[str, str]]:
    """Skill -> questions as (question, answer, skill) rows."""
    return [{"question": q, "answer": w.answer(q), "skill": s} for s, qs in questions.items() for q in qs]


def _accuracy(model: Any, tok: Any, rows: list[dict[str, str]]) -> dict[str, float]:
    """Greedy accuracy per skill of (question, answer, skill) rows."""
    outs = sample(model, tok, [r["question"] for r in rows], 8)
    right: dict[str, list[bool]] = {}
    for r, o in zip(rows, outs, strict=True):
        right.setdefault(r["skill"], []).append(agrees(extract_answer(o), r["answer"]))
    return {s: sum(r) / len(r) for s, r in right.items()}


def measure(
    model: Any,
    tok: Any,
    heldout: list[dict[str, str]],
    validation: list[dict[str, str]],
    skills: tuple[str, ...],
    probes: int,
) -> MiniReport:
    """Greedy held-out (and validation) accuracy per skill, and the challenger's targeting: for
    each cause the share of its sampled questions that exercise its skill, beside each skill's
    share of free ones."""
    causes = [c for c in w.world().causes.values() if c.skill in skills]
    prompts = [challenger_prompt(c.text) for c in causes for _ in range(probes)]
    prompts += [challenger_prompt(None)] * (probes * len(skills))
    got = [w.skill_of(parse_question(o) or "") for o in sample(model, tok, prompts, 24, temperature=1.0)]
    targeted = {
        c.key: sum(s == c.skill for s in got[i * probes : (i + 1) * probes]) / probes for i, c in enumerate(causes)
    }
    free = Counter(got[len(causes) * probes :])
    return MiniReport(
        parameters=sum(p.numel() for p in model.parameters()),
        seconds=0.0,
        accuracy=_accuracy(model, tok, heldout),
        validation_accuracy=_accuracy(model, tok, validation),
        targeted_share=targeted,
        free_share={s: free[s] / (probes * len(skills)) for s in skills},
        valid=sum(g is not None for g in got) / len(got),
    )


def build_mini(out: Path, spec: MiniSpec = MiniSpec(), progress: ProgressFn = no_progress) -> MiniReport:
    """Write ``out/challenger`` and ``out/solver`` (the same warmed-up weights), ``out/heldout.jsonl``
    (question, answer, skill) and ``out/mini.json`` (the spec, the warm-up mix, the validation
    questions and what was measured)."""
    require_use("models tiny and the mini world's models", "building the mini models")
    import torch

    quiet_libraries()
    out = Path(out)
    refuse_filled(out)
    kernels = pin_kernels(torch, spec.kernels) if spec.device == "cpu" else spec.device  # before any operation
    started = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(spec.threads)  # one thread: with the other core busy, two were 8x slower
    try:
        splits = {s: w.split(s, spec.heldout, spec.seed, spec.validation) for s in spec.skills}
        pools = {s: part.warmup for s, part in splits.items()}
        validation = {s: part.validation for s, part in splits.items()}
        heldout = _graded({s: part.heldout for s, part in splits.items()})
        tok = build_tokenizer()
        model = warm.new_model(
            tok,
            spec.seed,
            hidden=spec.hidden,
            layers=spec.layers,
            heads=spec.heads,
            kv_heads=spec.kv_heads,
            positions=spec.positions,
        ).to(spec.device)
        rng = random.Random(spec.seed)
        weights = spec.weights()

        def batch(step: int) -> dict[str, Any]:
            """A fresh batch from the pools every step; the loss on the completion and the end token."""
            if spec.chal_every and step % spec.chal_every == spec.chal_every - 1:
                rows = _challenger_rows(rng, pools, spec.chal_batch)
            else:
                rows = _solver_rows(rng, pools, weights, spec.batch)
            ps = tok([p for p, _ in rows], add_special_tokens=False)["input_ids"]
            cs = tok([c + EOS for _, c in rows], add_special_tokens=False)["input_ids"]
            return warm.pad_batch(list(zip(ps, cs, strict=True)), tok.pad_token_id)

        warm.fit(
            model,
            batch,
            spec.steps,
            lr=spec.lr,
            schedule=lambda s: (  # linear warm-up, then cosine decay
                (s + 1) / spec.warmup
                if s < spec.warmup
                else 0.5 * (1 + math.cos(math.pi * (s - spec.warmup) / max(1, spec.steps - spec.warmup)))
            ),
            betas=(0.9, 0.98),
            weight_decay=0.1,
            tick=lambda d, n: progress("warm-up", d, n),
        )
        report = measure(model, tok, heldout, _graded(validation), spec.skills, spec.probes)
        report.seconds = round(time.perf_counter() - started, 1)
        report.kernels = kernels
        mix = dict(zip(pools, weights, strict=True))
        record = json.dumps(
            {"spec": asdict(spec), "mix": mix, "measured": asdict(report), "validation": validation}, indent=1
        )
        warm.write_pair(out, model, tok, heldout, (MINI_RECORD, record))
    finally:
        torch.set_num_threads(threads)
    return report
