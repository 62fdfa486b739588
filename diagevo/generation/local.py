"""``LocalEngine``: transformers ``generate`` in this process, batched, seeded.

Prompts are left-padded, so a batch decodes as its prompts would alone; sampling is seeded per
call, so on a CPU the same call gives the same outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from diagevo.errors import BadInput, NotFound
from diagevo.generation import GenerationError, Messages, Sampling, model_text, render_plain
from diagevo.runtime.progress import ProgressFn, no_progress


def looks_local(model: str) -> bool:
    """Whether ``model`` names a local path rather than a hub id (``org/name``)."""
    if model.startswith(("/", ".", "~")) or model.count("/") > 1 or "\\" in model:
        return True
    head = model.split("/", 1)[0]
    return "/" in model and Path(head).expanduser().is_dir()


def check_local_model(model: str) -> Path:
    """The directory of a local model; a name that looks like a hub id says no hub can be reached."""
    path = Path(model).expanduser()
    if path.exists() and not path.is_dir():
        raise BadInput(f"{model}: a file, not a model directory")
    if not path.is_dir() and looks_local(model):
        raise NotFound(f"{model}: no such directory")
    if not path.is_dir():  # a hub id: it cannot be fetched (no network)
        raise BadInput(f"{model}: no network: pass a local model directory")
    if not (path / "config.json").is_file():
        raise BadInput(f"{model}: not a model directory (no config.json)")
    return path


class LocalEngine:
    """Generates with a model loaded from a local directory (or an already loaded model)."""

    name = "local"

    def __init__(
        self,
        model: str | Any,
        *,
        tokenizer: Any = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
    ) -> None:
        path = check_local_model(model) if isinstance(model, str) else None  # before torch: a typo answered at once
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if device == "auto":  # a GPU when there is one (evaluation on a GPU machine), else the CPU
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if dtype == "auto":
            dtype = "bfloat16" if device.startswith("cuda") else "float32"
        if path is not None:
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).to(device)  # type: ignore[arg-type]
            self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
        else:
            if tokenizer is None:
                raise ValueError("a loaded model needs its tokenizer")
            self.model, self.tokenizer = model, tokenizer
        self.device = device
        self.batch_size = max(1, batch_size)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"

    def render(self, messages: Messages) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return str(
                self.tokenizer.apply_chat_template(
                    [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
                )
            )
        return render_plain(messages)

    def generate(
        self, prompts: Sequence[Messages], sampling: Sampling, progress: ProgressFn = no_progress
    ) -> list[list[str]]:
        import torch

        texts = [self.render(p) for p in prompts]
        out: list[list[str]] = []
        greedy = sampling.temperature == 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            "do_sample": not greedy,
            "num_return_sequences": sampling.n,
            "pad_token_id": self.tokenizer.pad_token_id,
            "eos_token_id": self.tokenizer.eos_token_id,
        }
        if not greedy:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
        torch.manual_seed(sampling.seed)
        was_training = self.model.training
        self.model.eval()
        progress("generate", 0, len(texts))
        try:
            for start in range(0, len(texts), self.batch_size):
                chunk = texts[start : start + self.batch_size]
                enc = self.tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
                with torch.no_grad():
                    ids = self.model.generate(**enc, **kwargs)
                new = ids[:, enc["input_ids"].shape[1] :]
                decoded = self.tokenizer.batch_decode(new, skip_special_tokens=True)
                for i in range(len(chunk)):
                    out.append([model_text(t) for t in decoded[i * sampling.n : (i + 1) * sampling.n]])
                progress("generate", start + len(chunk), len(texts))
        except RuntimeError as exc:
            raise GenerationError(f"local generation failed: {str(exc).splitlines()[0]}") from None
        finally:
            self.model.train(was_training)
        return out

    def close(self) -> None:
        self.model = None
