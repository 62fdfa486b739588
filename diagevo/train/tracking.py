"""The experiment trackers people use (``train.report_to``: tensorboard, wandb, trackio, mlflow).

TRL gets the same ``report_to`` (its own per-step rows, under its own names). diagevo mirrors to the
same tracker, under the run id as the tracker's run name:

- at the end of each GRPO phase, each step's signals of the log's ``train.step`` as
  ``ROLE/FIELD`` at the role's global step (the step over all rounds, so a curve runs across
  rounds, challenger and solver apart);
- at each commit, the round's figures (``memory stats``'s columns: Active, Mastered, F_t, ε_t+1,
  what the round did, held-out accuracy and every metric by name) as ``round/NAME`` at step t.

Offline where the tracker has an offline mode: TensorBoard writes event files beside the
database (``dir/x.db`` -> ``dir/x.diagevo/tb/<run>/``; TRL's own rows of each phase in
``dir/x.diagevo/tb/<run>/trl/roundNNN-ROLE/``); W&B runs offline unless ``WANDB_MODE`` says otherwise;
MLflow writes to ``dir/x.diagevo/mlruns`` unless ``MLFLOW_TRACKING_URI`` is set; trackio is local. Only
the TensorBoard path is exercised by the tests (with TensorBoard's own reader); the others are
passed through as their libraries document them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from diagevo.log.paths import run_name
from diagevo.train.config import Config
from diagevo.train.folders import RunFolders

PROJECT = "diagevo"  # the project name of W&B and trackio (WANDB_PROJECT / TRACKIO_PROJECT override)


class Tracker:
    """One tracker run, named by the run id: ``log`` a set of scalars at a step; ``phase`` the
    context of one GRPO phase (where TRL's own rows of it go)."""

    def log(self, values: Mapping[str, float], step: int) -> None:
        """Scalars at ``step``."""

    @contextmanager
    def phase(self, t: int, role: str) -> Iterator[None]:
        yield

    def close(self) -> None:
        """Flush and end the tracker's run."""


class TensorBoard(Tracker):
    def __init__(self, directory: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.directory = directory
        self.writer = SummaryWriter(log_dir=str(directory))

    def log(self, values: Mapping[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    @contextmanager
    def phase(self, t: int, role: str) -> Iterator[None]:
        """TRL's TensorBoard rows of this phase in their own directory (its steps start at 1 in
        each phase): transformers reads ``TENSORBOARD_LOGGING_DIR``."""
        before = os.environ.get("TENSORBOARD_LOGGING_DIR")
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(self.directory / "trl" / f"round{t:03d}-{role}")
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("TENSORBOARD_LOGGING_DIR", None)
            else:
                os.environ["TENSORBOARD_LOGGING_DIR"] = before

    def close(self) -> None:
        self.writer.close()


class WandbLike(Tracker):
    """W&B and trackio (one API): each series is plotted against its own axis (``round``, or
    ``ROLE/global_step``), since their step must only grow."""

    def __init__(self, name: str, run: str) -> None:
        if name == "wandb":
            import wandb

            os.environ.setdefault("WANDB_MODE", "offline")
            self.module: Any = wandb
            wandb.init(project=os.environ.get("WANDB_PROJECT", PROJECT), name=run, reinit=True)
        else:
            import trackio

            self.module = trackio
            trackio.init(project=os.environ.get("TRACKIO_PROJECT", PROJECT), name=run)

    def log(self, values: Mapping[str, float], step: int) -> None:
        axis = "round" if all(k.startswith("round/") for k in values) else next(iter(values)).split("/")[0] + "/step"
        self.module.log({**values, axis: step})

    def close(self) -> None:
        self.module.finish()


class MLflow(Tracker):
    def __init__(self, run: str, directory: Path) -> None:
        import mlflow

        if not os.environ.get("MLFLOW_TRACKING_URI"):
            mlflow.set_tracking_uri(directory.resolve().as_uri())
        self.mlflow = mlflow
        mlflow.start_run(run_name=run)

    def log(self, values: Mapping[str, float], step: int) -> None:
        self.mlflow.log_metrics(dict(values), step=step)

    def close(self) -> None:
        self.mlflow.end_run()


def open_tracker(cfg: Config, run: str, folders: RunFolders) -> Tracker:
    """The tracker ``train.report_to`` names for ``run`` (``none``: one that records nothing),
    writing where ``folders`` say."""
    kind = cfg.train.report_to
    if kind == "tensorboard":
        return TensorBoard(folders.tracker / run_name(run))
    if kind in ("wandb", "trackio"):
        return WandbLike(kind, run)
    if kind == "mlflow":
        return MLflow(run, folders.mlruns)
    return Tracker()
