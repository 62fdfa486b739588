"""The hf backend on the CPU: seconds per phase of one tiny-hf round, and the local engine's
tokens per second against a raw ``model.generate`` on the same prompts (the baseline, measured
in the same run: one left-padded batch call with the same sampling settings).

The tiny pair is built first (``--tiny DIR`` reuses one built by ``diagevo models tiny``).
Run: ``.venv/bin/python benchmarks/bench_hf.py [--tiny DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from diagevo.curriculum.prompts import solver_messages  # noqa: E402
from diagevo.generation import Sampling  # noqa: E402
from diagevo.generation.local import LocalEngine  # noqa: E402
from diagevo.log import open_log
from diagevo.train.config import load_config  # noqa: E402
from diagevo.train.hf.tiny import TinySpec, build_tiny  # noqa: E402
from diagevo.train.run import train  # noqa: E402

QUESTIONS = [f"What is {a} + {b}?" for a, b in zip(range(3, 35, 2), range(40, 8, -2), strict=True)]  # 16 prompts
SAMPLES, NEW_TOKENS, BATCH = 4, 40, 8


def engine_vs_raw(solver: Path) -> None:
    import torch

    engine = LocalEngine(str(solver), batch_size=BATCH)
    sampling = Sampling(n=SAMPLES, temperature=1.0, top_p=0.99, max_new_tokens=NEW_TOKENS, seed=0)
    prompts = [solver_messages(q) for q in QUESTIONS]
    engine.generate(prompts[:2], sampling)  # warm-up
    tok = engine.tokenizer

    def count(texts: list[list[str]]) -> int:
        return sum(len(tok(t, add_special_tokens=False)["input_ids"]) for group in texts for t in group)

    started = time.perf_counter()
    outs = engine.generate(prompts, sampling)
    t_engine = time.perf_counter() - started
    n_engine = count(outs)

    texts = [engine.render(p) for p in prompts]
    torch.manual_seed(0)
    started = time.perf_counter()
    raw: list[list[str]] = []
    for i in range(0, len(texts), BATCH):
        enc = tok(texts[i : i + BATCH], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            ids = engine.model.generate(
                **enc,
                max_new_tokens=NEW_TOKENS,
                do_sample=True,
                temperature=1.0,
                top_p=0.99,
                top_k=0,
                num_return_sequences=SAMPLES,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
        dec = tok.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        raw += [dec[j * SAMPLES : (j + 1) * SAMPLES] for j in range(len(dec) // SAMPLES)]
    t_raw = time.perf_counter() - started
    n_raw = count(raw)
    e, r = n_engine / t_engine, n_raw / t_raw
    print(
        f"local engine: {n_engine} tokens in {t_engine:.2f} s = {e:,.0f} tok/s; raw generate: {n_raw} tokens in "
        f"{t_raw:.2f} s = {r:,.0f} tok/s; ratio {e / r:.2f}x"
    )


def round_phases(tiny: Path, tmp: Path) -> None:
    cfg = load_config(
        ROOT / "configs" / "tiny-hf.toml",
        [
            f"solver.model={json.dumps(str(tiny / 'solver'))}",
            f"challenger.model={json.dumps(str(tiny / 'challenger'))}",
            f"train.out_dir={json.dumps(str(tmp / 'ckpt'))}",
        ],
    )
    store = open_log(f"sqlite:///{tmp / 'bench.db'}", create=True)
    started = time.perf_counter()
    _, (report,) = train(cfg, store)
    total = time.perf_counter() - started
    store.close()
    phases = "  ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
    print(
        f"tiny-hf round: {total:.1f} s in all ({report.stats.get('retained')}/{report.stats.get('questions')} kept, "
        f"{report.stats.get('failures')} failures): {phases}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", type=Path, help="a tiny pair built by `diagevo models tiny` (default: build one)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.tiny is not None:
            tiny = args.tiny
        else:
            started = time.perf_counter()
            tiny = build_tiny(tmp / "tiny", TinySpec(steps=200))
            print(f"tiny pair built in {time.perf_counter() - started:.1f} s")
        print(f"load average {os.getloadavg()[0]:.1f}")
        engine_vs_raw(tiny / "solver")
        round_phases(tiny, tmp)


if __name__ == "__main__":
    main()
