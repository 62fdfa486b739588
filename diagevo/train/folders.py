"""The folders a training run writes into, checked before it writes its first event.

A run writes checkpoints under ``runs/<run>/``, the vector index under ``index.lance/``, its lease
under ``leases/`` and, with ``train.report_to``, TensorBoard files under ``tb/<run>/`` or MLflow's
under ``mlruns/`` (all in the database's folder, or ``train.out_dir`` / ``train.tracker_dir``).
A link planted there, or a file or FIFO where a folder belongs, would otherwise be met half way
through a round, after events were written, or followed outside the folder
(:mod:`diagevo.files.confined`): here it is refused first, in one line.
"""

from __future__ import annotations

import os
from pathlib import Path

from diagevo.files.confined import no_links_below, owned_dir
from diagevo.log.paths import beside_database, run_name
from diagevo.train.config import Config


def checkpoint_root(config: Config, db_url: str, *, move: bool = True) -> Path:
    """Where a run's checkpoints go: ``train.out_dir``, else beside the database (``move=False``:
    an earlier layout is only named, not moved here, as a preflight and a dry run change nothing)."""
    return Path(config.train.out_dir or beside_database(db_url, ".runs", move=move))


def tracker_root(config: Config, db_url: str) -> Path:
    """Where TensorBoard's files go: ``train.tracker_dir``, else beside the database."""
    return Path(config.train.tracker_dir or beside_database(db_url, ".tb"))


def check_folders(config: Config, db_url: str, run: str) -> None:
    """Refuse (:class:`diagevo.files.confined.OutsideFolder`) a link, or something that is not a
    folder, where the run ``run`` would write; creates nothing but the database's folder parts."""
    no_links_below(owned_dir(checkpoint_root(config, db_url), run_name(run), create=False), depth=2)
    no_links_below(beside_database(db_url, ".lance"), depth=2)
    beside_database(db_url, ".leases")  # the lease file itself is checked as it is taken
    if config.train.report_to == "tensorboard":
        no_links_below(owned_dir(tracker_root(config, db_url), run_name(run), create=False), depth=3)
    elif config.train.report_to == "mlflow" and not os.environ.get("MLFLOW_TRACKING_URI"):
        no_links_below(beside_database(db_url, ".mlruns"), depth=2)
