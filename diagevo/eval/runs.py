"""Evaluating a run's solver checkpoints, recording scores in its log, choosing a checkpoint.

Round 0 is the base solver named in the run's config; round t >= 1 is the solver checkpoint
written in round t. Each score becomes one ``eval.recorded`` event in the evaluated round, and a
choice by validation accuracy one ``checkpoint.selected`` event (Appendix E: each run uses the
checkpoint with the highest validation accuracy). Event ids derive from the settings, so
evaluating again is a no-op.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagevo.catalog import CheckpointSelected, CheckpointWritten, EvalRecorded, Event, RoundCommitted, RunStarted
from diagevo.catalog.ids import event_id
from diagevo.config.sections import MethodConfig, config_from_record
from diagevo.errors import BadInput, Call
from diagevo.eval.benchmarks import Benchmark
from diagevo.eval.config import EvalConfig
from diagevo.eval.runner import BenchResult, evaluate
from diagevo.files.written import plain_name
from diagevo.generation import Engine
from diagevo.log import EventReader, Recorder
from diagevo.log.paths import run_name
from diagevo.rounds import record_retrospective
from diagevo.runtime.progress import ProgressFn, no_progress
from diagevo.schemas import EventIn, new_event
from diagevo.views.admission import admitted_rows
from diagevo.views.checkpoints import checkpoint_log, checkpoint_path
from diagevo.views.queries import pruned_note


class RunEvalError(BadInput):
    """A run whose checkpoints cannot be evaluated as asked."""


def solver_models(store: Recorder, run: str) -> dict[int, str]:
    """Round -> the solver to evaluate: the base model for round 0, then the solver checkpoint
    of every committed round, as its log names it (the events the checkpoint rule refuses passed
    over)."""
    config = MethodConfig()  # no run.started: the simulator's defaults, no language model to evaluate
    checkpoints: dict[int, str] = {}
    committed: list[int] = []
    valid = {row.seq for row in checkpoint_log(store, run).written}
    for e in admitted_rows(store, run, types=(RunStarted, CheckpointWritten, RoundCommitted)):
        match e.event:
            case RunStarted(config=stored):
                config = config_from_record(stored)
            case CheckpointWritten(phase="solver", path=path) if e.seq in valid:
                checkpoints[e.round] = path
            case RoundCommitted():
                committed.append(e.round)
    backend = config.train.backend
    if backend != "hf":
        raise RunEvalError(
            f"run {run!r} was trained with the {backend} backend: its checkpoints are not language models; "
            "evaluate a model directory instead",
            Call("evaluate_model", "diagevo.eval.runs.evaluate_model", model="DIR"),
            aside=True,
            then=", or a run of the hf backend",
            about=run,
        )
    models = {0: config.solver.model}
    for t in committed:
        if t not in checkpoints:
            raise RunEvalError(f"round {t} of run {run!r} has no solver checkpoint")
        models[t] = checkpoints[t]
    return models


def pruned_solvers(store: EventReader, run: str) -> dict[int, Any]:
    """Round -> the ``checkpoint.pruned`` event that deleted its solver checkpoint."""
    log = checkpoint_log(store, run)
    return {
        e.round: gone
        for e in log.written
        if isinstance(c := e.event, CheckpointWritten) and c.phase == "solver" and (gone := log.gone(e)) is not None
    }


def pick_rounds(available: Sequence[int], spec: str) -> list[int]:
    """``all``, one round ``3``, a list ``0,2,5`` or a range ``1-4``; every round must be available."""
    spec = spec.strip()
    if spec == "all":
        return sorted(available)
    wanted: list[int] = []
    try:
        for part in spec.split(","):
            lo, sep, hi = part.partition("-")
            first, last = int(lo), int(hi) if sep else int(lo)
            wanted.extend(range(first, last + 1))
    except ValueError:
        raise RunEvalError(f"rounds {spec!r}: use all, N, N,M or N-M") from None
    missing = sorted(set(wanted) - set(available))
    if missing:
        have = ", ".join(map(str, sorted(available)))
        raise RunEvalError(f"round {missing[0]} has no solver to evaluate (rounds with one: {have})")
    return sorted(set(wanted))


def _shared_fields(event: type[Event], result: BenchResult) -> dict[str, Any]:
    """The fields of ``result`` that ``event`` records under the same names."""
    return {k: v for k, v in result.to_dict().items() if k in event.model_fields}


def eval_event(run: str, t: int, result: BenchResult, engine: str) -> EventIn:
    """One ``eval.recorded`` event for a (round, benchmark) score."""
    score = EvalRecorded(**_shared_fields(EvalRecorded, result), benchmark_kind=result.kind, engine=engine)
    key = f"{result.benchmark}/{result.settings}/{result.n}"
    return new_event(score, run=run, at_round=t, event_id=event_id(run, t, "eval", key))


def selection_event(run: str, results: Mapping[int, BenchResult]) -> EventIn:
    """``checkpoint.selected`` for the best of ``results`` (round -> validation score)."""
    scores = {t: r.accuracy for t, r in results.items()}
    best = min(scores, key=lambda t: (-scores[t], t))  # a tie goes to the earlier round
    key = hashlib.sha256(json.dumps(sorted((t, r.settings) for t, r in results.items())).encode()).hexdigest()[:16]
    scored = {str(t): s for t, s in sorted(scores.items())}
    selected = CheckpointSelected(**_shared_fields(CheckpointSelected, results[best]), scores=scored)
    return new_event(selected, run=run, at_round=best, event_id=event_id(run, best, "select", key))


EngineFactory = Callable[[str], Engine]


@dataclass(frozen=True)
class ModelEvaluation:
    """What ``evaluate_model`` did (``eval --model --json``): the model, the engine that ran it,
    its score on each benchmark."""

    model: str
    engine: str
    results: tuple[BenchResult, ...]

    @property
    def rows(self) -> list[tuple[int | None, BenchResult]]:
        """The scores as ``eval`` tabulates them: no round."""
        return [(None, r) for r in self.results]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "engine": self.engine, "results": [r.to_dict() for r in self.results]}


@dataclass(frozen=True)
class RunEvaluation:
    """What ``evaluate_run`` did (``eval --run --json``): the run, the engine, the scores by
    round, the validation scores by round and the round they chose."""

    run: str
    engine: str
    results: tuple[tuple[int, BenchResult], ...]
    validation: Mapping[int, BenchResult]
    selected: int | None

    @property
    def rows(self) -> list[tuple[int | None, BenchResult]]:
        """The scores as ``eval`` tabulates them: the validation scores, then the benchmarks'."""
        return [*sorted(self.validation.items()), *self.results]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "engine": self.engine,
            "selected": self.selected,
            "validation": {str(t): r.to_dict() for t, r in sorted(self.validation.items())},
            "results": [{"round": t, **r.to_dict()} for t, r in self.results],
        }


def model_label(model: str) -> str:
    """A directory name for a model's outputs: its last path components, filesystem-safe."""
    parts = [p for p in Path(model).parts if p not in ("/", ".", "..")][-2:]
    return "_".join(re.sub(r"[^A-Za-z0-9._-]+", "-", p) for p in parts) or "model"


def evaluate_model(
    make_engine: EngineFactory,
    model: str,
    benches: Sequence[Benchmark],
    cfg: EvalConfig,
    out_dir: Path,
    *,
    label: str | None = None,
    samples: int | None = None,
    progress: ProgressFn = no_progress,
    on_result: Callable[[BenchResult], None] = lambda r: None,
    engine_name: str = "",
) -> ModelEvaluation:
    """Every benchmark on one model, with one engine (``engine_name`` names its kind)."""
    engine = make_engine(model)
    try:
        results = []
        for bench in benches:
            name = plain_name(bench.name, "benchmark name")  # the outputs stay in out_dir
            out = out_dir / (label or model_label(model)) / f"{name}.jsonl"
            result = evaluate(engine, model, bench, cfg, out, samples=samples, progress=progress)
            on_result(result)
            results.append(result)
        return ModelEvaluation(model, engine_name, tuple(results))
    finally:
        engine.close()


def evaluate_run(
    store: Recorder,
    run: str,
    benches: Sequence[Benchmark],
    make_engine: EngineFactory,
    cfg: EvalConfig,
    out_dir: Path,
    *,
    rounds: str = "all",
    validation: Benchmark | None = None,
    samples: int | None = None,
    engine_name: str = "",
    progress: ProgressFn = no_progress,
    on_result: Callable[[int, BenchResult], None] = lambda t, r: None,
    checkpoints: Path | None = None,
) -> RunEvaluation:
    """Evaluate the run's solver of each picked round and record every score in its log; its
    checkpoints are looked for under ``checkpoints`` (the folder its trainer was given as
    ``train.out_dir``; None: the database's folder), never where a row says.

    With ``validation``, every picked round is scored on it first, the best round is recorded
    as ``checkpoint.selected``, and ``benches`` are evaluated on that round only (the paper's
    protocol); without it, ``benches`` are evaluated on every picked round."""
    models = solver_models(store, run)
    gone = pruned_solvers(store, run)
    if rounds.strip() == "all":  # every round whose solver is still on disk
        models = {t: m for t, m in models.items() if t not in gone}
    picked = pick_rounds(list(models), rounds)
    for t in picked:
        if t in gone:  # asked for by number
            raise RunEvalError(f"round {t} of run {run!r}: {pruned_note(gone[t])}")
    results: list[tuple[int, BenchResult]] = []
    validated: dict[int, BenchResult] = {}
    selected = None

    def score(t: int, suite: Sequence[Benchmark]) -> tuple[BenchResult, ...]:
        model = models[t]
        if t > 0:  # the checkpoint's solver: path/solver where the backend saved both models under one path
            path = checkpoint_path(store, run, model, checkpoints)
            model = str(path / "solver") if (path / "solver").is_dir() else str(path)

        def record(result: BenchResult) -> None:
            record_retrospective(store, run, [eval_event(run, t, result, engine_name)])
            on_result(t, result)

        return evaluate_model(
            make_engine,
            model,
            suite,
            cfg,
            out_dir,
            label=f"{run_name(run)}/round{t:03d}",
            samples=samples,
            progress=lambda phase, d, n: progress(f"round {t}: {phase}", d, n),
            on_result=record,
        ).results

    if validation is not None:
        for i, t in enumerate(picked):
            progress("checkpoints on the validation file", i, len(picked))
            validated[t] = score(t, [validation])[0]
        progress("checkpoints on the validation file", len(picked), len(picked))
        event = selection_event(run, validated)
        record_retrospective(store, run, [event])
        selected = event.round
        picked = [event.round]
    if benches:
        for i, t in enumerate(picked):
            progress("checkpoints", i, len(picked))
            results.extend((t, r) for r in score(t, benches))
        progress("checkpoints", len(picked), len(picked))
    return RunEvaluation(run, engine_name, tuple(results), validated, selected)
