"""The folders a training run writes into, decided once and checked before it writes its first event.

A run writes checkpoints under ``runs/<run>/``, the vector index under ``index.lance/``, its lease
under ``leases/`` and, with ``train.report_to``, TensorBoard files under ``tb/<run>/`` or MLflow's
under ``mlruns/`` (all in the database's folder, or ``train.out_dir`` / ``train.tracker_dir``).
Where they lie is the machine's: the command's config and its database decide them, never a
config the log stores (:class:`RunFolders`, made once by :func:`~diagevo.train.run.train` and
handed to the preflight, the trainer and its tracker). A link planted there, or a file or FIFO
where a folder belongs, would otherwise be met half way through a round, after events were
written, or followed outside the folder (:mod:`diagevo.files.confined`): here it is refused
first, in one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from diagevo.files.confined import no_links_below, owned_dir
from diagevo.log.paths import beside_database, run_name
from diagevo.train.config import Config


@dataclass(frozen=True)
class RunFolders:
    """Where the runs of one database write on this machine: ``checkpoints`` (``train.out_dir``,
    else beside the database), ``tracker`` (TensorBoard's, ``train.tracker_dir``, else beside
    the database), ``mlruns`` (MLflow's, beside the database), ``index`` (the vector index) and
    ``leases`` (the writers' leases: each file is checked as it is taken)."""

    checkpoints: Path
    tracker: Path
    mlruns: Path
    index: Path
    leases: Path

    @classmethod
    def of(cls, config: Config, db_url: str, *, move: bool = True) -> RunFolders:
        """The folders of ``config`` (the command's) and the database at ``db_url``; ``move=False``:
        an earlier layout is only named, not moved here, as a preflight and a dry run change nothing."""
        return cls(
            checkpoints=checkpoint_root(config, db_url, move=move),
            tracker=Path(config.train.tracker_dir or beside_database(db_url, ".tb", move=move)),
            mlruns=Path(beside_database(db_url, ".mlruns", move=move)),
            index=Path(beside_database(db_url, ".lance", move=move)),
            leases=Path(beside_database(db_url, ".leases", move=move)),
        )

    def check(self, config: Config, run: str) -> None:
        """Refuse (:class:`diagevo.files.confined.OutsideFolder`) a link, or something that is not
        a folder, where ``run`` would write; creates nothing."""
        no_links_below(owned_dir(self.checkpoints, run_name(run), create=False), depth=2)
        no_links_below(self.index, depth=2)
        if config.train.report_to == "tensorboard":
            no_links_below(owned_dir(self.tracker, run_name(run), create=False), depth=3)
        elif config.train.report_to == "mlflow" and not os.environ.get("MLFLOW_TRACKING_URI"):
            no_links_below(self.mlruns, depth=2)


def checkpoint_root(config: Config, db_url: str, *, move: bool = True) -> Path:
    """Where a run's checkpoints go: ``train.out_dir``, else beside the database (``move=False``:
    an earlier layout is only named, not moved here)."""
    return Path(config.train.out_dir or beside_database(db_url, ".runs", move=move))
