"""The round protocol: the memory as a service for any trainer (diagevo's own loop included).

A trainer drives round t through these operations, in this order, and appends nothing else to
the memory:

1. :func:`start_run` (once; the config holds at least ``k``) and :func:`open_round`;
2. :func:`requests`: n generation requests drawn from the schedule projected from M_{t-1}
   (Eq. 1-2: free / targeted / stitched, cause and sibling texts, node, the rendered Appendix J
   challenger prompt), deterministic for (run, round, seed);
3. :func:`record`: the generated questions with the solver's N construction responses (or their
   extracted answers): votes, the Eq. 3 filter, ``question.generated`` / ``question.scored``;
   returns every candidate scored, the retained ones with pseudo-label and reference;
4. :func:`promote`: Eq. 5-6 from the round's evidence against M_{t-1}, decided once;
5. :func:`record_failures`, then :func:`diagevo.diagnosis.pipeline.diagnose` (or ``diagevo
   diagnose``): the failures, whose decisions come back through :meth:`Round.append_diagnosis`;
6. :func:`commit`: ``round.committed`` with the trainer's metrics.

Every event id derives from (run, round, item), so any step can be retried. Each write checks
the round's state and appends in one transaction under the store's append lock, so several
processes may record into one round at once, and a step out of order (recording into a
committed round, failures before the promotions, promoting twice, committing with undiagnosed
failures) raises :class:`OutOfOrder` and stores nothing; :attr:`Round.next_step` says, by the
same rules, what the round takes next.
"""

# the package's modules, below, hold the protocol by part; `from diagevo.rounds import X` holds for each X
from __future__ import annotations

from diagevo.rounds.failures import FAILURE_CONTEXT, FAILURE_FIELDS, FAILURE_TYPES, FailureRecord, failed_diagnoses
from diagevo.rounds.functions import commit, note, promote, record, record_failures, requests
from diagevo.rounds.metrics import COUNTED_HERE, check_metrics, check_summary, rank_metrics
from diagevo.rounds.protocol import MemoryMoved, OutOfOrder, ProtocolError, UnknownRun
from diagevo.rounds.questions import (
    PURPOSES,
    Candidate,
    LoggedQuestion,
    Recorded,
    Request,
    Scored,
    logged_questions,
    score,
)
from diagevo.rounds.refusals import (
    DIAGNOSIS_TYPES,
    NOTE_TYPES,
    refuse_counted_twice,
    refuse_other_content,
    refuse_reused_failures,
)
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
    refuse_other_config,
    run_config,
    run_trainer,
    start_run,
    stored_config,
    tag_run,
)
from diagevo.rounds.state import (
    RoundProgress,
    RunState,
    current_round,
    open_round,
    require_open,
    round_progress,
    round_state,
    seeded,
)

__all__ = [
    "COUNTED_HERE",
    "Candidate",
    "DIAGNOSIS_TYPES",
    "EXTERNAL_TRAINER",
    "FAILURE_CONTEXT",
    "FAILURE_FIELDS",
    "FAILURE_TYPES",
    "FailureRecord",
    "LoggedQuestion",
    "MemoryMoved",
    "NOTE_TYPES",
    "OUR_TRAINER",
    "OutOfOrder",
    "PURPOSES",
    "ProtocolError",
    "RESUMES",
    "Recorded",
    "Request",
    "Resume",
    "Round",
    "RoundProgress",
    "RunDiffers",
    "RunExists",
    "RunState",
    "Scored",
    "UnknownRun",
    "check_metrics",
    "check_summary",
    "commit",
    "config_record",
    "configure_fork",
    "configure_run",
    "current_round",
    "failed_diagnoses",
    "logged_questions",
    "note",
    "note_run",
    "open_round",
    "promote",
    "rank_metrics",
    "record",
    "record_failures",
    "record_retrospective",
    "refuse_counted_twice",
    "refuse_other_config",
    "refuse_other_content",
    "refuse_reused_failures",
    "requests",
    "require_open",
    "round_progress",
    "round_state",
    "run_config",
    "run_trainer",
    "score",
    "seeded",
    "start_run",
    "stored_config",
    "tag_run",
]
