"""Table 2 / Table 4 ablations on the simulator, under each world setting."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diagevo.config import load_config
from diagevo.events.store import EventStore

# variant name -> config overrides (Table 2 columns, then Table 4 fixed ratios)
VARIANTS: dict[str, list[str]] = {
    "full": [],
    "frozen challenger": ["memory.challenger_updates=false"],
    "pure free": ['memory.generation="free"'],
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
}


def _summary(variant: str, curves: list[list[float]]) -> dict[str, Any]:
    best = [max(c) for c in curves]
    final = [c[-1] for c in curves]
    mean_curve = [statistics.fmean(v) for v in zip(*curves, strict=True)]
    sd = statistics.pstdev
    return {
        "variant": variant,
        "best_mean": statistics.fmean(best),
        "best_std": sd(best),
        "final_mean": statistics.fmean(final),
        "final_std": sd(final),
        "best_round": 1 + max(range(len(mean_curve)), key=mean_curve.__getitem__),
        "curve": mean_curve,
    }


def run_ablation(
    config: Path | None,
    overrides: list[str],
    db: str,
    seeds: int,
    rounds: int,
    variants: list[str],
    worlds: list[str],
    tick: Callable[[str, int, int | None], None],
) -> dict[str, list[dict[str, Any]]]:
    """Run every (world, variant, seed); held-out accuracy per round comes from the log."""
    from diagevo.train import train

    total = len(worlds) * len(variants) * seeds
    done = 0
    results: dict[str, list[dict[str, Any]]] = {}
    with EventStore(db) as store:
        for world in worlds:
            rows = []
            for variant in variants:
                curves = []
                for seed in range(seeds):
                    run = f"ablate/{world}/{variant}/s{seed}"
                    tick(f"{world[:14]} | {variant} | seed {seed}", done, total)
                    cfg = load_config(
                        config,
                        [*overrides, *WORLDS[world], *VARIANTS[variant], f"train.seed={seed}", f"train.rounds={rounds}", f'train.run="{run}"', f'train.out_dir="{Path(db.removeprefix("sqlite:///")).parent / "ablate-ckpt"}"'],
                    )
                    train(cfg, store, resume=run in store.runs(), rounds=rounds)
                    curves.append(heldout_curve(store, run))
                    done += 1
                rows.append(_summary(variant, curves))
            results[world] = rows
    tick("done", done, total)
    return results


def heldout_curve(store: EventStore, run: str) -> list[float]:
    return [float(e.data["heldout_acc"]) for e in store.read(run, types=("round.committed",))]
