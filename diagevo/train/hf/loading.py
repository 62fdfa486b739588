"""How the policies are held: the dtype of their weights, the attention kernel asked for, and one
architecture for both roles (one vLLM engine samples both). Checked before a model is loaded, apart
from the backend's rounds so that each rule of loading is said once."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from diagevo.config.sections import Role
from diagevo.errors import BadInput, Fix, Override, Unavailable

if TYPE_CHECKING:
    from diagevo.train.config import Config


def check_flash_attention() -> None:
    """FlashAttention 2 was asked for on CUDA: it needs the flash-attn package."""
    if importlib.util.find_spec("flash_attn") is None:
        raise Unavailable(
            'hf.attn_implementation = "flash_attention_2" needs the flash-attn package on CUDA:',
            Fix(extras=("gpu",), otherwise=(Override("hf.attn_implementation", "sdpa"),)),
        )


def weight_dtype(cfg: Config) -> str:
    """The dtype a policy is held in. BF16 training (Appendix E) computes in bf16 under autocast
    (TRL's ``bf16=True``) but keeps fp32 master weights: an AdamW step at the paper's learning rate
    of 1e-6 moves a weight by about 1e-6 of its size, far below bf16's resolution (2^-8), so
    weights held in bf16 would not change at all. Only under DeepSpeed, which keeps its own fp32
    master copy in the optimizer, are the policies loaded in bf16."""
    if cfg.hf.bf16 and cfg.hf.device != "cpu" and os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        return "bfloat16"
    return "float32"


def check_one_architecture(sources: dict[Role, Path]) -> None:
    """Both roles are sampled by one vLLM engine (their weights pushed in turn), so they must share
    one architecture, as they do in the paper (both start from one base model)."""
    keys = (
        "model_type",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "vocab_size",
    )
    shapes = {
        role: {k: json.loads((d / "config.json").read_text(encoding="utf-8")).get(k) for k in keys}
        for role, d in sources.items()
    }
    if shapes["challenger"] != shapes["solver"]:
        raise BadInput(f"one vLLM engine samples both roles, so they must share one architecture: {shapes}")
