"""The views' saved states brought up to date after a write: the memory's snapshots and the
statistics. Both are caches, always rebuildable from the log."""

from __future__ import annotations

from diagevo.log import Recorder, StoreError
from diagevo.runtime.progress import library_logger
from diagevo.views.memory import save_snapshots
from diagevo.views.stats import refresh_stats

log = library_logger("diagevo.cache")


def refresh(store: Recorder, run: str) -> int:
    """After a write: save a snapshot of every committed round that has none yet, and move the
    statistics on; returns how many snapshots were saved.

    This runs after the events committed, so a failed read or write here (a role without the
    privilege, a dropped connection, a full disk) is logged as a warning on the ``diagevo.cache``
    logger and swallowed; any later reader folds the log instead."""
    try:
        written = save_snapshots(store, run)
        refresh_stats(store, run)
    except StoreError as exc:
        log.warning("views of run %r not saved (a cache: readers fold the log instead): %s", run, exc)
        return 0
    return written
