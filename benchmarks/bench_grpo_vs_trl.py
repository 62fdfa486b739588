"""diagevo's hf backend against plain TRL GRPO on the mini world: does the loop's way of calling
TRL learn what TRL itself learns from the same questions, reward and settings?

Measured on the mini world (``docs/how-to/mini-world.md``; ``../shared/notes/mini-learner.md``):
one TRL ``GRPOTrainer`` run raised a pair's held-out accuracy where the loop's per-phase schedule
(a constant rate, a fresh optimizer every phase) lowered it. This script trains one pair three
ways on the same fresh training questions and compares held-out accuracy before and after:

- ``trl``: plain TRL, written as its documentation writes GRPO (one ``GRPOConfig``, one
  ``GRPOTrainer`` over all steps, a reward function returning 1 for a right answer, else 0).
  Nothing of diagevo is used there but the world's questions and answers and the prompt messages
  the solver sees (``solver_messages``; the mini tokenizer's chat template renders them).
- ``diagevo-old`` / ``diagevo-new``: ``HFBackend.train_solver`` called in ``--phases`` phases as
  the loop calls it (one phase a round, the round's seeded stream), with the same settings given
  as config keys over ``configs/mini-cpu.toml``: the loop's old schedule (constant rate, a fresh
  optimizer every phase) and the new one (linear decay over the run, one optimizer kept).

diagevo's solver reward is ±1 where TRL's documented reward is 1/0: under GRPO's group
normalisation ((r - mean) / std) the two give the same advantages (±1 = 2 x (1/0) - 1; only
TRL's 1e-4 added to the std differs), so the rewards are equivalent. The training questions come
from each skill's warm-up split (the sizes and seed ``mini.json`` records), a skill drawn uniformly
for each, so they never overlap the held-out questions. Each variant trains a fresh copy of the
pair. Held-out accuracy: greedy, and sampled (temperature 1, mean of ``--samples`` samples).
The baseline is plain TRL measured in the same run: the table ends with Δ diagevo − Δ TRL.

Run: ``.venv/bin/python benchmarks/bench_grpo_vs_trl.py --pair models/mini --steps 300
--group 16 --batch 16 --lr 1e-4 --beta 0.04 --loss-type grpo --phases 5``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from diagevo.curriculum.answers import extract_answer  # noqa: E402
from diagevo.curriculum.equivalence import agrees  # noqa: E402
from diagevo.curriculum.prompts import solver_messages  # noqa: E402
from diagevo.curriculum.reward import solver_rewards  # noqa: E402
from diagevo.rounds.state import seeded  # noqa: E402
from diagevo.train.config import load_config  # noqa: E402
from diagevo.train.hf.args import grpo_kwargs, phase_plan  # noqa: E402
from diagevo.train.mini import world  # noqa: E402
from diagevo.train.mini.build import sample  # noqa: E402

CONFIG = ROOT / "configs" / "mini-cpu.toml"
VARIANTS = {  # name -> (solver.lr_scheduler, solver.lr_span, solver.keep_optimizer)
    "diagevo-old": ("constant", "phase", False),
    "diagevo-new": ("linear", "run", True),
}
NEW_TOKENS = 8  # configs/mini-cpu.toml's solver.max_new_tokens


@dataclass(frozen=True)
class Settings:
    steps: int = 300
    group: int = 16
    batch: int = 16  # prompts per optimizer step
    lr: float = 1e-4
    beta: float = 0.04
    loss_type: str = "grpo"
    top_p: float = 1.0
    temperature: float = 1.0
    weight_decay: float = 0.0
    seed: int = 0
    phases: int = 5

    @property
    def per_phase(self) -> int:
        return self.steps // self.phases


def pair_record(pair: Path) -> dict[str, Any]:
    return json.loads((pair / "mini.json").read_text(encoding="utf-8"))


def training_questions(pair: Path, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (question, answer) pairs from the warm-up split of the pair's skills, a skill drawn
    uniformly for each: never a held-out or validation question of the pair's build."""
    import random

    spec = pair_record(pair)["spec"]
    pools = {s: world.split(s, spec["heldout"], spec["seed"], spec["validation"]).warmup for s in spec["skills"]}
    rng = random.Random(f"bench-grpo-vs-trl/{seed}")
    skills = list(pools)
    return [(q, world.answer(q)) for q in (rng.choice(pools[rng.choice(skills)]) for _ in range(n))]


def heldout(pair: Path) -> list[dict[str, str]]:
    lines = (pair / "heldout.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def accuracy(model: Any, tok: Any, rows: list[dict[str, str]], temperature: float, samples: int, seed: int) -> dict:
    """Held-out accuracy overall and per skill: greedy (temperature 0, one sample), or the mean over
    ``samples`` samples at ``temperature``; prompts rendered from the solver's messages. In eval
    mode: TRL leaves its model training with gradient checkpointing on, and ``generate`` so (no
    cache) answered 0.01 of the questions a pair answers 0.52 of."""
    import torch

    model.eval()
    torch.manual_seed(seed)
    prompts = [
        tok.apply_chat_template(solver_messages(r["question"]), tokenize=False, add_generation_prompt=True)
        for r in rows
    ]
    k = 1 if temperature == 0 else samples
    outs = sample(model, tok, prompts * k, NEW_TOKENS, temperature=temperature)
    by_skill: dict[str, list[bool]] = {}
    for j, out in enumerate(outs):
        r = rows[j % len(rows)]
        by_skill.setdefault(r["skill"], []).append(agrees(extract_answer(out), r["answer"]))
    flat = [x for v in by_skill.values() for x in v]
    return {"all": sum(flat) / len(flat), **{s: sum(v) / len(v) for s, v in by_skill.items()}}


def weights(model: Any) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# ----------------------------------------------------------------------------------- plain TRL


def trl_config(s: Settings, output_dir: str) -> dict[str, Any]:
    """``GRPOConfig``'s arguments, as TRL's documentation sets them, at the shared settings."""
    return {
        "output_dir": output_dir,
        "learning_rate": s.lr,
        "lr_scheduler_type": "linear",  # TRL's default, spelt out
        "weight_decay": s.weight_decay,
        "beta": s.beta,
        "loss_type": s.loss_type,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "num_generations": s.group,
        "per_device_train_batch_size": s.batch * s.group,  # completions: one generation batch a step
        "max_steps": s.steps,
        "max_completion_length": NEW_TOKENS,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "seed": s.seed,
        "use_cpu": True,
        "bf16": False,  # a CPU in fp32, as diagevo's hf backend trains there
        "disable_tqdm": True,
    }


def train_trl(solver: Path, questions: list[tuple[str, str]], s: Settings) -> dict[str, Any]:
    """Plain TRL GRPO on ``questions`` from the model at ``solver``: the trained model, its
    tokenizer, the learning rate TRL logged at each step and the seconds."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    answers = dict(questions)
    boxed = re.compile(r"\\boxed\{([^{}]*)\}")

    def correct(prompts: list, completions: list, **kwargs: Any) -> list[float]:
        """1 for a completion whose last boxed answer is the question's, else 0."""
        out = []
        for prompt, completion in zip(prompts, completions, strict=True):
            found = boxed.findall(completion[0]["content"])
            out.append(1.0 if found and found[-1].strip() == answers[prompt[-1]["content"]] else 0.0)
        return out

    tok = AutoTokenizer.from_pretrained(solver)
    dataset = Dataset.from_list([{"prompt": solver_messages(q)} for q, _ in questions])
    with tempfile.TemporaryDirectory(prefix="bench-trl-") as tmp:
        started = time.perf_counter()
        trainer = GRPOTrainer(
            model=str(solver),
            reward_funcs=correct,
            args=GRPOConfig(**trl_config(s, tmp)),
            train_dataset=dataset,
            processing_class=tok,
        )
        trainer.train()
        seconds = time.perf_counter() - started
    lrs = [r["learning_rate"] for r in trainer.state.log_history if "learning_rate" in r]
    return {"model": trainer.model, "tokenizer": tok, "lrs": lrs, "seconds": seconds}


# ----------------------------------------------------------------------------- diagevo's backend


def diagevo_config(pair: Path, s: Settings, variant: str) -> Any:
    """configs/mini-cpu.toml with the pair's models, ``s`` as config keys, one round a phase."""
    scheduler, span, keep = VARIANTS[variant]
    return load_config(
        CONFIG,
        [
            f'solver.model="{pair / "solver"}"',
            f'challenger.model="{pair / "challenger"}"',
            f"train.seed={s.seed}",
            f"train.rounds={s.phases}",  # a run-long schedule spans rounds x max_steps = the steps
            f"solver.max_steps={s.per_phase}",
            f"solver.batch_size={s.batch}",
            f"solver.group_size={s.group}",
            f"solver.learning_rate={s.lr}",
            f'solver.lr_scheduler="{scheduler}"',
            f'solver.lr_span="{span}"',
            f"solver.keep_optimizer={'true' if keep else 'false'}",
            f"grpo.kl_beta={s.beta}",
            f'grpo.loss_type="{s.loss_type}"',
            f"grpo.top_p={s.top_p}",
            f"grpo.temperature={s.temperature}",
            f"grpo.weight_decay={s.weight_decay}",
        ],
    )


def train_diagevo(pair: Path, questions: list[tuple[str, str]], s: Settings, variant: str) -> dict[str, Any]:
    """``HFBackend.train_solver`` phase by phase as the loop calls it: round t's questions, its
    seeded stream, the ±1 reward of the true answer; the learning rates its trainers logged."""
    from diagevo.train.hf.backend import HFBackend

    backend = HFBackend(diagevo_config(pair, s, variant))
    n = s.per_phase * s.batch  # one pass over a phase's questions fills its steps
    lrs: list[float] = []
    started = time.perf_counter()
    for t in range(1, s.phases + 1):
        part = questions[(t - 1) * n : t * n]

        def reward(i: int, responses: Any, part: list[tuple[str, str]] = part) -> list[float]:
            return solver_rewards(responses, part[i][1])

        backend.train_solver([q for q, _ in part], reward, s.group, seeded(s.seed, t, "solver"))
        lrs += [row["learning_rate"] for _, row in backend.take_steps()]
    seconds = time.perf_counter() - started
    model, tok = backend.model("solver"), backend.tokenizer("solver")
    return {"model": model, "tokenizer": tok, "lrs": lrs, "seconds": seconds, "backend": backend}


def config_diff(pair: Path, s: Settings, variant: str) -> dict[str, tuple[Any, Any]]:
    """The ``GRPOConfig`` fields where diagevo's phase differs from plain TRL's run (TRL, diagevo):
    the output folder and the seed aside."""
    from trl import GRPOConfig

    cfg = diagevo_config(pair, s, variant)
    with tempfile.TemporaryDirectory() as tmp:
        ours = GRPOConfig(**grpo_kwargs(cfg, phase_plan(cfg, "solver", s.per_phase * s.batch), tmp, s.seed)).to_dict()
        theirs = GRPOConfig(**trl_config(s, tmp)).to_dict()
    skip = {"output_dir", "logging_dir", "seed", "run_name"}
    keys = sorted((set(ours) | set(theirs)) - skip)
    return {k: (theirs.get(k), ours.get(k)) for k in keys if theirs.get(k) != ours.get(k)}


# ------------------------------------------------------------------------------------- the run


def run(pair: Path, s: Settings, only: list[str], samples: int = 4) -> list[dict[str, Any]]:
    """Each setting's held-out accuracy before and after, per skill, its logged rates, seconds."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if s.steps % s.phases:
        raise SystemExit(f"--steps {s.steps} is not a multiple of --phases {s.phases}")
    rows = heldout(pair)
    questions = training_questions(pair, s.steps * s.batch, s.seed)
    model = AutoModelForCausalLM.from_pretrained(pair / "solver")
    tok = AutoTokenizer.from_pretrained(pair / "solver")
    before = {
        "greedy": accuracy(model, tok, rows, 0, 1, s.seed),
        "sampled": accuracy(model, tok, rows, 1, samples, s.seed),
    }
    results = []
    for name in only:
        with tempfile.TemporaryDirectory(prefix="bench-pair-") as tmp:
            copy = Path(tmp) / "pair"
            shutil.copytree(pair, copy)
            if name == "trl":
                got = train_trl(copy / "solver", questions, s)
            else:
                got = train_diagevo(copy, questions, s, name)
            after = {
                "greedy": accuracy(got["model"], got["tokenizer"], rows, 0, 1, s.seed),
                "sampled": accuracy(got["model"], got["tokenizer"], rows, 1, samples, s.seed),
            }
        results.append(
            {
                "setting": name,
                "steps": s.steps,
                "before": before,
                "after": after,
                "lrs": got["lrs"],
                "seconds": got["seconds"],
            }
        )
        print(f"{name}: greedy {before['greedy']['all']:.3f} -> {after['greedy']['all']:.3f} ({got['seconds']:.0f} s)")
    return results


def table(results: list[dict[str, Any]]) -> str:
    skills = [k for k in results[0]["after"]["greedy"] if k != "all"]
    head = ["setting", "steps", "greedy before", "after", "Δ", "sampled before", "after", "Δ"]
    lines = ["| " + " | ".join(head + [f"{k} (greedy after)" for k in skills] + ["seconds"]) + " |"]
    lines.append("|" + "---|" * (len(head) + len(skills) + 1))
    delta = {}
    for r in results:
        g0, g1 = r["before"]["greedy"]["all"], r["after"]["greedy"]["all"]
        s0, s1 = r["before"]["sampled"]["all"], r["after"]["sampled"]["all"]
        delta[r["setting"]] = (g1 - g0, s1 - s0)
        cells = [r["setting"], str(r["steps"]), f"{g0:.3f}", f"{g1:.3f}", f"{g1 - g0:+.3f}"]
        cells += [f"{s0:.3f}", f"{s1:.3f}", f"{s1 - s0:+.3f}"]
        cells += [f"{r['after']['greedy'][k]:.2f}" for k in skills] + [f"{r['seconds']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    if "trl" in delta:
        for name, (g, sm) in delta.items():
            if name != "trl":
                lines.append(
                    f"\nΔ {name} − Δ trl: greedy {g - delta['trl'][0]:+.3f}, sampled {sm - delta['trl'][1]:+.3f}"
                )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pair", type=Path, default=ROOT / "models" / "mini")
    d = Settings()
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--group", type=int, default=d.group)
    p.add_argument("--batch", type=int, default=d.batch, help="prompts per optimizer step")
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--beta", type=float, default=d.beta)
    p.add_argument("--loss-type", default=d.loss_type)
    p.add_argument("--top-p", type=float, default=d.top_p)
    p.add_argument("--temperature", type=float, default=d.temperature)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--phases", type=int, default=d.phases, help="diagevo's phases (rounds) over the steps")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--samples", type=int, default=4, help="samples per held-out question at temperature 1")
    p.add_argument("--only", action="append", choices=["trl", *VARIANTS], help="repeatable; default: all three")
    p.add_argument("--json", type=Path, help="write the settings and results here")
    a = p.parse_args()

    import torch

    torch.set_num_threads(1)
    s = Settings(
        a.steps, a.group, a.batch, a.lr, a.beta, a.loss_type, a.top_p, a.temperature, a.weight_decay, a.seed, a.phases
    )
    only = a.only or ["trl", *VARIANTS]
    for variant in [v for v in VARIANTS if v in only]:
        print(f"GRPOConfig, plain TRL vs {variant} (per phase):")
        for k, (theirs, ours) in config_diff(a.pair, s, variant).items():
            print(f"  {k}: {theirs!r} vs {ours!r}")
    results = run(a.pair, s, only, a.samples)
    print(table(results))
    if a.json:
        a.json.write_text(json.dumps({"settings": asdict(s), "pair": str(a.pair), "results": results}, indent=1))


if __name__ == "__main__":
    main()
