"""A tiny challenger/solver pair built on this machine, so the real loop runs on a CPU offline.

A byte-level BPE tokenizer (digits one per token) is trained on a templated arithmetic corpus,
and a small ``Qwen3ForCausalLM`` is warmed up on it for a few supervised steps: the solver
prompt (Appendix J) answered step by step ending in ``\\boxed{}``, and the three challenger
prompts (free, targeted, stitched) answered with a ``<question>`` block. Without the warm-up a
random model never writes a parseable question or answer, and the loop would have nothing to
filter, train or diagnose. Both roles start from the same weights, as in the paper (both are
initialised from one base model). Held-out questions never occur in the warm-up data.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from diagevo.curriculum.prompts import challenger_messages, solver_messages
from diagevo.errors import require_use
from diagevo.files.written import refuse_filled
from diagevo.memory.sampler import GenerationRequest
from diagevo.model_dirs import TINY_RECORD
from diagevo.runtime.progress import ProgressFn, no_progress, quiet_libraries
from diagevo.train.hf import warm

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

NODES = ["Arithmetic", "Multi-step arithmetic", "Remainders"]
CAUSES = [
    "Adds the two numbers but drops the carry from the units column into the tens",
    "Subtracts in the wrong order when the second number is larger than the first",
    "Multiplies before adding even though the parentheses say to add first",
    "Confuses the remainder of a division with the quotient of the same division",
    "Forgets to apply the last operation after computing the intermediate result",
]


@dataclass(frozen=True)
class TinySpec:
    """Size and warm-up of the tiny model (defaults: ~0.2M parameters, about a minute on 2 cores)."""

    hidden: int = 64
    layers: int = 2
    heads: int = 4
    vocab: int = 1200
    steps: int = 300
    batch: int = 32
    lr: float = 3e-3
    seed: int = 0
    heldout: int = 40


def _problem(rng: random.Random) -> tuple[str, list[str], int]:
    """(question, solution steps, answer) of one templated arithmetic family."""
    kind = rng.randrange(4)
    a, b, c = rng.randint(2, 49), rng.randint(2, 49), rng.randint(2, 9)
    if kind == 0:
        return f"What is {a} + {b}?", [f"Add {a} and {b} to get {a + b}."], a + b
    if kind == 1:
        return f"What is {a} - {b}?", [f"Subtract {b} from {a} to get {a - b}."], a - b
    if kind == 2:
        return (
            f"What is ({a} + {b}) * {c}?",
            [f"First {a} + {b} = {a + b}.", f"Then {a + b} * {c} = {(a + b) * c}."],
            (a + b) * c,
        )
    return f"What is the remainder when {a} is divided by {c}?", [f"{a} = {a // c} * {c} + {a % c}."], a % c


def _solution(steps: list[str], answer: int) -> str:
    lines = [f"Step {i + 1}: {s}" for i, s in enumerate(steps)]
    lines.append(f"Step {len(steps) + 1}: The final answer is \\boxed{{{answer}}}.")
    return "\n".join(lines)


def _request(rng: random.Random) -> GenerationRequest:
    mode = rng.choice(["free", "targeted", "stitched"])
    if mode == "free":
        return GenerationRequest(mode="free")
    a, m = rng.sample(CAUSES, 2)
    node = rng.choice(NODES)
    if mode == "targeted":
        return GenerationRequest(mode="targeted", active_cause="c", active_text=a, node="n", node_label=node)
    return GenerationRequest(
        mode="stitched", active_cause="c", active_text=a, mastered_cause="m", mastered_text=m, node="n", node_label=node
    )


def corpus(n: int, seed: int) -> tuple[list[tuple[list[dict[str, str]], str]], list[dict[str, str]]]:
    """Warm-up pairs (chat prompt, completion) and held-out questions (question, answer) that
    never occur in the warm-up pairs."""
    rng = random.Random(seed)
    pairs: list[tuple[list[dict[str, str]], str]] = []
    seen: set[str] = set()
    for _ in range(n):
        q, steps, ans = _problem(rng)
        if rng.random() < 0.7:
            pairs.append((solver_messages(q), _solution(steps, ans)))
            seen.add(q)
        else:
            pairs.append((challenger_messages(_request(rng)), f"<question>\n{q}\n</question>"))
    heldout: list[dict[str, str]] = []
    hrng = random.Random(seed + 1)
    while len(heldout) < max(1, n // 50):
        q, _, ans = _problem(hrng)
        if q not in seen and all(h["question"] != q for h in heldout):
            heldout.append({"question": q, "answer": str(ans)})
    return pairs, heldout


def build_tokenizer(texts: list[str], vocab: int):  # noqa: ANN201 - transformers is imported lazily
    """A byte-level BPE tokenizer with digits split one per token and a ChatML chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_tiny(out: Path, spec: TinySpec = TinySpec(), progress: ProgressFn = no_progress) -> Path:
    """Write ``out/challenger`` and ``out/solver`` (config, weights, tokenizer, chat template)
    and ``out/heldout.jsonl``; returns ``out``."""
    require_use("models tiny and the mini world's models", "building the tiny models")
    quiet_libraries()
    out = Path(out)
    refuse_filled(out)
    pairs, heldout = corpus(max(spec.steps * spec.batch // 4, 400), spec.seed)
    tok = build_tokenizer([_prompt_text(p) + c + "<|im_end|>\n" for p, c in pairs], spec.vocab)
    model = warm.new_model(
        tok, spec.seed, hidden=spec.hidden, layers=spec.layers, heads=spec.heads, kv_heads=spec.heads, positions=2048
    )
    warm.warm_up(model, tok, pairs, spec, lambda d, n: progress("warm-up", d, n), constant=False)
    warm.write_pair(out, model, tok, heldout, (TINY_RECORD, json.dumps(asdict(spec))))
    return out


def _prompt_text(prompt: list[dict[str, str]]) -> str:
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in prompt) + "<|im_start|>assistant\n"
