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
from :class:`DiagevoError`, by what to do (:mod:`diagevo.errors`).
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are the exports, read by _exports)
from __future__ import annotations

import ast
from functools import cache
from importlib import import_module
from pathlib import Path
from types import FunctionType
from typing import TYPE_CHECKING, Any

# the types the public names return or take, documented in the reference beside them (reached as
# attributes and annotations, imported from their modules when a caller names them)
_DOCUMENTED_TYPES: dict[str, str] = {
    "FailureRecord": "diagevo.rounds",
    "CausePromoted": "diagevo.catalog",
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


@cache
def _exports() -> dict[str, str]:
    """Public name -> the module that defines it: the whole public API, each name in the reference,
    read from the imports for type checkers at the end of this file (one list: what a type checker
    sees is what ``diagevo.NAME`` loads; scientific-python's lazy_loader reads a stub alike)."""
    source = Path(__file__).read_text(encoding="utf-8")
    block = ast.parse(source[source.index("\nif TYPE_CHECKING:") + 1 :]).body[0]
    assert isinstance(block, ast.If)
    return {
        alias.name: str(node.module) for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return import_module("diagevo.api").version()  # type: ignore[no-any-return]
    if name == "_EXPORTS":
        return _exports()
    if name == "__all__":
        return sorted([*_exports(), "__version__"])
    module = _exports().get(name)
    if module is None:
        raise AttributeError(f"module 'diagevo' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    if isinstance(value, FunctionType):  # a wrong argument type is BadInput naming the argument, at this boundary
        value = import_module("diagevo.arguments").checked(value)
        value.__module__, value.__qualname__ = __name__, name  # pickled as diagevo.NAME: this wrapper
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | {*_exports(), "__version__"})


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from diagevo.api import open_store
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
    from diagevo.rounds import Candidate, Committed, OutOfOrder, Recorded, Request, Round, Scored, start_run
    from diagevo.train.config import Config, load_config
    from diagevo.train.labels import audit_labels
    from diagevo.train.run import make_backend
    from diagevo.views.index import VectorIndex
    from diagevo.views.memory import load_memory
    from diagevo.views.queries import show, stats, why
    from diagevo.views.runs import RunSummary, runs
    from diagevo.views.verify import verify_run
    from diagevo.whatif import what_if
