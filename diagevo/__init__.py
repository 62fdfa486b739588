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
``import diagevo`` (and any ``diagevo.x`` submodule) stays cheap. Errors a caller can fix derive
from :class:`DiagevoError`, by what to do: :class:`RetryLater` (an endpoint down, a busy run: the
same call later), :class:`BadServer` (a server answering wrongly), :class:`BadInput` (the call:
a type, a value, the order of the steps), :class:`Unavailable` (the machine).
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are the exports, for type checkers)
from __future__ import annotations

from importlib import import_module
from types import FunctionType
from typing import TYPE_CHECKING, Any

# public name -> module that defines it: the whole public API, each name in the reference
_EXPORTS: dict[str, str] = {
    # the store and the config
    "open_store": "diagevo.api",
    "Recorder": "diagevo.log",
    "Config": "diagevo.train.config",
    "load_config": "diagevo.train.config",
    # the round protocol (each step a method of Round)
    "start_run": "diagevo.rounds",
    "Round": "diagevo.rounds",
    "Request": "diagevo.rounds",
    "Candidate": "diagevo.rounds",
    "Scored": "diagevo.rounds",
    "Recorded": "diagevo.rounds",
    "Committed": "diagevo.results.rounds",
    # diagnosis (Sec. 2.3)
    "diagnose": "diagevo.diagnosis.pipeline",
    "FailureInput": "diagevo.diagnosis.pipeline",
    "DiagnosisSummary": "diagevo.diagnosis.pipeline",
    "Diagnostician": "diagevo.diagnosis.interface",
    "VectorIndex": "diagevo.views.index",
    "llm_diagnostician": "diagevo.diagnosis.tools",
    "heuristic_diagnostician": "diagevo.diagnosis.tools",
    "make_embedder": "diagevo.diagnosis.tools",
    "vector_index": "diagevo.diagnosis.tools",
    # state and schedule
    "Memory": "diagevo.memory.state",
    "load_memory": "diagevo.views.memory",
    "schedule": "diagevo.memory.schedule",
    "verify_run": "diagevo.views.verify",
    # the read commands as typed values (``to_dict()``: what ``--json`` prints)
    "runs": "diagevo.views.runs",
    "RunSummary": "diagevo.views.runs",
    "stats": "diagevo.views.queries",
    "show": "diagevo.views.queries",
    "why": "diagevo.views.queries",
    # what-if
    "fork_run": "diagevo.fork",
    "diff_runs": "diagevo.fork",
    "what_if": "diagevo.whatif",
    # a run as a dataset
    "export_dataset": "diagevo.dataset",
    # a backend and where its files go, for a trainer built on diagevo's models
    "make_backend": "diagevo.train",
    "run_dir": "diagevo.log.paths",
    "beside_database": "diagevo.log.paths",
    # what a reward function needs (Sec. 2.2, Appendix C and J)
    "solver_rewards": "diagevo.curriculum.reward",
    "challenger_output_rewards": "diagevo.curriculum.reward",
    "solver_messages": "diagevo.curriculum.prompts",
    "parse_question": "diagevo.curriculum.prompts",
    # errors a caller can fix, by what to do (diagevo.errors): the root, then retry later, fix the
    # server, fix the call, fix the machine
    "DiagevoError": "diagevo.errors",
    "RetryLater": "diagevo.errors",
    "EndpointUnreachable": "diagevo.errors",
    "Conflict": "diagevo.errors",
    "DiagnosesFailed": "diagevo.errors",
    "BadServer": "diagevo.errors",
    "BadInput": "diagevo.errors",
    "OutOfOrder": "diagevo.rounds",
    "NotFound": "diagevo.errors",
    "Unavailable": "diagevo.errors",
}

# the types the public names return or take, documented in the reference beside them (reached as
# attributes and annotations, imported from their modules when a caller names them)
_DOCUMENTED_TYPES: dict[str, str] = {
    "FailureRecord": "diagevo.rounds",
    "Promotion": "diagevo.results.rounds",
    "MemoryView": "diagevo.results.memory",
    "CurrentMemory": "diagevo.results.memory",
    "CauseRow": "diagevo.results.memory",
    "NodeRow": "diagevo.results.memory",
    "RunStats": "diagevo.results.stats",
    "CauseStory": "diagevo.results.stories",
    "Lifecycle": "diagevo.results.stats",
    "RunDiff": "diagevo.results.runs",
    "Fork": "diagevo.results.runs",
}

# the members of an exported class that a caller uses (the others serve diagevo's own modules):
# the reference shows these alone
_PUBLIC_MEMBERS: dict[str, tuple[str, ...]] = {
    "Recorder": ("url", "runs", "has_run", "close"),
    "VectorIndex": ("path", "sync"),
    "Round": (
        "open",
        "reopened",
        "next_step",
        "current",
        "t",
        "run",
        "config",
        "requests",
        "record",
        "questions",
        "promote",
        "record_failures",
        "record_metrics",
        "note",
        "commit",
    ),
}

# the public modules beside the names above, for what another program loads by the module's name
# (verl loads its reward functions from ``pkg://diagevo.verl``): each documented in the reference
# with the names of its ``__all__``
_PUBLIC_MODULES: tuple[str, ...] = ("diagevo.verl",)

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return import_module("diagevo.api").version()  # type: ignore[no-any-return]
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'diagevo' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    if isinstance(value, FunctionType):  # a wrong argument type is BadInput naming the argument, at this boundary
        value = import_module("diagevo.arguments").checked(value)
        value.__module__, value.__qualname__ = __name__, name  # pickled as diagevo.NAME: this wrapper
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from diagevo.api import open_store
    from diagevo.catalog import events
    from diagevo.curriculum.prompts import parse_question, solver_messages
    from diagevo.curriculum.reward import challenger_output_rewards, solver_rewards
    from diagevo.dataset import export_dataset
    from diagevo.diagnosis.interface import Diagnostician
    from diagevo.diagnosis.pipeline import DiagnosisSummary, FailureInput, diagnose
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
    from diagevo.results.rounds import Committed
    from diagevo.rounds import Candidate, OutOfOrder, Recorded, Request, Round, Scored, start_run
    from diagevo.train import make_backend
    from diagevo.train.config import Config, load_config
    from diagevo.views.index import VectorIndex
    from diagevo.views.memory import load_memory
    from diagevo.views.queries import show, stats, why
    from diagevo.views.runs import RunSummary, runs
    from diagevo.views.verify import verify_run
    from diagevo.whatif import what_if
