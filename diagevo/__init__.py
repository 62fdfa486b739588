"""diagevo: diagnosis-guided self-play around an event-sourced error-cause memory.

The public API, for a trainer that drives the memory itself and for anyone reading a log::

    import diagevo

    with diagevo.open_store("sqlite:///runs.db") as store:
        diagevo.start_run(store, "mine", diagevo.Config())
        rnd = diagevo.Round.open(store, "mine")          # round 1: M_0 and the config read once
        reqs = rnd.requests(8)                           # Eq. 1-2 schedule draws, with prompts
        scored = rnd.record([...Candidate...])           # votes, Eq. 3 filter: a Recorded
        rnd.promote()                                    # Eq. 5-6
        rnd.record_failures([...])                       # then Sec. 2.3 (rnd.next_step: what is next)
        diagevo.diagnose(rnd, llm_url="http://localhost:8000/v1", model="...")  # or diagnostician="heuristic"
        rnd.commit({"acc": 0.5})                         # M_1
        diagevo.stats(store, "mine").rounds              # `memory stats --json` is its .to_dict()

Results are typed (attributes, and ``to_dict()`` for JSON). Names are imported on first use, so
``import diagevo`` (and any ``diagevo.x`` submodule) stays cheap: a command that reads a log must
not load the trainer's modules. Errors a caller can fix derive from :class:`DiagevoError`, by what
to do (:mod:`diagevo.errors`).
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are for type checkers alone)
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "open_store": "diagevo.api",
    "parse_question": "diagevo.curriculum.prompts",
    "solver_messages": "diagevo.curriculum.prompts",
    "challenger_output_rewards": "diagevo.curriculum.reward",
    "solver_rewards": "diagevo.curriculum.reward",
    "export_dataset": "diagevo.dataset",
    "Diagnostician": "diagevo.diagnosis.interface",
    "DiagnosisSummary": "diagevo.diagnosis.pipeline",
    "Failure": "diagevo.catalog.failure",
    "diagnose": "diagevo.diagnosis.pipeline",
    "heuristic_diagnostician": "diagevo.diagnosis.tools",
    "llm_diagnostician": "diagevo.diagnosis.tools",
    "make_embedder": "diagevo.diagnosis.tools",
    "vector_index": "diagevo.diagnosis.tools",
    "BadInput": "diagevo.errors",
    "BadServer": "diagevo.errors",
    "Conflict": "diagevo.errors",
    "DiagevoError": "diagevo.errors",
    "DiagnosesFailed": "diagevo.errors",
    "EndpointUnreachable": "diagevo.errors",
    "NotFound": "diagevo.errors",
    "RetryLater": "diagevo.errors",
    "Unavailable": "diagevo.errors",
    "diff_runs": "diagevo.fork",
    "fork_run": "diagevo.fork",
    "Recorder": "diagevo.log",
    "beside_database": "diagevo.log.paths",
    "run_dir": "diagevo.log.paths",
    "schedule": "diagevo.memory.schedule",
    "Memory": "diagevo.memory.state",
    "Candidate": "diagevo.rounds",
    "Committed": "diagevo.rounds",
    "OutOfOrder": "diagevo.rounds",
    "Recorded": "diagevo.rounds",
    "Request": "diagevo.rounds",
    "Round": "diagevo.rounds",
    "Scored": "diagevo.rounds",
    "start_run": "diagevo.rounds",
    "Config": "diagevo.train.config",
    "load_config": "diagevo.train.config",
    "audit_labels": "diagevo.train.labels",
    "probe_label_accuracy": "diagevo.train.labels",
    "make_backend": "diagevo.train.run",
    "VectorIndex": "diagevo.views.index",
    "load_memory": "diagevo.views.memory",
    "show": "diagevo.views.queries",
    "stats": "diagevo.views.queries",
    "why": "diagevo.views.queries",
    "RunSummary": "diagevo.views.runs",
    "runs": "diagevo.views.runs",
    "verify_run": "diagevo.views.verify",
    "what_if": "diagevo.whatif",
}
"""Public name -> the module that defines it: the whole public API, each name in the reference
(TRL's ``_import_structure``, one name a row). The imports for type checkers at the end of this
file name the same (``tests/test_public_api.py`` compares them)."""

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    """``diagevo.NAME``, imported from its module on first use (then held here)."""
    if name == "__version__":
        return import_module("diagevo.api").version()  # type: ignore[no-any-return]
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'diagevo' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from diagevo.api import open_store
    from diagevo.catalog.failure import Failure
    from diagevo.curriculum.prompts import parse_question, solver_messages
    from diagevo.curriculum.reward import challenger_output_rewards, solver_rewards
    from diagevo.dataset import export_dataset
    from diagevo.diagnosis.interface import Diagnostician
    from diagevo.diagnosis.pipeline import DiagnosisSummary, diagnose
    from diagevo.diagnosis.tools import heuristic_diagnostician, llm_diagnostician, make_embedder, vector_index
    from diagevo.errors import (
        BadInput,
        BadServer,
        Conflict,
        DiagevoError,
        DiagnosesFailed,
        EndpointUnreachable,
        NotFound,
        RetryLater,
        Unavailable,
    )
    from diagevo.fork import diff_runs, fork_run
    from diagevo.log import Recorder
    from diagevo.log.paths import beside_database, run_dir
    from diagevo.memory.schedule import schedule
    from diagevo.memory.state import Memory
    from diagevo.rounds import Candidate, Committed, OutOfOrder, Recorded, Request, Round, Scored, start_run
    from diagevo.train.config import Config, load_config
    from diagevo.train.labels import audit_labels, probe_label_accuracy
    from diagevo.train.run import make_backend
    from diagevo.views.index import VectorIndex
    from diagevo.views.memory import load_memory
    from diagevo.views.queries import show, stats, why
    from diagevo.views.runs import RunSummary, runs
    from diagevo.views.verify import verify_run
    from diagevo.whatif import what_if
