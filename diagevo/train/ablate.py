"""Table 2 / Table 4 ablations on the simulator, under each world setting."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import statistics
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Literal

from diagevo.catalog import RoundCommitted, of_type
from diagevo.log import Recorder, open_log
from diagevo.train.config import load_config
from diagevo.train.run import TrainOptions, train
from diagevo.train.sim.backend import SimBackend
from diagevo.train.sim.dynamics import measure_seed
from diagevo.views.admission import admitted_rows

# the label source that never reads the truth: the shared-error check of five rewordings, voted by the first solver
TRUTH_FREE = ['filter.shared_error_check="variants"', "filter.check_variants=5", 'filter.labeler="initial"']
# half the solver's rate (mini-cpu's 1e-4), chosen on the oracle alone: it removes the round-1 dip
HALF_RATE = ["solver.learning_rate=5e-5"]

# variant name -> config overrides (Table 2 columns, then Table 4 fixed ratios)
VARIANTS: dict[str, list[str]] = {
    "full": [],
    "frozen challenger": ["memory.challenger_updates=false"],
    "pure free": ['memory.generation="free"'],
    # the upper reference, not the method: no memory, the true answer as the solver's reward
    "oracle": ['memory.generation="free"', 'solver.reward="true_answer"'],
    # the memory's targeting with right labels: full DiagEvo, the true answer as the solver's reward (a control)
    "memory, true answer": ['solver.reward="true_answer"'],
    # targeting drawn alike over the Active causes (p ∝ f^0), with and without the true answer: can the memory
    # steer practice to a skill whose failures the filter seldom lets reach it?
    "memory, true answer, flat": ['solver.reward="true_answer"', "memory.frequency_power=0"],
    "full, flat": ["memory.frequency_power=0"],
    # a label source that never reads the truth, screened on round 1: the check with more rewordings a candidate
    "check, 3 rewordings": ['filter.shared_error_check="variants"', "filter.check_variants=3"],
    "check, 5 rewordings": ['filter.shared_error_check="variants"', "filter.check_variants=5"],
    # the one chosen (the least round-1 wrong+ of those keeping 600 questions), its votes from the run's first
    # solver, with and without the memory; and both at half the solver's rate (the setting without the round-1 dip)
    **{
        f"truth-free labels{memory}{name}": [*free, *TRUTH_FREE, *rate]
        for name, rate in (("", []), (", half rate", HALF_RATE))
        for memory, free in (("", []), (", no memory", ['memory.generation="free"']))
    },
    # the truth-free arm's questions (the check's five rewordings, the first solver's votes) paid the true
    # answer: separates what the label source retains from the labels it pays
    "truth-free questions, true answer": ['memory.generation="free"', *TRUTH_FREE, 'solver.reward="true_answer"'],
    # the oracle with a warm-up of the solver's rate from 0 over its first 30 steps (the round-1 dip's control)
    "oracle, warm-up": ['memory.generation="free"', 'solver.reward="true_answer"', "solver.lr_warmup=30"],
    # the oracle at half the solver's rate throughout (the dip's second control: the rate's size)
    "oracle, half rate": ['memory.generation="free"', 'solver.reward="true_answer"', *HALF_RATE],
    # the label-accuracy control (no memory): the true answer, but a chosen share of the questions paid a wrong one
    **{
        f"wrong labels {share}{name}": [
            'memory.generation="free"',
            'solver.reward="true_answer"',
            f"solver.wrong_label_share={share}",
            *rate,
        ]
        # and the same control at half the solver's rate, the setting that removes the round-1 dip
        for name, rate in (("", []), (", half rate", HALF_RATE))
        for share in (0.15, 0.3, 0.45, 0.6)
    },
    # Figure 3c's baseline: pure free exploration with the absolute confidence constraint only
    "pure free, absolute only": ['memory.generation="free"', 'filter.mode="absolute"'],
    # beyond the paper: full DiagEvo with the shared-error check (the answer stable across rewordings)
    "shared-error check": ['filter.shared_error_check="variants"'],
    "pure targeted": ['memory.generation="targeted"'],
    "no state updates": ["memory.state_updates=false"],
    "no stitching": ['memory.stitching="none"'],
    "random-pair stitching": ['memory.stitching="random_pair"'],
    "no filtering": ['filter.mode="none"'],
    "absolute only": ['filter.mode="absolute"'],
    "fixed 7:3": ['memory.generation="fixed"', "memory.fixed_free_ratio=0.7"],
    "fixed 5:5": ['memory.generation="fixed"', "memory.fixed_free_ratio=0.5"],
    "fixed 3:7": ['memory.generation="fixed"', "memory.fixed_free_ratio=0.3"],
}

# world setting -> overrides: all properties (a)-(d) on, then each switched off
WORLDS: dict[str, list[str]] = {
    "all on": [],
    "(a) off: no cheap difficulty": ["sim.cheap_difficulty=false"],
    "(b) off: no label noise": ["sim.label_noise=false"],
    "(c) off: no transfer": ["sim.transfer=false"],
    "(d) off: no drift": ["sim.drift=false"],
    "composition off": ["sim.composition=false"],
}
CONFIGURED = "as configured"
"""The one world setting of a backend other than the simulator (the hf backend's mini world): the
config's own, with no overrides."""

MINI_ARMS = ("full", "pure free", "frozen challenger", "oracle")
"""The mini world's arms: full DiagEvo, no memory (free exploration only), frozen challenger, and
the oracle (no memory, the true answer as the solver's reward: an upper reference, not the method)."""


# Figure 3c's reference: the shared pseudo-label questions come from this variant's challenger
# when it is run (else from "pure free", else from the first variant run)
REFERENCES = ("pure free, absolute only", "pure free")


def _mean_curves(per_seed: list[dict[int, dict[str, float]]]) -> dict[str, list[float]]:
    """Measure -> mean over seeds per round (rounds every seed has)."""
    rounds = sorted(set.intersection(*(set(m) for m in per_seed))) if per_seed else []
    keys = sorted({k for m in per_seed for t in rounds for k in m[t]})
    return {
        k: [statistics.fmean(m[t][k] for m in per_seed if k in m[t]) for t in rounds]
        for k in keys
        if all(k in m[t] for m in per_seed for t in rounds)
    }


def _summary(variant: str, curves: list[list[float]], val_curves: list[list[float]]) -> dict[str, Any]:
    """Per seed, the round with the best validation accuracy (the earliest on ties) is selected and
    its held-out accuracy reported, as the paper selects checkpoints on a validation set; the last
    round's too. ``oracle_mean`` (the best held-out round, chosen on the held-out set itself) is
    optimistic and only there to show by how much. Without a validation split (the hf backend)
    the last round is the one selected: nothing is chosen on the held-out set."""
    val_curves = val_curves or [[float(i == len(c) - 1) for i in range(len(c))] for c in curves]
    picked = [max(range(len(v)), key=v.__getitem__) for v in val_curves]
    selected = [c[i] for c, i in zip(curves, picked, strict=True)]
    final = [c[-1] for c in curves]
    oracle = [max(c) for c in curves]
    mean_val = [statistics.fmean(v) for v in zip(*val_curves, strict=True)]
    sd = statistics.pstdev
    return {
        "variant": variant,
        "selected_mean": statistics.fmean(selected),
        "selected_std": sd(selected),
        "selected_rounds": [i + 1 for i in picked],
        "final_mean": statistics.fmean(final),
        "final_std": sd(final),
        "oracle_mean": statistics.fmean(oracle),
        "oracle_std": sd(oracle),
        "best_round": 1 + max(range(len(mean_val)), key=mean_val.__getitem__),  # of the mean validation curve
        "curve": [statistics.fmean(v) for v in zip(*curves, strict=True)],
        "val_curve": mean_val,
    }


def cell_overrides(overrides: list[str], world: str, variant: str, seed: int, rounds: int) -> list[str]:
    """The config of one (world, variant, seed) cell: the command's overrides, the world's, the
    variant's, and the cell's seed, rounds and run id. Its checkpoints go where every reader of the
    log looks (the command's ``train.out_dir``, else the database's folder), not a folder of its own."""
    return [
        *overrides,
        *([] if world == CONFIGURED else WORLDS[world]),
        *VARIANTS[variant],
        f"train.seed={seed}",
        f"train.rounds={rounds}",
        f'train.run="{cell_run(world, variant, seed)}"',
    ]


def cell_run(world: str, variant: str, seed: int) -> str:
    return f"ablate/{world}/{variant}/s{seed}"


def train_cell(config: Path | None, overrides: list[str], db: str, rounds: int, run: str) -> None:
    """Train one cell to ``rounds`` (skipped when finished, resumed when stopped): what each
    process of ``--jobs`` runs, against the shared log."""
    cfg = load_config(config, overrides)
    with open_log(db) as store:
        if len(heldout_curve(store, run)) < rounds:
            train(cfg, store, TrainOptions(resume=run in store.runs(), rounds=rounds))


def train_cells_in_parallel(
    config: Path | None,
    cells: list[tuple[str, list[str]]],
    db: str,
    rounds: int,
    jobs: int,
    tick: Callable[[str, int, int | None], None],
) -> None:
    """Train (run, overrides) cells in ``jobs`` processes at once (each a cell at a time, its own
    connection to the log; a run's lease keeps two processes off one run). For a machine with
    more cores than one cell uses: the mini world's cells take one torch thread each."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_end_with_parent, initargs=(os.getpid(),)) as pool:
        futures = {pool.submit(train_cell, config, o, db, rounds, run): run for run, o in cells}
        for done, future in enumerate(as_completed(futures), 1):
            future.result()  # a cell's error is the command's
            tick(futures[future], done, len(cells))


def _end_with_parent(parent: int) -> None:
    """A cell's process ends when the command that started it does (Linux: the parent-death
    signal), so a stopped ``ablate --jobs`` leaves no cell training on in the background, holding
    its run's lease and a core, where the command run again would resume it. A command stopped
    while the cell was still starting is gone before the signal was asked for: then at once."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)


def run_ablation(
    config: Path | None,
    overrides: list[str],
    db: str,
    seeds: Sequence[int],
    rounds: int,
    variants: list[str],
    worlds: list[str],
    tick: Callable[[str, int, int | None], None],
    jobs: int = 1,
) -> dict[str, list[dict[str, Any]]]:
    """Run every (world, seed, variant); held-out and validation accuracy per round come from the log, the
    per-round dynamics (question length and diversity, skill coverage, lifecycle, pseudo-label
    accuracy on a shared set) from :mod:`diagevo.train.sim.dynamics`, stored back in the log (the
    simulator's alone: another backend has no validation split nor simulated world to measure).

    Each (world, variant, seed) is one run of the log: a finished one is skipped, a stopped one
    resumed where its log and checkpoints left it, so the command may be stopped at any moment
    and run again. With ``jobs`` > 1 the cells train in that many processes first, then are read.
    ``seeds`` names the cells' seeds, so an ablation can be run in parts (machines, sessions) whose
    cells are the ones the whole would train."""
    total = len(worlds) * len(variants) * len(seeds)
    done = 0
    reference = next((v for v in REFERENCES if v in variants), variants[0])
    results: dict[str, list[dict[str, Any]]] = {}
    command = load_config(config, overrides)
    sim = command.train.backend == "sim"
    if jobs > 1:
        cells = [
            (cell_run(w, v, s), cell_overrides(overrides, w, v, s, rounds))
            for w in worlds
            for s in seeds
            for v in variants
        ]
        train_cells_in_parallel(config, cells, db, rounds, jobs, tick)
    with open_log(db) as store:
        for world in worlds:
            curves: dict[str, list[list[float]]] = {v: [] for v in variants}
            val_curves: dict[str, list[list[float]]] = {v: [] for v in variants}
            dynamics: dict[str, list[dict[int, dict[str, float]]]] = {v: [] for v in variants}
            for seed in seeds:
                runs: dict[str, str] = {}
                ref_cfg = None
                for variant in variants:
                    run = cell_run(world, variant, seed)
                    tick(f"{world[:14]} | {variant} | seed {seed}", done, total)
                    cfg = load_config(config, cell_overrides(overrides, world, variant, seed, rounds))
                    curve = heldout_curve(store, run)
                    if len(curve) < rounds:  # a finished run is skipped, a stopped one resumed
                        train(cfg, store, TrainOptions(resume=run in store.runs(), rounds=rounds))
                        curve = heldout_curve(store, run)
                    curves[variant].append(curve)
                    if sim:
                        val_curves[variant].append(heldout_curve(store, run, "val"))
                    runs[variant] = run
                    if variant == reference:
                        ref_cfg = cfg
                    done += 1
                if not sim:
                    continue
                assert ref_cfg is not None  # the reference is one of the variants run
                measured = measure_seed(store, runs, reference, SimBackend(ref_cfg), seed, command.train.out_dir)
                for v, m in measured.items():
                    dynamics[v].append(m)
            results[world] = [
                {**_summary(v, curves[v], val_curves[v]), "dynamics": _mean_curves(dynamics[v]), "reference": reference}
                for v in variants
            ]
    tick("done", done, total)
    return results


def heldout_curve(store: Recorder, run: str, split: Literal["heldout", "val"] = "heldout") -> list[float]:
    """Held-out (or, ``val``, the validation split's) accuracy of every committed round."""
    commits = of_type(RoundCommitted, admitted_rows(store, run, types=(RoundCommitted,)))
    figures = ((c.heldout_acc if split == "heldout" else c.val_acc) for c in commits)
    return [float("nan") if x is None else float(x) for x in figures]
