"""The run report: one self-contained, offline HTML file drawn from a run's log alone
(``diagevo report``), and the figures it shares with ``memory plot -o``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from diagevo.log import EventStore
from diagevo.report.compare import Compared
from diagevo.report.data import RunData, load_run


def write_report(store: EventStore, run: str, out: Path, db_url: str, command: Callable[..., str]) -> RunData:
    """Read ``run`` and write its report to ``out`` (atomically, through a new temporary file:
    :func:`diagevo.files.replaced`). ``command(*args)`` spells a diagevo command for the report."""
    from diagevo.files import write_replacing
    from diagevo.report.html import render

    data = load_run(store, run)
    write_replacing(out, render(data, db_url, command))
    return data


def write_comparison(
    store: EventStore, runs: list[str], out: Path, db_url: str, command: Callable[[str], str]
) -> Compared:
    """Read ``runs`` and write their comparison (:mod:`diagevo.report.compare`) to ``out``
    atomically. ``command(run)`` spells the single-run report command of a run."""
    from diagevo.files import write_replacing
    from diagevo.report.compare import load_runs, render_comparison

    data = load_runs(store, runs)
    write_replacing(out, render_comparison(data, db_url, command))
    return data


__all__ = ["Compared", "RunData", "load_run", "write_comparison", "write_report"]
