"""The torch side of ``diagevo models smollm2`` (:mod:`diagevo.train.hf.pretrained`): the GGUF
dequantised into a safetensors copy, the copy checked against the GGUF, the format warm-up.
Imported only by the build, after its ``require`` found torch, transformers and gguf."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import torch
from gguf import GGUFReader
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from diagevo.errors import BadInput
from diagevo.progress import ProgressFn, no_progress, quiet_libraries
from diagevo.train.hf.pretrained import FormatWarmUp
from diagevo.train.hf.tiny import corpus
from diagevo.train.hf.warm import warm_up
from diagevo.train.model_dirs import HELDOUT_FILE

CHECK_MESSAGES = [
    {"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."},
    {"role": "user", "content": "What is 12 + 30?"},
]


def convert(gguf: Path, out: Path, progress: ProgressFn = no_progress) -> dict[str, object]:
    """Dequantise ``gguf`` into a safetensors model directory ``out``; returns what was checked."""
    quiet_libraries()
    directory, name = str(gguf.parent), gguf.name
    progress("load", 0, 3)
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    special = special_tokens(gguf)
    for attr, token_id in special.items():
        setattr(tok, attr, tok.convert_ids_to_tokens(token_id))
    tok.clean_up_tokenization_spaces = False  # a BPE tokenizer: the clean-up would strip spaces (and warn)
    loaded = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    progress("load", 1, 3)
    config = AutoConfig.from_pretrained(directory, gguf_file=name)
    for attr in ("quantization_config", "_name_or_path"):
        if hasattr(config, attr):
            delattr(config, attr)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [m for m in missing if "lm_head" not in m]:
        raise BadInput(
            f"{gguf}: weights do not fit the model its config describes (missing {missing[:3]}, unexpected "
            f"{unexpected[:3]})"
        )
    model.tie_weights()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    progress("load", 2, 3)
    checks = check_copy(gguf, out, tok, loaded, special)
    progress("load", 3, 3)
    return checks


def special_tokens(gguf: Path) -> dict[str, int]:
    """The special token ids a GGUF's metadata names (``bos_token`` -> id, ...)."""
    fields = GGUFReader(str(gguf)).fields
    names = {
        "bos_token": "bos_token_id",
        "eos_token": "eos_token_id",
        "unk_token": "unknown_token_id",
        "pad_token": "padding_token_id",
    }
    return {
        attr: int(fields[f"tokenizer.ggml.{key}"].contents())
        for attr, key in names.items()
        if f"tokenizer.ggml.{key}" in fields
    }


def check_copy(
    gguf: Path, out: Path, gguf_tok: object, gguf_model: object, special: dict[str, int]
) -> dict[str, object]:
    """The saved copy must tokenize a chat as the GGUF does, name the special tokens the GGUF's
    metadata names, and compute the same logits; else the directory is removed and the error says
    what differs."""
    tok = AutoTokenizer.from_pretrained(out)
    saved = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)

    def chat_ids(t: object) -> list[int]:
        return list(
            t.apply_chat_template(  # type: ignore[attr-defined]
                CHECK_MESSAGES, tokenize=True, add_generation_prompt=True, return_dict=True
            )["input_ids"]
        )

    problems = []
    ids = chat_ids(gguf_tok)
    if chat_ids(tok) != ids:
        problems.append("the chat template or tokenizer renders a chat differently")
    for attr, token_id in special.items():
        if getattr(tok, f"{attr}_id") != token_id:
            problems.append(f"{attr} is id {getattr(tok, f'{attr}_id')}, the GGUF says {token_id}")
    with torch.no_grad():
        x = torch.tensor([ids])
        diff = float((saved(x).logits - gguf_model(x).logits).abs().max())  # type: ignore[operator]
    if diff > 1e-4:
        problems.append(f"logits differ by {diff:.2e}")
    if problems:
        shutil.rmtree(out, ignore_errors=True)
        raise BadInput(f"{gguf}: the saved copy differs from the GGUF: {'; '.join(problems)}")
    return {
        "chat_tokens": len(ids),
        "max_logit_difference": diff,
        "parameters": sum(p.numel() for p in saved.parameters()),
        "special_tokens": {attr: getattr(tok, attr) for attr in special},
    }


def warm_up_formats(out: Path, warm: FormatWarmUp, progress: ProgressFn = no_progress) -> dict[str, object]:
    """The format warm-up of the model in ``out`` (saved in place) and its held-out file."""
    pairs, heldout = corpus(2000, warm.seed)
    (out / HELDOUT_FILE).write_text("".join(json.dumps(h) + "\n" for h in heldout), encoding="utf-8")
    if warm.steps == 0:
        return {"steps": 0}
    torch.manual_seed(warm.seed)
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    model.to("cuda" if torch.cuda.is_available() else "cpu")  # type: ignore[arg-type]  # fp32 either way: seconds on a GPU
    losses = warm_up(model, tok, pairs, warm, lambda d, n: progress("warm-up", d, n), constant=True)
    model.save_pretrained(out, safe_serialization=True)
    return {**asdict(warm), "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4)}
