"""diagevo: diagnosis-guided self-play around an event-sourced error-cause memory.

The public API, for a trainer that drives the memory itself and for anyone reading a log::

    import diagevo

    with diagevo.open_store("sqlite:///runs.db") as store:
        diagevo.start_run(store, "mine", diagevo.Config())
        rnd = diagevo.Round.open(store, "mine")          # round 1: M_0 and the config read once
        reqs = rnd.requests(8)                           # Eq. 1-2 schedule draws, with prompts
        scored = rnd.record([...Candidate...])           # votes, Eq. 3 filter: a Recorded
        rnd.promote()                                    # Eq. 5-6
        rnd.record_failures([...])                       # then Sec. 2.3:
        diagevo.diagnose(rnd, llm_url="http://localhost:8000/v1", model="...")  # or diagnostician="heuristic"
        rnd.commit({"acc": 0.5})                         # M_1
        diagevo.stats(store, "mine")                     # what `diagevo memory stats --json` prints

Names that are also submodules (``diagevo.train``) stay the submodules.
Names are imported on first use, so ``import diagevo`` (and any ``diagevo.x`` submodule) stays
cheap. Errors a caller can fix derive from :class:`DiagevoError`.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are the exports, for type checkers)
from __future__ import annotations

import logging
from importlib import import_module
from typing import TYPE_CHECKING, Any

# the library logs (e.g. a cache write that failed after the events committed, on
# ``diagevo.cache``) and never prints: without a handler of the application's, nothing shows
logging.getLogger("diagevo").addHandler(logging.NullHandler())

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # the store
    "EventStore": "diagevo.log",
    "open_store": "diagevo.api",
    # configuration
    "Config": "diagevo.train.config",
    "load_config": "diagevo.train.config",
    # the round protocol
    "Round": "diagevo.rounds",
    "RoundState": "diagevo.rounds",
    "Request": "diagevo.rounds",
    "Candidate": "diagevo.rounds",
    "Scored": "diagevo.rounds",
    "start_run": "diagevo.rounds",
    "open_round": "diagevo.rounds",
    "round_state": "diagevo.rounds",
    "run_config": "diagevo.rounds",
    "failure_inputs": "diagevo.diagnosis.pipeline",
    "diagnose": "diagevo.diagnosis.pipeline",
    "FailureInput": "diagevo.diagnosis.pipeline",
    "DiagnosisSummary": "diagevo.diagnosis.pipeline",
    # state and schedule
    "Memory": "diagevo.memory.state",
    "load_memory": "diagevo.views.memory",
    "schedule": "diagevo.memory.schedule",
    "committed_rounds": "diagevo.views.memory",
    "verify_run": "diagevo.views.verify",
    # the read commands as values
    "memory_at": "diagevo.views.queries",
    "show": "diagevo.views.queries",
    "why": "diagevo.views.queries",
    "stats": "diagevo.views.queries",
    "lifecycle": "diagevo.views.queries",
    "memory_view": "diagevo.views.queries",
    # what-if
    "fork_run": "diagevo.fork",
    "diff_runs": "diagevo.fork",
    # diagevo's own loop (``diagevo.train.train``; the name ``train`` is the subpackage)
    "Trainer": "diagevo.train.loop",
    "make_backend": "diagevo.train",
    # the round protocol, further names
    "Recorded": "diagevo.rounds",
    "RoundProgress": "diagevo.rounds",
    "OUR_TRAINER": "diagevo.rounds",
    "EXTERNAL_TRAINER": "diagevo.rounds",
    "configure_fork": "diagevo.rounds",
    "run_trainer": "diagevo.rounds",
    "open_log": "diagevo.log",
    "StoredEvent": "diagevo.log",
    # the event classes (``diagevo.events.PhaseCompleted(...)``): what a trainer notes, what a read gives
    "events": "diagevo.catalog",
    # what diagnose runs with (built from names, or by these constructors)
    "DiagnosisConfig": "diagevo.diagnosis.config",
    "Diagnostician": "diagevo.diagnosis.interface",
    "Embedder": "diagevo.diagnosis.interface",
    "VectorIndex": "diagevo.views.index",
    "llm_diagnostician": "diagevo.diagnosis.tools",
    "heuristic_diagnostician": "diagevo.diagnosis.tools",
    "make_embedder": "diagevo.diagnosis.tools",
    "vector_index": "diagevo.diagnosis.tools",
    # reading runs and causes
    "runs": "diagevo.views.runs",
    "RunSummary": "diagevo.views.runs",
    "recent_story": "diagevo.views.stories",
    # what a reward function needs (Sec. 2.2, Appendix C and J)
    "extract_answer": "diagevo.curriculum",
    "agrees": "diagevo.curriculum",
    "votes": "diagevo.curriculum",
    "Votes": "diagevo.curriculum",
    "keep": "diagevo.curriculum",
    "solver_rewards": "diagevo.curriculum",
    "challenger_rewards": "diagevo.curriculum",
    "challenger_output_rewards": "diagevo.curriculum",
    "solver_messages": "diagevo.curriculum",
    "challenger_messages": "diagevo.curriculum",
    "parse_question": "diagevo.curriculum",
    # where a run's files go
    "run_dir": "diagevo.paths",
    "beside_database": "diagevo.paths",
    # errors
    "RunExists": "diagevo.rounds",
    "MemoryMoved": "diagevo.rounds",
    "UnknownRun": "diagevo.rounds",
    "DiagevoError": "diagevo.errors",
    "BadInput": "diagevo.errors",
    "Conflict": "diagevo.errors",
    "NotFound": "diagevo.errors",
    "NotADiagevoDatabase": "diagevo.errors",
    "Unavailable": "diagevo.errors",
    "ProtocolError": "diagevo.rounds",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
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
    from diagevo.catalog import events
    from diagevo.curriculum import (
        Votes,
        agrees,
        challenger_messages,
        challenger_output_rewards,
        challenger_rewards,
        extract_answer,
        keep,
        parse_question,
        solver_messages,
        solver_rewards,
        votes,
    )
    from diagevo.diagnosis.config import DiagnosisConfig
    from diagevo.diagnosis.interface import Diagnostician, Embedder
    from diagevo.diagnosis.pipeline import DiagnosisSummary, FailureInput, diagnose, failure_inputs
    from diagevo.diagnosis.tools import heuristic_diagnostician, llm_diagnostician, make_embedder, vector_index
    from diagevo.errors import BadInput, Conflict, DiagevoError, NotADiagevoDatabase, NotFound, Unavailable
    from diagevo.fork import diff_runs, fork_run
    from diagevo.log import EventStore, StoredEvent, open_log
    from diagevo.memory.schedule import schedule
    from diagevo.memory.state import Memory
    from diagevo.paths import beside_database, run_dir
    from diagevo.rounds import (
        EXTERNAL_TRAINER,
        OUR_TRAINER,
        Candidate,
        MemoryMoved,
        ProtocolError,
        Recorded,
        Request,
        Round,
        RoundProgress,
        RoundState,
        RunExists,
        Scored,
        UnknownRun,
        configure_fork,
        open_round,
        round_state,
        run_config,
        run_trainer,
        start_run,
    )
    from diagevo.train import make_backend
    from diagevo.train.config import Config, load_config
    from diagevo.train.loop import Trainer
    from diagevo.views.index import VectorIndex
    from diagevo.views.memory import committed_rounds, load_memory
    from diagevo.views.queries import lifecycle, memory_at, memory_view, show, stats, why
    from diagevo.views.runs import RunSummary, runs
    from diagevo.views.stories import recent_story
    from diagevo.views.verify import verify_run
