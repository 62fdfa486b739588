"""The run report: one self-contained, offline HTML file drawn from a run's log alone
(``diagevo report``), and the figures it shares with ``memory plot -o``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from diagevo.log import EventStore
from diagevo.report.data import RunData, load_run


def write_report(store: EventStore, run: str, out: Path, db_url: str, command: Callable[..., str]) -> RunData:
    """Read ``run`` and write its report to ``out`` (atomically, through a new temporary file:
    :func:`diagevo.files.replaced`). ``command(*args)`` spells a diagevo command for the report."""
    from diagevo.files import write_replacing
    from diagevo.report.html import render

    data = load_run(store, run)
    write_replacing(out, render(data, db_url, command))
    return data


__all__ = ["RunData", "load_run", "write_report"]
