"""Evaluating one model on one benchmark: prompts, generation, grading, resumable outputs.

Every benchmark gets greedy pass@1; AMC and AIME also get mean@k at the rollout settings of
Appendix E. Each graded question is appended to the outputs JSONL at once, so an interrupted
evaluation loses at most one batch and a run again skips what the file holds. Each line carries
a hash of everything that decides its content (model, file, prompt, sampling): a file written
under other settings is refused rather than mixed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from diagevo.curriculum.prompts import SOLVER_SYSTEM, solver_messages
from diagevo.errors import Argument, BadInput
from diagevo.eval.benchmarks import Benchmark, BenchmarkQuestion
from diagevo.eval.config import EvalConfig
from diagevo.eval.grading import grade
from diagevo.generation import Engine, Messages, Sampling
from diagevo.results import Result
from diagevo.runtime.progress import ProgressFn, no_progress
from diagevo.text.parsing import decode, loads, split_lines

PROMPT_VERSION = 1  # bump when the prompt or grading changes what a stored line means


@dataclass(frozen=True)
class BenchResult(Result):
    """One benchmark's score for one model. ``mean_at_k`` is None where it is not reported."""

    benchmark: str
    kind: str
    title: str
    file: str
    file_sha256: str
    model: str
    n: int
    correct: int
    accuracy: float
    unparsed: int
    k: int | None
    mean_at_k: float | None
    seconds: float
    resumed: int  # questions read back from the outputs file instead of generated
    outputs: str
    settings: str  # hash of what decides the outputs (model, file, prompt, sampling)


class OutputsMismatch(BadInput):
    """The outputs file holds lines written under other settings."""


# what an outputs file that is not ours asks for: another one (the CLI's --out names its directory)
ELSEWHERE = Argument("outputs", "DIR")


def _mismatch(path: Path, what: str, fix: str = "write the outputs elsewhere") -> OutputsMismatch:
    return OutputsMismatch(f"{path}{what}; {fix}", ELSEWHERE, aside=True)


def settings_hash(model: str, bench: Benchmark, cfg: EvalConfig, k: int | None) -> str:
    """What decides a stored line: the model, the file, the prompt and the sampling."""
    key = {
        "model": model,
        "kind": bench.kind.name,
        "file": bench.sha256,
        "prompt": [PROMPT_VERSION, SOLVER_SYSTEM],
        "max_new_tokens": cfg.max_new_tokens,
        "k": k,
        "sampling": [cfg.temperature, cfg.top_p, cfg.seed] if k else None,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _read_done(path: Path, settings: str) -> dict[int, dict[str, Any]]:
    """Lines already graded under ``settings``, by question index. A torn last line (a crash
    mid-write) is cut off so appends start on a fresh line; a symbolic link there is refused."""
    if path.is_symlink():
        raise _mismatch(
            path, " is a symbolic link, not an evaluation output", "remove it, or write the outputs elsewhere"
        )
    if not path.exists():
        return {}
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        raw = raw[: raw.rfind(b"\n") + 1]
        with path.open("r+b") as fh:
            fh.truncate(len(raw))
    done: dict[int, dict[str, Any]] = {}
    try:
        text = decode(raw, str(path))
    except BadInput:
        raise _mismatch(path, " is not UTF-8 text, not an evaluation output") from None
    for n, line in split_lines(text):
        try:
            row = loads(line)
            index, theirs = int(row["index"]), row["settings"]
        except (ValueError, KeyError, TypeError):  # BadInput is a ValueError
            raise _mismatch(path, f" line {n} is not an evaluation output") from None
        if theirs != settings:
            said = " holds outputs of other settings (model, file, prompt or sampling)"
            raise _mismatch(path, said, "remove it, or write the outputs elsewhere")
        done[index] = row
    return done


def _graded(
    q: BenchmarkQuestion, settings: str, greedy: str, samples: Sequence[str], k: int | None, prompt: str | None = None
) -> dict[str, Any]:
    """The outputs line of one question; ``prompt`` is the text the model saw, where the engine
    renders it in this process (a server applies its own template and does not say how)."""
    g = grade(q, greedy)
    row: dict[str, Any] = {
        "index": q.index,
        "id": q.source_id,
        "settings": settings,
        "question": q.text,
        "gold": q.gold,
        "response": greedy,
        "answer": g.answer,
        "correct": g.correct,
        **({"extra": dict(q.extra)} if q.extra else {}),
        **({"prompt": prompt} if prompt is not None else {}),
    }
    if k:
        row["samples"] = []
        for r in samples:
            s = grade(q, r)
            row["samples"].append({"response": r, "answer": s.answer, "correct": s.correct})
        row["mean_correct"] = sum(s["correct"] for s in row["samples"]) / k
    return row


def evaluate(
    engine: Engine,
    model: str,
    bench: Benchmark,
    cfg: EvalConfig,
    outputs: Path,
    *,
    samples: int | None = None,
    progress: ProgressFn = no_progress,
) -> BenchResult:
    """Greedy pass@1 of ``model`` on ``bench``, and mean@k where the benchmark reports it
    (``samples`` overrides k; 0 skips it). A batch is graded in a background thread while the
    next one generates: the answer check (math-verify in its own process) then costs no wall time
    unless it is slower than the engine."""
    k = (cfg.samples if samples is None else samples) if bench.kind.mean_at_k else None
    k = k or None
    settings = settings_hash(model, bench, cfg, k)
    outputs.parent.mkdir(parents=True, exist_ok=True)
    done = _read_done(outputs, settings)
    todo = [q for q in bench.questions if q.index not in done]
    started = time.perf_counter()
    greedy = Sampling(n=1, temperature=0.0, max_new_tokens=cfg.max_new_tokens, seed=cfg.seed)
    sampled = Sampling(
        n=k or 1, temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens, seed=cfg.seed
    )
    total = len(bench.questions)
    phases = (bench.name, f"{bench.name} mean@{k}")
    for phase in phases[: 2 if k else 1]:
        progress(phase, total - len(todo), total)

    render = getattr(engine, "render", None)

    def write(
        fh: TextIO,
        batch: list[BenchmarkQuestion],
        prompts: Sequence[Messages],
        first: list[list[str]],
        many: list[list[str]],
    ) -> None:
        lines = []
        for q, messages, g_out, s_out in zip(batch, prompts, first, many, strict=True):
            row = _graded(q, settings, g_out[0], s_out, k, render(messages) if render else None)
            lines.append(json.dumps(row, ensure_ascii=False) + "\n")
            done[q.index] = row
        fh.write("".join(lines))
        fh.flush()

    appending = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    with (
        os.fdopen(os.open(outputs, appending, 0o666), "a", encoding="utf-8") as fh,
        ThreadPoolExecutor(max_workers=1) as grader,
    ):
        pending: Future[None] | None = None
        for start in range(0, len(todo), cfg.batch_size):
            batch = todo[start : start + cfg.batch_size]
            prompts = [solver_messages(q.text) for q in batch]
            base = total - len(todo) + start

            def reporter(phase: str, base: int = base) -> ProgressFn:
                return lambda _p, d, _n: progress(phase, base + d, total)

            first = engine.generate(prompts, greedy, reporter(phases[0]))
            many = engine.generate(prompts, sampled, reporter(phases[1])) if k else [[] for _ in batch]
            if pending is not None:
                pending.result()  # lines stay in order; at most one batch waits for grading
            pending = grader.submit(write, fh, batch, prompts, first, many)
        if pending is not None:
            pending.result()
    rows = [done[q.index] for q in bench.questions]
    return _scored(bench, model, rows, k, time.perf_counter() - started, total - len(todo), outputs, settings)


def _scored(
    bench: Benchmark,
    model: str,
    rows: list[dict[str, Any]],
    k: int | None,
    seconds: float,
    resumed: int,
    outputs: Path,
    settings: str,
) -> BenchResult:
    """A benchmark's scores from its graded rows (a resumed pass's rows read back included)."""
    correct = sum(bool(r["correct"]) for r in rows)
    return BenchResult(
        benchmark=bench.name,
        kind=bench.kind.name,
        title=bench.kind.title,
        file=str(bench.path),
        file_sha256=bench.sha256,
        model=model,
        n=len(rows),
        correct=correct,
        accuracy=correct / len(rows),
        unparsed=sum(r["answer"] is None for r in rows),
        k=k,
        mean_at_k=sum(r["mean_correct"] for r in rows) / len(rows) if k else None,
        seconds=seconds,
        resumed=resumed,
        outputs=str(outputs),
        settings=settings,
    )
