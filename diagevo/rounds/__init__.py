"""The round protocol: the memory as a service for any trainer (diagevo's own loop included).

A trainer drives round t through these operations of a :class:`Round`, in this order, and appends
nothing else to the memory:

1. :func:`start_run` (once; the config holds at least ``k``) and :func:`open_round`;
2. :meth:`Round.requests`: n generation requests drawn from the schedule projected from M_{t-1}
   (Eq. 1-2: free / targeted / stitched, cause and sibling texts, node, the rendered Appendix J
   challenger prompt), deterministic for (run, round, seed);
3. :meth:`Round.record`: the generated questions with the solver's N construction responses (or their
   extracted answers): votes, the Eq. 3 filter, ``question.generated`` / ``question.scored``;
   returns every candidate scored, the retained ones with pseudo-label and reference;
4. :meth:`Round.promote`: Eq. 5-6 from the round's evidence against M_{t-1}, decided once;
5. :meth:`Round.record_failures`, then :func:`diagevo.diagnosis.pipeline.diagnose` (or ``diagevo
   diagnose``): the failures, whose decisions come back through :meth:`Round.append_diagnosis`;
6. :meth:`Round.commit`: ``round.committed`` with the trainer's metrics.

Every event id derives from (run, round, item), so any step can be retried. Each write checks
the round's state and appends in one transaction under the store's append lock, so several
processes may record into one round at once, and a step out of order (recording into a
committed round, failures before the promotions, promoting twice, committing with undiagnosed
failures) raises :class:`OutOfOrder` and stores nothing; :attr:`Round.next_step` says, by the
same rules, what the round takes next.
"""

# the package's modules, below, hold the protocol by part; what a trainer and the library's other parts use is here
from __future__ import annotations

from diagevo.catalog import RoundCommitted as Committed  # what Round.commit returns, by its old public name
from diagevo.rounds.metrics import check_metrics, commit_counts
from diagevo.rounds.protocol import MemoryMoved, OutOfOrder, ProtocolError, UnknownRun
from diagevo.rounds.questions import (
    Candidate,
    LoggedQuestion,
    Recorded,
    Request,
    Scored,
    logged_questions,
)
from diagevo.rounds.refusals import refuse_reused_failures
from diagevo.rounds.round import Round
from diagevo.rounds.runs import (
    EXTERNAL_TRAINER,
    OUR_TRAINER,
    RESUMES,
    Resume,
    RunDiffers,
    RunExists,
    config_record,
    configure_fork,
    configure_run,
    note_run,
    record_retrospective,
    run_config,
    run_trainer,
    start_run,
    stored_config,
    tag_run,
)
from diagevo.rounds.state import (
    RoundProgress,
    current_round,
    open_round,
    require_open,
    round_state,
    seeded,
)
from diagevo.rounds.withdraw import Batch

__all__ = [
    "Batch",
    "Candidate",
    "Committed",
    "EXTERNAL_TRAINER",
    "LoggedQuestion",
    "MemoryMoved",
    "OUR_TRAINER",
    "OutOfOrder",
    "ProtocolError",
    "RESUMES",
    "Recorded",
    "Request",
    "Resume",
    "Round",
    "RoundProgress",
    "RunDiffers",
    "RunExists",
    "Scored",
    "UnknownRun",
    "check_metrics",
    "commit_counts",
    "config_record",
    "configure_fork",
    "configure_run",
    "current_round",
    "logged_questions",
    "note_run",
    "open_round",
    "record_retrospective",
    "refuse_reused_failures",
    "require_open",
    "round_state",
    "run_config",
    "run_trainer",
    "seeded",
    "start_run",
    "stored_config",
    "tag_run",
]
