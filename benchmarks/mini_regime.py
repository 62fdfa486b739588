"""The mini world's ablation cells, in an order fixed before any result, trained a few at a time and
gathered into a cells file after each part: an ablation of many hours outlives the session (or
machine) that runs it, and this script, run again anywhere the pair builds the same, trains only the
cells the cells file and the log do not hold finished.

    python benchmarks/mini_regime.py --pair models/mini-regime --steps 2400 \\
        --carried benchmarks/data/mini-regime-pair.tar.gz \\
        --out ablation/mini-regime.db --cells docs/data/mini-regime-cells.json
    python benchmarks/mini_regime.py --pair models/mini --out ablation/mini.db \\
        --cells docs/data/mini-ablation-cells.json --arm "shared-error check" --seeds 5

Without ``--arm`` the order is the paper's label regime's (docs/how-to/mini-world.md): for each seed
in turn, the primary outcome's two arms (full DiagEvo, no memory), Figure 3(c)'s other two settings
(pure free with the absolute constraint only, for the first three seeds; the memory with it), the
oracle (the precondition), the frozen challenger, and the shared-error check. Every cell trains
straight to ``--rounds``: a cell first trained to fewer rounds and resumed is another protocol, since
the solver's rate decays over the rounds its run was started for (``solver.lr_span = "run"``).

The pair is built where it is absent (``--steps``), or, with ``--carried``, unpacked from the archive
of the pair the cells file's cells started from: ``diagevo models mini`` builds another pair on an
Intel processor than on an AMD one (docs/how-to/mini-world.md), and a cells file refuses rounds of
another pair, so the pair travels with its cells.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

from diagevo.train.ablate import VARIANTS

ROOT = Path(__file__).resolve().parents[1]
DIAGEVO = [sys.executable, "-c", "import sys; from diagevo.cli.app import main; sys.exit(main())"]
ORDER = (
    "full",
    "pure free",
    "pure free, absolute only",
    "absolute only",
    "oracle",
    "frozen challenger",
    "shared-error check",
)
FIGURE_3C_SEEDS = 3  # Figure 3(c)'s baseline setting runs on the first three seeds only


def _table():  # noqa: ANN202 (the sibling script, imported from its path)
    spec = importlib.util.spec_from_file_location("ablation_table", ROOT / "benchmarks" / "ablation_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def cells(arms: list[str], seeds: int) -> list[tuple[int, str]]:
    """(seed, arm) in the order they train: seed by seed, arms in ``arms``' order."""
    return [
        (s, a) for s in range(seeds) for a in arms if not (a == "pure free, absolute only" and s >= FIGURE_3C_SEEDS)
    ]


def finished(cells_file: Path, db: Path, pair: Path, rounds: int) -> set[tuple[int, str]]:
    """The (seed, arm) cells the log or the cells file holds to ``rounds``."""
    return {cell for cell, last in reached(cells_file, db, pair).items() if last >= rounds}


def reached(cells_file: Path, db: Path, pair: Path) -> dict[tuple[int, str], int]:
    """(seed, arm) -> the last round the log or the cells file holds of it."""
    table = _table()
    start = table.pair_accuracy(str(pair))[1]
    rows = table.read_rounds([f"sqlite:///{db}"]) if db.is_file() else []
    if cells_file.is_file():
        rows = table.merged(rows, table.load_cells(str(cells_file), start))
    out: dict[tuple[int, str], int] = {}
    for r in rows:
        out[(r.seed, r.arm)] = max(out.get((r.seed, r.arm), 0), r.round)
    return out


def gather(cells_file: Path, db: Path, pair: Path) -> None:
    """Every finished round of the log's cells and the file's, back into the cells file."""
    table = _table()
    start = table.pair_accuracy(str(pair))[1]
    rows = table.read_rounds([f"sqlite:///{db}"]) if db.is_file() else []
    if cells_file.is_file():
        rows = table.merged(rows, table.load_cells(str(cells_file), start))
    table.save_cells(str(cells_file), rows, start)


def train(
    pair: Path, db: Path, batch: list[tuple[int, str]], rounds: int, config: str, stop_after: int | None = None
) -> None:
    """Each (seed, arm) cell of ``batch`` in a ``diagevo ablate`` process of its own, all at once
    against the one log (a run's lease keeps two processes off one cell); an error of any is the
    script's, once the others have finished. ``stop_after``: each cell trained only to that round
    of its ``rounds``-round protocol (``diagevo train --rounds``, the cell's own run and config),
    so that a later part resumes it as one run of ``rounds``."""
    models = [f'challenger.model="{pair / "challenger"}"', f'solver.model="{pair / "solver"}"']
    running = []
    for seed, arm in batch:
        cmd = [*DIAGEVO, "ablate", "--config", config, "--rounds", str(rounds), "--out", str(db)]
        if stop_after is not None:
            cmd = [*DIAGEVO, "train", "--config", config, "--rounds", str(stop_after), "--db", f"sqlite:///{db}"]
            cmd += ["--quiet", "--run", f"ablate/as configured/{arm}/s{seed}"]
            cmd += [x for o in [*VARIANTS[arm], f"train.rounds={rounds}"] for x in ("--set", o)]
            arm_args: list[str] = ["--seed", str(seed)]
        else:
            arm_args = ["--seed", str(seed), "--variant", arm]
        cmd += [x for m in models for x in ("--set", m)] + arm_args
        print("diagevo " + " ".join(json.dumps(c) if " " in c else c for c in cmd[len(DIAGEVO) :]), flush=True)
        running.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL))
    failed = [p.args for p in running if p.wait() != 0]
    if failed:
        raise SystemExit(f"{len(failed)} cell(s) failed: {failed}")


def unpack(archive: Path, pair: Path) -> None:
    """The carried pair's one folder, unpacked as ``pair`` (plain files and folders only)."""
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        tops = {Path(m.name).parts[0] for m in members}
        if len(tops) != 1 or any(not (m.isfile() or m.isdir()) or ".." in Path(m.name).parts for m in members):
            raise SystemExit(f"{archive}: not one folder of plain files")
        pair.parent.mkdir(parents=True, exist_ok=True)
        tar.extractall(pair.parent, filter="data")
    (pair.parent / tops.pop()).rename(pair)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", type=Path, required=True, help="the pair's directory (built with --steps if absent)")
    ap.add_argument("--steps", type=int, help="diagevo models mini --steps, to build the pair where it is absent")
    ap.add_argument("--carried", type=Path, help="a .tar.gz of the pair (one folder), unpacked where it is absent")
    ap.add_argument("--out", type=Path, required=True, help="the ablation's SQLite log")
    ap.add_argument("--cells", type=Path, required=True, help="the cells file (read, then written after each part)")
    ap.add_argument("--arm", action="append", help="only these arms (default: every arm, in ORDER)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--config", default=str(ROOT / "configs" / "mini-cpu.toml"))
    ap.add_argument(
        "--stop-after", type=int, help="train each cell only to this round of its --rounds protocol (a screen)"
    )
    args = ap.parse_args()
    if not (args.pair / "mini.json").is_file() and args.carried:
        unpack(args.carried, args.pair)
    if not (args.pair / "mini.json").is_file():
        steps = ["--steps", str(args.steps)] if args.steps else []
        subprocess.run([*DIAGEVO, "models", "mini", *steps, "--out", str(args.pair)], check=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    todo = cells(args.arm or list(ORDER), args.seeds)
    done = reached(args.cells, args.out, args.pair)
    target = args.stop_after or args.rounds
    missing = [cell for cell in todo if done.get(cell, 0) < target]
    for i in range(0, len(missing), args.jobs):  # the next JOBS cells in the order, whatever their seeds
        train(args.pair, args.out, missing[i : i + args.jobs], args.rounds, args.config, args.stop_after)
        gather(args.cells, args.out, args.pair)


if __name__ == "__main__":
    main()
