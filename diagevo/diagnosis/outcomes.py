"""What a round's diagnosis left, and whether it may go on (issue 46, item 1).

What the log holds of a round (:class:`Prior`: stored Prompt 1 replies, decided failures, failed
diagnoses to ask again), the check of the endpoints before anything is appended, and the refusal
of a round whose failed diagnoses stop it (:class:`~diagevo.errors.DiagnosesFailed`, by what stopped it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from diagevo.catalog import CauseCreated, DiagnosisFailed, FailureAttributed, FailureDiagnosed
from diagevo.config import DiagnosisConfig
from diagevo.diagnosis.interface import Diagnostician, Extraction
from diagevo.diagnosis.llm import LLMDiagnostician
from diagevo.errors import DiagnosticianBroken, DiagnosticianDown
from diagevo.openai_client import unanswered

if TYPE_CHECKING:
    from diagevo.diagnosis.pipeline import DiagnosisSummary


@dataclass(frozen=True, slots=True)
class Prior:
    """What the log already holds for a round: stored Prompt 1 replies (``diagnosed``), the
    failures decided (``decided``), and how often each undecided failure's diagnosis failed
    (``tries``): a failed diagnosis decides nothing, so the next call asks again, under ids of
    its own (the ``tries``-th retry)."""

    diagnosed: dict[str, Extraction]
    decided: set[str]
    tries: dict[str, int]


def prior_outcomes(store: Any, run: str, t: int) -> Prior:
    """What the log holds of round ``t`` of ``run`` (see :class:`Prior`)."""
    types = (FailureDiagnosed, FailureAttributed, CauseCreated, DiagnosisFailed)
    diagnosed: dict[str, Extraction] = {}
    decided: set[str] = set()
    tries: dict[str, int] = {}
    for e in store.rows(run, types=types, in_round=t):
        match e.event:
            case FailureDiagnosed(failure_id=fid, matched_cause=matched, error_cause=new):
                diagnosed[fid] = Extraction(matched, new)
                if matched is None and new is None:
                    decided.add(fid)  # a non-skill slip: nothing follows
            case DiagnosisFailed(failure_id=str(fid)):
                tries[fid] = tries.get(fid, 0) + 1
            case FailureAttributed(failure_id=fid) | CauseCreated(failure_id=str(fid)):
                decided.add(fid)
    return Prior(diagnosed, decided, {fid: n for fid, n in tries.items() if fid not in decided})


def check_reachable(cfg: DiagnosisConfig, dx: Diagnostician, *, embedder_named: bool) -> None:
    """Ask the diagnostician's endpoint (and the embedder's, when ``cfg`` names the one in use)
    once, before anything is appended: one that is down raises
    :class:`~diagevo.errors.EndpointUnreachable` here, instead of every failure of the round
    being marked failed one by one."""
    from diagevo.diagnosis import tools

    if embedder_named:
        tools.check_endpoints(cfg, "embedder")
    if isinstance(dx, LLMDiagnostician):
        dx.check_reachable(min(cfg.request_timeout_s, 10.0))


def refuse_failed(summary: DiagnosisSummary, rules: DiagnosisConfig) -> None:
    """Raise :class:`~diagevo.errors.DiagnosesFailed` when the call's failed diagnoses stop the
    round (its other decisions are appended: the failed ones stay undiagnosed, retried by the
    next call): :class:`~diagevo.errors.DiagnosticianDown` (retry later) when each failed at an
    endpoint that did not answer, else :class:`~diagevo.errors.DiagnosticianBroken` (fix the
    server)."""
    if not summary.deferred and not rules.too_many_failed(summary.failed, summary.failures):
        return
    share = rules.max_failed_share
    reasons = tuple(sorted(summary.failure_reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    top = "; ".join(f"{n} x {why[:100]}" for why, n in reasons[:2]) + ("; ..." if len(reasons) > 2 else "")
    allowed = int(share * summary.failures)
    down = all(sep and unanswered(said) for why, _n in reasons for _stage, sep, said in [why.partition(": endpoint: ")])
    raise (DiagnosticianDown if down else DiagnosticianBroken)(
        f"round {summary.round} of run {summary.run!r}: {summary.failed} of {summary.failures} failures failed to "
        f"diagnose (diagnosis.max_failed_share {share:g} allows {allowed}): {top}; they stay undiagnosed"
        + (f", {summary.deferred} more are left undecided" if summary.deferred else "")
        + ", and diagnosing the round again asks only for them",
        failed=summary.failed,
        total=summary.failures,
        reasons=reasons,
    )
