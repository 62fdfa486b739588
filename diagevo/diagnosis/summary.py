"""What a diagnosis did: the round's summary (``diagevo diagnose --json``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from diagevo.results import Json


@dataclass
class DiagnosisSummary:
    """What one :func:`diagnose` call did to the round's failures (Sec. 2.3), as ``diagevo
    diagnose --json`` prints it. Every failure given ends in exactly one of ``recurrences``,
    ``duplicates``, ``new_causes``, ``non_skill``, ``failed`` or ``resumed``."""

    run: str
    """The run diagnosed."""
    round: int
    """The round whose failures were diagnosed."""
    theta_dup: float
    """θ_dup in force: embedding similarity at or above which a new cause goes to Prompt 2."""
    theta_merge: float
    """θ_merge in force: node similarity at or above which two nodes go to Prompt 4."""
    failures: int = 0
    """The failures given (or, with none given, those the round recorded)."""
    recorded: int = 0
    """``failure.recorded`` appended by this call (the round was opened by the round protocol)."""
    already_recorded: int = 0
    """Failures the log held already (a retry, or recorded by ``Round.record_failures``)."""
    unopened: int = 0
    """Failures recorded with their diagnosis: the round was never opened (a trainer that
    records nothing else into the log), so no retained question of it vouches for them."""
    resumed: int = 0
    """Failures already decided in the log (an earlier call): skipped, not asked again."""
    reused_replies: int = 0
    """Prompt 1 replies found in the log for undecided failures: the model was not asked again."""
    recurrences: int = 0
    """Failures attributed to a known cause (Prompt 1 matched it): f(e) grows by one."""
    duplicates: int = 0
    """New causes that Prompt 2 found to duplicate a known cause: attributed to that one."""
    reactivations: int = 0
    """Mastered causes a failure recurred on: moved back to Active (Eq. 6)."""
    new_causes: int = 0
    """New causes added to the memory (after Prompt 2 said they are new)."""
    new_nodes: int = 0
    """Skill nodes created for new causes (Prompt 3 found no node to join)."""
    non_skill: int = 0
    """Failures Prompt 1 called a slip, not a skill error: nothing enters the memory."""
    failed: int = 0
    """Failures whose diagnosis failed in this call (a reply that broke its schema or named an id
    it was not given): ``diagnosis.failed`` holds each reason; they stay undiagnosed, and the next
    call asks for them again."""
    failure_reasons: dict[str, int] = field(default_factory=dict)
    """``"stage: reason"`` of those failures, and how many had it."""
    retried: int = 0
    """Failures whose diagnosis had failed before, asked again by this call."""
    merge_failed: int = 0
    """Node pairs whose Prompt 4 reply decided nothing (no failure is left undiagnosed by it)."""
    deferred: int = 0
    """Failures this call left for the next: stages 2a-3.5 do not run past failed diagnoses that
    stop the round, nor past an endpoint that stopped answering; the next call decides them in the
    same order."""
    dedup_truncated: int = 0
    """New causes for which Prompt 2 saw only the best ``diagnosis.dedup_candidates`` screened
    causes (more were above θ_dup)."""
    merge_candidates: int = 0
    """Node pairs at or above θ_merge that Prompt 4 was asked about."""
    merges: int = 0
    """Node pairs Prompt 4 merged."""
    llm_calls: int = 0
    """Requests sent to the diagnostician's server (0 for the heuristic)."""
    extraction_s: float = 0.0
    """Seconds spent in Prompt 1 over all failures."""
    maintenance_s: float = 0.0
    """Seconds spent deduplicating, assigning and appending (Prompts 2-3 and the log)."""
    maintenance_model_s: float = 0.0
    """The part of ``maintenance_s`` inside the diagnostician and the embedder."""
    consolidation_s: float = 0.0
    """Seconds spent consolidating nodes (Prompt 4)."""
    outcomes: list[dict[str, Json]] = field(default_factory=list)
    """Per failure, in order: ``failure_id`` and its ``outcome`` (and the cause and node it went
    to, where it went to one)."""

    def to_json(self) -> dict[str, Json]:
        """The summary as ``diagevo diagnose --json`` prints it."""
        return asdict(self)
