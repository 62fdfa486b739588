"""The run report: one self-contained, offline HTML file drawn from a run's log alone
(``diagevo report``), and the figures it shares with ``memory plot -o``."""

from __future__ import annotations

from collections.abc import Callable

from diagevo.log import Recorder
from diagevo.report.compare import Compared, comparison_page, load_runs
from diagevo.report.data import RunData, load_run
from diagevo.report.html import page_html, render


def report_html(store: Recorder, run: str, db_url: str, command: Callable[..., str]) -> tuple[RunData, str]:
    """Read ``run`` and render its report: the data and the page (the caller writes it: a file,
    atomically, or standard output). ``command(*args)`` spells a diagevo command for the report."""
    data = load_run(store, run)
    return data, render(data, db_url, command)


def comparison_html(
    store: Recorder, runs: list[str], db_url: str, command: Callable[[str], str]
) -> tuple[Compared, str]:
    """Read ``runs`` and render their comparison (:mod:`diagevo.report.compare`): the data and
    the page. ``command(run)`` spells the single-run report command of a run."""
    data = load_runs(store, runs)
    return data, page_html("compare.html", comparison_page(data, db_url, command))


__all__ = ["Compared", "RunData", "comparison_html", "load_run", "report_html"]
