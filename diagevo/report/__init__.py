"""The run report: one self-contained, offline HTML file drawn from a run's log alone
(``diagevo report``), and the figures it shares with ``memory plot -o``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Self

from diagevo.files.written import write_replacing
from diagevo.log import Recorder
from diagevo.report.compare import Compared, comparison_page, load_runs
from diagevo.report.data import RunData, load_run
from diagevo.report.html import page_html, render


@dataclass(frozen=True, kw_only=True)
class Page:
    """A rendered report: its HTML and, once :meth:`write` has put it in a file, the file's path
    and size."""

    html: str
    path: str | None = None
    size: int | None = None

    def write(self, out: Path) -> Self:
        """The page written to ``out`` atomically (a reader never sees half a page)."""
        write_replacing(out, self.html)
        return replace(self, path=str(out), size=out.stat().st_size)


@dataclass(frozen=True, kw_only=True)
class RunReport(Page):
    """A run's report (``report --json``, once written): the run, its committed rounds, and how
    many causes its stories tell."""

    run: str
    rounds: tuple[int, ...]
    causes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "path": self.path,
            "bytes": self.size,
            "rounds": list(self.rounds),
            "causes": self.causes,
        }


@dataclass(frozen=True, kw_only=True)
class Comparison(Page):
    """Runs side by side (``report --run A --run B --json``, once written): the runs in the order
    given, each one's committed rounds, and the metric columns."""

    runs: tuple[str, ...]
    rounds: Mapping[str, tuple[int, ...]]
    metrics: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": list(self.runs),
            "path": self.path,
            "bytes": self.size,
            "rounds": {run: list(rounds) for run, rounds in self.rounds.items()},
            "metrics": list(self.metrics),
        }


def report_html(store: Recorder, run: str, db_url: str, command: Callable[..., str]) -> RunReport:
    """Read ``run`` and render its report (the caller writes it: :meth:`Page.write`, or standard
    output). ``command(*args)`` spells a diagevo command for the report."""
    data = load_run(store, run)
    return RunReport(
        html=render(data, db_url, command), run=run, rounds=tuple(data.committed), causes=len(data.stories)
    )


def comparison_html(store: Recorder, runs: list[str], db_url: str, command: Callable[[str], str]) -> Comparison:
    """Read ``runs`` and render their comparison (:mod:`diagevo.report.compare`). ``command(run)``
    spells the single-run report command of a run."""
    data = load_runs(store, runs)
    return Comparison(
        html=page_html("compare.html", comparison_page(data, db_url, command)),
        runs=tuple(data.runs),
        rounds={run: tuple(row.round for row in data.rounds[run]) for run in data.runs},
        metrics=tuple(data.metrics),
    )


__all__ = ["Compared", "Comparison", "Page", "RunData", "RunReport", "comparison_html", "load_run", "report_html"]
