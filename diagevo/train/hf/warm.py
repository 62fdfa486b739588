"""The torch side of the small model pairs built on this machine (``models tiny``, ``models mini``,
the format warm-up of ``models smollm2``): one model shape, one padded batch, one supervised loop,
one way to write a pair. Called only by a build, after its ``require`` found torch (which each
function imports: every module of the package imports without the hf extra)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from diagevo.files.written import building
from diagevo.model_dirs import HELDOUT_FILE, ROLES

Tick = Callable[[int, int], None]


def new_model(tok: Any, seed: int, *, hidden: int, layers: int, heads: int, kv_heads: int, positions: int) -> Any:
    """A fresh ``Qwen3ForCausalLM`` over ``tok``'s vocabulary (tied embeddings, no BOS token),
    initialised from ``seed``."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    return Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=len(tok),
            hidden_size=hidden,
            intermediate_size=3 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=hidden // heads,
            max_position_embeddings=positions,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
    )


def pad_batch(rows: Sequence[tuple[list[int], list[int]]], pad: int) -> dict[str, Any]:
    """Right-padded (prompt ids, completion ids) rows; the loss on the completion only."""
    import torch

    width = max(len(p) + len(c) for p, c in rows)
    ids = torch.full((len(rows), width), pad)
    labels = torch.full((len(rows), width), -100)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (p, c) in enumerate(rows):
        ids[i, : len(p) + len(c)] = torch.tensor(p + c)
        labels[i, len(p) : len(p) + len(c)] = torch.tensor(c)
        mask[i, : len(p) + len(c)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def fit(
    model: Any,
    batch: Callable[[int], dict[str, Any]],
    steps: int,
    *,
    lr: float,
    schedule: Callable[[int], float] | None = None,
    betas: tuple[float, float] = (0.9, 0.999),
    weight_decay: float = 0.0,
    tick: Tick = lambda d, n: None,
) -> list[float]:
    """AdamW on ``batch(step)`` for ``steps`` steps, gradients clipped at 1.0; the learning rate
    follows ``schedule`` (a factor per step), else one cycle (10 % warm-up). Returns each step's loss."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
    sched = (
        torch.optim.lr_scheduler.LambdaLR(opt, schedule)
        if schedule is not None
        else torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    )
    losses = []
    model.train()
    for step in range(steps):
        loss = model(**{k: v.to(model.device) for k, v in batch(step).items()}).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
        tick(step + 1, steps)
    model.eval()
    return losses


def warm_up(
    model: Any, tok: Any, pairs: Sequence[tuple[list[dict[str, str]], str]], spec: Any, tick: Tick, constant: bool
) -> list[float]:
    """Supervised steps on chat pairs (``spec``: its ``steps``, ``batch``, ``lr`` and ``seed``): the
    prompt, rendered with the tokenizer's chat template, carries no loss; each completion ends with
    the end-of-turn token. ``constant``: a constant learning rate, else one cycle."""
    rows = []
    for prompt, completion in pairs:
        text = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        p = tok(text, add_special_tokens=False)["input_ids"]
        rows.append((p, tok(completion + tok.eos_token + "\n", add_special_tokens=False)["input_ids"]))
    rng = random.Random(spec.seed)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return fit(
        model,
        lambda _: pad_batch(rng.sample(rows, min(spec.batch, len(rows))), pad),
        spec.steps,
        lr=spec.lr,
        schedule=(lambda _: 1.0) if constant else None,
        tick=tick,
    )


def write_pair(out: Path, model: Any, tok: Any, heldout: list[dict[str, str]], record: tuple[str, str]) -> None:
    """``out/challenger`` and ``out/solver`` (the same weights and tokenizer), ``out/heldout.jsonl``
    and the build's ``record`` (name, text), all renamed to ``out`` once complete: a half-built pair
    never looks built."""
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = None
    with building(out) as part:
        for role in ROLES:
            model.save_pretrained(part / role)
            tok.save_pretrained(part / role)
        (part / HELDOUT_FILE).write_text("".join(json.dumps(h) + "\n" for h in heldout), encoding="utf-8")
        (part / record[0]).write_text(record[1], encoding="utf-8")
