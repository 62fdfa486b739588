"""One round of diagnosis and memory maintenance (Sec. 2.3, Appendix J), as appended events.

The routing rules, stage by stage, are :mod:`diagevo.diagnosis.routing`; this module asks the
diagnostician, stamps and appends what the rules decide, and keeps the round summary.

Stage 1 runs Prompt 1 for every failure concurrently and stores each reply (``failure.diagnosed``
or ``diagnosis.failed``, with one ``llm.called`` per HTTP attempt). Everything after is
sequential, in failure-id order, against a working memory kept in step with the log: stages
2a-3.5 route each failure's new cause (screening, Prompt 2, shortlist, Prompt 3, routing).

A failure's decision is never split across transactions; the decisions of up to 16 failures
share one (a durable commit per failure would cost more than the decision), so a crash never
leaves half a failure and a resumed round redoes at most the last 16, identically. After
all failures, stage 4a screens node pairs on label embeddings (θ_merge) and Prompt 4 decides each
pair in a fixed order; the older node survives, and a node absorbed this round is not merged
again. Event ids derive from (run, round, failure, stage): a resumed round skips failures already
decided in the log, reuses stored Prompt 1 replies, and re-appending anything is a no-op.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from diagevo.catalog import (
    CATALOG,
    MEMORY_TYPES,
    CauseCreated,
    CauseReactivated,
    DiagnosisFailed,
    Event,
    FailureAttributed,
    FailureDiagnosed,
    FailureRecorded,
    LLMCalled,
    NodeCreated,
    QuestionGenerated,
    QuestionScored,
)
from diagevo.catalog.ids import digest_event_id
from diagevo.diagnosis import routing
from diagevo.diagnosis.calibration import thresholds_for
from diagevo.diagnosis.config import DiagnosisConfig
from diagevo.diagnosis.given import refuse_contradictions
from diagevo.diagnosis.interface import Diagnostician, Embedder, Extraction, ExtractionInput, Reply
from diagevo.diagnosis.outcomes import check_reachable, prior_outcomes, refuse_failed
from diagevo.diagnosis.routing import Decision, Refusal, Routed
from diagevo.errors import BadInput, Conflict
from diagevo.limits import LimitsConfig
from diagevo.memory.fold import InvariantError, evolve
from diagevo.memory.state import Memory
from diagevo.progress import ProgressFn, no_progress
from diagevo.results import Json
from diagevo.rounds import (
    FailureRecord,
    MemoryMoved,
    ProtocolError,
    Round,
    refuse_reused_failures,
    require_open,
    round_state,
)
from diagevo.schemas import EventIn, new_event
from diagevo.views.index import VectorIndex
from diagevo.views.memory import load_memory

# Stage-1 replies are appended in batches of this many failures (one transaction each).
FLUSH_EVERY = 64
# Stage 2a-3.5 decisions of this many failures share a transaction: a durable commit (an fsync
# with SQLite's synchronous=FULL) per failure would cost more than deciding it. A crash loses at
# most these decisions, which a resumed round makes again, identically.
DECISIONS_PER_COMMIT = 16


@dataclass(frozen=True, slots=True)
class FailureInput:
    """A failed optimization trajectory of a retained question, with the stored reference that
    agrees with the pseudo-label and the causes supplied when the question was generated."""

    failure_id: str
    question_id: str
    question: str
    pseudo_label: str
    response: str
    reference: str
    known_causes: tuple[str, ...] = ()


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
    not_recorded: int = 0
    """Failures diagnosed without being recorded: the round was never opened (a trainer that
    records nothing else into the log)."""
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


def _call_events(run: str, round: int, key: tuple[object, ...], reply: Reply[Any], **extra: Any) -> list[EventIn]:
    out = []
    for i, c in enumerate(reply.calls):
        data = {
            k: v
            for k, v in c.items()
            if k not in ("stage", "model", "latency_s", "prompt_tokens", "completion_tokens", "raw")
        }
        call = LLMCalled(
            stage=c.get("stage", key[-1]),
            model=c.get("model", reply.model),
            latency_s=float(c.get("latency_s", 0.0)),
            prompt_tokens=c.get("prompt_tokens"),
            completion_tokens=c.get("completion_tokens"),
            raw=c.get("raw", ""),
            **extra,
            **data,
        )
        out.append(new_event(call, run=run, at_round=round, event_id=digest_event_id(run, round, *key, "call", i)))
    return out


def reply_ref(reply: Reply[Any] | None) -> dict[str, Any]:
    """How a decision names its reply: ``call``, the ``attempt`` of the ``llm.called`` event of
    the same decision that holds the reply (stored once, there), or the reply inline as ``raw``
    when no call recorded it (a diagnostician without HTTP calls)."""
    if reply is None or not reply.raw:
        return {"raw": ""}
    for c in reversed(reply.calls):
        if c.get("raw") == reply.raw and isinstance(c.get("attempt"), int):
            return {"raw": "", "call": c["attempt"]}
    return {"raw": reply.raw}


def _counts(summary: DiagnosisSummary) -> tuple[dict[str, Any], int]:
    """The summary's counters and how many outcomes it lists (outcomes are only appended)."""
    return {k: v for k, v in summary.__dict__.items() if k != "outcomes"}, len(summary.outcomes)


Pending = tuple[FailureInput, Extraction, "np.ndarray | None", "int | None"]


class _DiagnosisPass:
    """The state of one diagnose_round call.

    The working memory is the log's memory as of ``seen_seq``. Decisions are appended only if
    no other producer has appended a memory event since (checked under the store's append lock);
    otherwise the working memory is read again and the undecided failures are decided anew, so
    two processes naming the same new cause end with one cause (the second finds the first's
    cause in stage 2a and Prompt 2 deduplicates)."""

    def __init__(
        self,
        store: Any,
        run: str,
        round: int,
        diagnostician: Diagnostician,
        index: VectorIndex,
        cfg: DiagnosisConfig,
        memory: Memory,
        summary: DiagnosisSummary,
        progress: ProgressFn,
    ) -> None:
        self.store, self.run, self.round = store, run, round
        self.protocol = Round(store, run, round)  # every write goes through the round protocol
        self.dx, self.index, self.cfg = diagnostician, index, cfg
        self.mem = memory
        self.summary = summary
        self.progress = progress
        self.model_s = 0.0
        self.pending: list[EventIn] = []  # decided, not yet appended (whole failures only)
        self.pending_failures = 0
        self.pending_inputs: list[Pending] = []  # the failures whose decisions are pending
        self.current: Pending | None = None  # the failure being decided
        self.seen_seq = memory.last_seq
        self.saved = _counts(summary)  # the summary as of the last append
        self.pre_vecs: np.ndarray | None = None
        self.tries: dict[str, int] = {}  # failures whose diagnosis failed before: how often
        self.halted = False  # the endpoint stopped answering in stages 2a-3.5: decide no further failure

    def flush(self) -> None:
        """Append the deferred decisions in one transaction, if the memory they were decided
        against is still the log's; else raise :class:`MemoryMoved` and append nothing."""
        if not self.pending:
            return
        result = self.protocol.append_diagnosis(self.pending, since_seq=self.seen_seq)
        self.seen_seq = result.last_seq
        self.pending, self.pending_failures, self.pending_inputs = [], 0, []
        self.saved = _counts(self.summary)

    def reread(self) -> list[Pending]:
        """Drop the pending decisions, adopt the log's memory; returns the failures to decide
        again (those another producer has decided meanwhile are left out)."""
        inputs = self.pending_inputs
        self.pending, self.pending_failures, self.pending_inputs = [], 0, []
        counts, outcomes = self.saved
        self.summary.__dict__.update(counts)
        del self.summary.outcomes[outcomes:]
        self.mem = load_memory(self.store, self.run)
        self.seen_seq = self.mem.last_seq
        self.index.attach(self.mem)
        if self.pre_vecs is not None:
            self.index.prescreen(self.pre_vecs)
        decided = prior_outcomes(self.store, self.run, self.round).decided
        return [p for p in inputs if p[0].failure_id not in decided]

    async def decide(self, todo: Sequence[Pending]) -> None:
        """Decide ``todo`` in order; when another producer moved the memory, decide the
        failures whose decisions were not appended again against the new memory."""
        queue = list(todo)
        while queue:
            i = 0
            try:
                while i < len(queue):
                    await self.maintain(*queue[i])
                    i += 1
                return
            except MemoryMoved:
                queue = [*self.reread(), *queue[i + 1 :]]

    async def settle(self) -> None:
        """Append what is pending, deciding again as often as other producers move the memory."""
        while True:
            try:
                self.flush()
                return
            except MemoryMoved:
                await self.decide(self.reread())

    def key(self, *parts: object) -> tuple[object, ...]:
        """The id parts of a failure's event: a failure asked again after a failed diagnosis
        gets ids of its own (its earlier attempt's events stay as they were)."""
        n = self.tries.get(parts[0]) if parts and isinstance(parts[0], str) else None
        return (parts[0], "retry", n, *parts[1:]) if n else parts

    def eid(self, *parts: object) -> str:
        return digest_event_id(self.run, self.round, *self.key(*parts))

    def calls(self, key: tuple[object, ...], reply: Reply[Any], **extra: Any) -> list[EventIn]:
        """``llm.called`` of a reply's HTTP attempts, with ids from ``key``."""
        return _call_events(self.run, self.round, self.key(*key), reply, **extra)

    def event(self, event: Event, *parts: object) -> EventIn:
        """``event`` of this round under the id ``parts`` give it."""
        return new_event(event, run=self.run, at_round=self.round, event_id=self.eid(*parts))

    def refused(self, fid: str | None, refusal: Refusal, reply: Reply[Any] | None, *key: object) -> EventIn:
        """``diagnosis.failed`` for a refusal; its id is ``key`` (by default ``(fid, stage)``).
        A failure's counts as a failed diagnosis (with its reason); a node pair's apart."""
        if fid is None:
            self.summary.merge_failed += 1
        else:
            self.summary.failed += 1
            why = f"{refusal.stage}: {' '.join(refusal.reason.split())[:160]}"
            self.summary.failure_reasons[why] = self.summary.failure_reasons.get(why, 0) + 1
        failed = DiagnosisFailed(
            failure_id=fid,
            stage=refusal.stage,
            reason=refusal.reason[:500],
            model=reply.model if reply else getattr(self.dx, "model_name", ""),
            **reply_ref(reply),
        )
        return self.event(failed, *(key or (fid, refusal.stage)), "failed")

    def commit(self, events: list[EventIn], vec: np.ndarray | None = None, *, defer: bool = False) -> None:
        """Validate the batch against the working memory, append it (``defer``: with the next
        few failures' batches, see DECISIONS_PER_COMMIT), then adopt the result."""
        mem = self.mem
        for ev in events:
            if CATALOG[ev.type] in MEMORY_TYPES:
                mem = evolve(mem, ev.event, self.round)
        if events:
            self.pending.extend(events)
            self.pending_failures += 1
            if self.current is not None:
                self.pending_inputs.append(self.current)
            if not defer or self.pending_failures >= DECISIONS_PER_COMMIT:
                self.flush()
        self.mem = mem
        for ev in events:
            event = ev.event
            if type(event) in MEMORY_TYPES:
                self.index.apply(event, mem, vec if isinstance(event, CauseCreated) else None)
            elif isinstance(event, LLMCalled):
                self.summary.llm_calls += 1

    async def timed(self, coro: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await coro
        finally:
            self.model_s += time.perf_counter() - t0

    # --- stage 1 --------------------------------------------------------------------------------

    async def extract_all(self, items: Sequence[FailureInput]) -> dict[str, Extraction]:
        out: dict[str, Extraction] = {}
        if not items:
            return out

        async def one(f: FailureInput) -> tuple[FailureInput, Reply[Extraction] | None, str | None]:
            known = routing.known_causes(self.mem, f.known_causes)
            item = ExtractionInput(
                f.failure_id, f.question_id, f.question, f.pseudo_label, f.response, f.reference, known
            )
            try:
                return f, await self.dx.extract(item), None
            except Exception as exc:  # a broken diagnostician must not stop the round
                return f, None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"

        buffer: list[EventIn] = []
        done = 0
        for fut in asyncio.as_completed([asyncio.ensure_future(one(f)) for f in items]):
            f, reply, crash = await fut
            fid = f.failure_id
            events = self.calls((fid, "extract"), reply, failure_id=fid) if reply else []
            # without a reply, ``crash`` always holds the exception that prevented it
            value = routing.check_extraction(
                reply.value if reply else None, crash or (reply.error if reply else None), f.known_causes
            )
            if isinstance(value, Refusal):
                events.append(self.refused(fid, value, reply))
            else:
                assert reply is not None  # a reply was checked
                diagnosed = FailureDiagnosed(
                    failure_id=fid,
                    matched_cause=value.matched_cause_id,
                    error_cause=value.error_cause,
                    model=reply.model,
                    **reply_ref(reply),
                )
                events.append(self.event(diagnosed, fid, "extract"))
                out[fid] = value
            self.summary.llm_calls += sum(1 for e in events if e.type == LLMCalled.name)
            buffer.extend(events)
            done += 1
            if done % FLUSH_EVERY == 0:
                self.protocol.append_diagnosis(buffer)
                buffer = []
            self.progress("extract", done, len(items))
        if buffer:
            self.protocol.append_diagnosis(buffer)
        return out

    # --- stages 2a-3.5 --------------------------------------------------------------------------

    async def maintain(self, f: FailureInput, ext: Extraction, vec: np.ndarray | None, row: int | None) -> None:
        """Route one failure (:mod:`diagevo.diagnosis.routing`) and commit what was decided."""
        fid = f.failure_id
        events: list[EventIn] = []  # the diagnostician's calls, then the decision
        reply: Reply[Any] | None = None
        if ext.matched_cause_id is not None:
            decision: Decision = routing.recurrence(self.mem, fid, ext.matched_cause_id)
        elif ext.error_cause is not None and vec is not None:
            decision, reply = await self.route_new(fid, ext.error_cause, vec, row, events)
        else:
            self.summary.non_skill += 1
            self.summary.outcomes.append({"failure_id": fid, "outcome": "non_skill"})
            return
        outcome: dict[str, Json] = {"failure_id": fid}
        if isinstance(decision, Refusal) and decision.reason.startswith("endpoint:"):
            self.halted = True
        if isinstance(decision, Refusal):
            # a decision the memory refuses ("route") is the code's, not the diagnostician's reply
            events.append(self.refused(fid, decision, None if decision.stage == "route" else reply))
        else:
            outcome.update(decision.outcome)
            for i, change in enumerate(decision.changes):
                events.append(self.event(change, fid, "decide", i, change.name))
        self.current = (f, ext, vec, row)
        try:
            self.commit(events, vec, defer=True)
        except InvariantError as exc:  # the decision does not fit the memory: record, go on
            events = [e for e in events if e.type == LLMCalled.name]
            events.append(self.refused(fid, Refusal("route", str(exc)), None))
            self.commit(events, defer=True)
            outcome = {"failure_id": fid}
        finally:
            self.current = None
        self._count(events, outcome)

    def _count(self, events: list[EventIn], outcome: dict[str, Json]) -> None:
        s = self.summary
        typed = [e.event for e in events]
        if any(isinstance(e, DiagnosisFailed) for e in typed):
            outcome["outcome"] = "failed"
        for e in typed:
            match e:
                case FailureAttributed(via="recurrence"):
                    s.recurrences += 1
                case FailureAttributed():
                    s.duplicates += 1
                case CauseReactivated():
                    s.reactivations += 1
                    outcome["reactivated"] = True
                case CauseCreated(cause_id=cause_id, node_id=node_id):
                    s.new_causes += 1
                    outcome.update(cause=cause_id, node=node_id)
                case NodeCreated():
                    s.new_nodes += 1
        s.outcomes.append(outcome)

    async def route_new(
        self, fid: str, description: str, vec: np.ndarray, row: int | None, events: list[EventIn]
    ) -> tuple[Decision, Reply[Any]]:
        """Stages 2a-3.5 for a new cause: the decision and the reply it rests on; the
        diagnostician's calls are added to ``events``."""
        sims = self.index.cause_sims(vec, row)
        # stage 2a: every stored cause at or above θ_dup is a candidate for Prompt 2 (the cap only
        # guards the prompt's length; a cut list is counted)
        screened, passed = self.index.screen(sims, self.summary.theta_dup, max(1, self.cfg.dedup_candidates), vec)
        if passed > len(screened):
            self.summary.dedup_truncated += 1
        if screened:
            candidates = list(routing.dedup_candidates(self.mem, screened))
            reply: Reply[Any] = await self.timed(self.dx.deduplicate(description, candidates))
            events.extend(self.calls((fid, "deduplicate"), reply, failure_id=fid))
            decision = routing.after_dedup(self.mem, fid, screened, reply.value, reply.error)
            if decision is not None:
                return decision, reply
        # stage 3a: shortlist of nodes by best member similarity
        shortlist = self.index.node_shortlist(sims, max(1, self.cfg.shortlist_k), vec)
        views = list(routing.shortlist_views(self.mem, shortlist))
        reply = await self.timed(self.dx.assign_node(description, views))
        events.extend(self.calls((fid, "assign_node"), reply, failure_id=fid))
        # stage 3.5: routing in code
        return routing.route_assignment(self.mem, fid, description, views, reply.value, reply.error), reply

    # --- stage 4a ---------------------------------------------------------------------------------

    async def consolidate(self) -> None:
        t0 = time.perf_counter()
        ids, vecs = self.index.node_vectors(self.mem)
        self.model_s += time.perf_counter() - t0
        pairs = routing.node_pairs(ids, vecs, self.summary.theta_merge)
        self.summary.merge_candidates = len(pairs)
        self.saved = _counts(self.summary)  # nothing is pending: a retried pair restores this
        absorbed: set[str] = set()
        for done, (sim, a, b) in enumerate(pairs, 1):
            while True:  # again when another producer moved the memory meanwhile
                merged = await self._consolidate_pair(sim, a, b, absorbed)
                if merged is not None:
                    if merged:
                        absorbed.add(b)
                    break
            self.progress("consolidate", done, len(pairs))

    async def _consolidate_pair(self, sim: float, a: str, b: str, absorbed: set[str]) -> bool | None:
        """Prompt 4 for one node pair; whether it merged, None when the memory moved."""
        if not routing.pair_open(self.mem, a, b, absorbed):
            return False
        key = ("merge", a, b)
        reply = await self.timed(self.dx.consolidate(routing.node_view(self.mem, a), routing.node_view(self.mem, b)))
        events = _call_events(self.run, self.round, (*key, "consolidate"), reply, nodes=[a, b])
        decision = routing.after_consolidation(self.mem, a, b, sim, reply.value, reply.error)
        merged = isinstance(decision, Routed) and bool(decision.changes)
        if isinstance(decision, Refusal):
            events.append(self.refused(None, decision, reply, *key))
        else:
            for i, change in enumerate(decision.changes):
                events.append(self.event(change, *key, "decide", i))
        if merged:
            self.summary.merges += 1
        try:
            self.commit(events)
        except MemoryMoved:
            self.reread()
            return None
        return merged


async def diagnose_round(
    *,
    store: Any,
    run: str,
    round: int,
    failures: Sequence[FailureInput],
    diagnostician: Diagnostician,
    embedder: Embedder,
    cfg: DiagnosisConfig,
    index: VectorIndex | None = None,
    progress: ProgressFn | None = None,
    memory: Memory | None = None,
    limits: LimitsConfig | None = None,
) -> DiagnosisSummary:
    """Diagnose the round's failures and maintain the memory; everything is appended to ``store``.

    ``round`` must be the run's open round (its last committed round + 1). ``index`` (a
    :class:`VectorIndex`, LanceDB-backed when it has a path) is caught up with the log first and
    after the round; without one, vectors are computed from the memory's texts. ``memory`` is
    the run's memory as it stands (read from the log when not given). ``limits``: what texts are
    stored and replies read up to (the run's ``[limits]``; by default those in effect).
    """
    progress = progress or no_progress
    if memory is None:  # the memory now (the round protocol hands it over, folded from M_{t-1})
        memory = load_memory(store, run)
    if memory.committed + 1 != round:
        raise Conflict(f"round {round} is not open in run {run!r}: its last committed round is {memory.committed}")
    _check_inputs(failures, memory)
    if index is None:
        index = VectorIndex(embedder)
    elif index.embedder.name != embedder.name:
        raise BadInput(f"the index holds {index.embedder.name} vectors, not {embedder.name}")
    th = thresholds_for(cfg, embedder.name)
    summary = DiagnosisSummary(run=run, round=round, theta_dup=th.dup, theta_merge=th.merge, failures=len(failures))
    state = _DiagnosisPass(store, run, round, diagnostician, index, cfg, memory, summary, progress)

    from diagevo.schemas import current_limits, text_limits

    try:
        with text_limits(limits or current_limits()):
            return await _run(state, store, run, round, failures, embedder, index, progress)
    finally:
        aclose = getattr(diagnostician, "aclose", None)
        if aclose is not None:  # the HTTP pool belongs to this event loop
            await aclose()


def _check_inputs(failures: Sequence[FailureInput], memory: Memory) -> None:
    """Refuse failures given twice or naming causes the memory does not hold."""
    seen: set[str] = set()
    for f in failures:
        if f.failure_id in seen:
            raise BadInput(f"failure {f.failure_id!r} appears twice")
        seen.add(f.failure_id)
        unknown = [c for c in f.known_causes if c not in memory.causes]
        if unknown:
            raise BadInput(f"failure {f.failure_id!r}: unknown known cause {unknown[0]!r}")


async def _run(
    state: _DiagnosisPass,
    store: Any,
    run: str,
    round: int,
    failures: Sequence[FailureInput],
    embedder: Embedder,
    index: VectorIndex,
    progress: ProgressFn,
) -> DiagnosisSummary:
    summary = state.summary
    prior = prior_outcomes(store, run, round)
    todo = sorted((f for f in failures if f.failure_id not in prior.decided), key=lambda f: f.failure_id)
    summary.resumed = len(failures) - len(todo)
    state.tries = {f.failure_id: prior.tries[f.failure_id] for f in todo if f.failure_id in prior.tries}
    summary.retried = len(state.tries)
    reused = {f.failure_id: prior.diagnosed[f.failure_id] for f in todo if f.failure_id in prior.diagnosed}
    summary.reused_replies = len(reused)

    t0 = time.perf_counter()
    fresh = await state.extract_all([f for f in todo if f.failure_id not in reused])
    summary.extraction_s = time.perf_counter() - t0
    extractions = {**reused, **fresh}
    if state.cfg.too_many_failed(summary.failed, len(failures)):
        # the round stops: what Prompt 1 answered is stored (reused next time), and the memory is
        # decided next time, in failure-id order, as in a round whose diagnostician never failed
        summary.deferred = len(todo) - summary.failed
        return summary

    t0 = time.perf_counter()
    if index.path is not None:
        index.sync(store, run)
    index.attach(state.mem)
    # the round's new causes, embedded in one batch, in processing order
    texts = list(
        dict.fromkeys(
            e.error_cause
            for f in todo
            if (e := extractions.get(f.failure_id)) is not None and e.matched_cause_id is None and e.error_cause
        )
    )
    vecs = embedder.embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)
    rows = {t: i for i, t in enumerate(texts)}
    if texts:
        index.prescreen(vecs)
        state.pre_vecs = vecs
    state.model_s = time.perf_counter() - t0
    state.saved = _counts(summary)
    for done, f in enumerate(todo, 1):
        ext = extractions.get(f.failure_id)
        if ext is not None:  # None: Prompt 1 failed, already recorded
            row = rows.get(ext.error_cause) if ext.error_cause else None
            await state.decide([(f, ext, None if row is None else vecs[row], row)])
        progress("maintain", done, len(todo))
        if state.halted:  # the rest next time, in the same order
            summary.deferred = sum(1 for g in todo[done:] if g.failure_id in extractions)
            break
    await state.settle()
    if state.halted:
        return summary
    summary.maintenance_s = time.perf_counter() - t0
    summary.maintenance_model_s = state.model_s

    t0 = time.perf_counter()
    await state.consolidate()
    if index.path is not None:
        index.sync(store, run)
    summary.consolidation_s = time.perf_counter() - t0
    return summary


def failures_from_records(records: Iterable[dict[str, Any]]) -> list[FailureInput]:
    """Build inputs from already validated dicts (the JSONL line format)."""
    return [
        FailureInput(
            failure_id=r["failure_id"],
            question_id=r["question_id"],
            question=r["question"],
            pseudo_label=r["pseudo_label"],
            response=r["response"],
            reference=r["reference"],
            known_causes=tuple(r.get("known_causes") or ()),
        )
        for r in records
    ]


def failure_inputs(store: Any, run: str, t: int) -> list[FailureInput]:
    """The failures recorded in round ``t``, with their questions, as diagnosis inputs."""
    questions: dict[str, dict[str, Any]] = {}
    labels: dict[str, str] = {}
    failures: dict[str, dict[str, Any]] = {}
    types = (QuestionGenerated, QuestionScored, FailureRecorded)
    for e in store.read(run, types=types, in_round=t, texts=True):  # the round's events only (indexed)
        if e.type == QuestionGenerated.name:
            questions[e.data["question_id"]] = e.data
        elif e.type == QuestionScored.name:
            labels[e.data["question_id"]] = e.data["pseudo_label"] or ""
        else:
            failures[e.data["failure_id"]] = e.data
    out = []
    for fid, f in sorted(failures.items()):
        q = questions[f["question_id"]]
        known = tuple(c for c in (q["active_cause"], q["mastered_cause"]) if c is not None)
        out.append(
            FailureInput(
                failure_id=fid,
                question_id=q["question_id"],
                question=q["text"],
                pseudo_label=labels[q["question_id"]],
                response=f["response"],
                reference=f["reference"],
                known_causes=known,
            )
        )
    return out


def diagnose(
    rnd: Round,
    *,
    diagnostician: Diagnostician | str = "llm",
    embedder: Embedder | str | None = None,
    llm_url: str | None = None,
    model: str | None = None,
    cfg: DiagnosisConfig | None = None,
    index: VectorIndex | None = None,
    failures: Sequence[FailureInput] | None = None,
    progress: ProgressFn | None = None,
) -> DiagnosisSummary:
    """Diagnose a round's failures with the pipeline of Sec. 2.3, as ``diagevo diagnose`` does.

    ``diagnostician`` is ``"llm"`` (the paper's: Prompts 1-4 sent to ``llm_url`` as ``model``,
    default ``diagnosis.llm_url`` / ``diagnosis.model``), ``"heuristic"`` (offline rules, not the
    paper's diagnostician) or an object built by :func:`~diagevo.diagnosis.tools.llm_diagnostician`,
    :func:`~diagevo.diagnosis.tools.heuristic_diagnostician` or the caller. ``embedder`` is an
    object, an embeddings endpoint URL or ``"local"``; by default the one ``diagnosis.embedder``
    names (the local MiniLM model). ``cfg`` defaults to the run's diagnosis config; ``index``
    (:func:`~diagevo.diagnosis.tools.vector_index`) keeps the vectors between rounds.

    The round's recorded failures are diagnosed, or ``failures`` given by the caller
    (``diagevo diagnose FILE``). Given failures are first recorded into an opened round
    (:meth:`Round.record_failures`: each must be of a retained question of the round); a round
    never opened (a trainer that records nothing else) need only be the next one, and its
    failures are diagnosed without being recorded. The summary counts which was done. A
    failure recorded or diagnosed in another round of the run is refused before any model call."""
    from diagevo import aio
    from diagevo.diagnosis import tools

    st = round_state(rnd.store, rnd.run)
    if failures is None:
        require_open(st, rnd.t, "diagnose")
    elif rnd.t != st.last_committed + 1:
        raise ProtocolError(
            f"round {rnd.t} is not open in run {rnd.run!r}: its last committed round is {st.last_committed}"
        )
    cfg = _config_of(rnd, cfg, llm_url=llm_url, model=model, embedder=embedder if isinstance(embedder, str) else None)
    if isinstance(diagnostician, str) and diagnostician not in tools.DIAGNOSTICIANS:
        raise BadInput(f"diagnostician {diagnostician[:40]!r}: use 'llm' (the paper's) or 'heuristic' (offline rules)")
    if isinstance(diagnostician, str) and diagnostician == "llm" and not cfg.llm_url:
        tools.llm_diagnostician(cfg)  # refuses, naming what to give
    memory = rnd.memory()
    # before any model call (the decisive check is the append's, under the lock): a failure
    # of another round, diagnosed here again, would be counted twice
    refuse_reused_failures(rnd.store, rnd.run, rnd.t, {f.failure_id: None for f in failures or ()})
    if failures is not None and rnd.t in st.started:  # what the diagnostician reads is what the log holds
        refuse_contradictions(rnd.store, rnd.run, rnd.t, failures)
    emb = embedder if embedder is not None and not isinstance(embedder, str) else tools.embedder_for(cfg)
    dx = tools.diagnostician_for(diagnostician, cfg, emb) if isinstance(diagnostician, str) else diagnostician
    check_reachable(cfg, dx, embedder_named=embedder is None or isinstance(embedder, str))
    recorded = already = unrecorded = 0
    if failures is None:
        failures = failure_inputs(rnd.store, rnd.run, rnd.t)
        already = len(failures)
    elif rnd.t in st.started:  # the trainer drives the round protocol: the story needs the failures
        _check_inputs(failures, memory)
        recorded = rnd.record_failures([_failure_record(f) for f in failures])
        already = len(failures) - recorded
    else:
        unrecorded = len(failures)
    summary = aio.run(
        diagnose_round(
            store=rnd.store,
            run=rnd.run,
            round=rnd.t,
            failures=failures,
            diagnostician=dx,
            embedder=emb,
            cfg=cfg,
            index=index,
            progress=progress,
            memory=memory,
            limits=rnd.config.part("limits", LimitsConfig),  # the run's [limits]: what its texts are stored up to
        )
    )
    summary.recorded, summary.already_recorded, summary.not_recorded = recorded, already, unrecorded
    refuse_failed(summary, rnd.config.diagnosis)
    return summary


def _config_of(rnd: Round, cfg: DiagnosisConfig | None, **names: str | None) -> DiagnosisConfig:
    """The ``[diagnosis]`` a call uses: ``cfg`` (default: the run's, the method's rules as the log
    keeps them and the endpoint) with the names given, and the run's own rule for how many failed
    diagnoses stop the round (as its commit checks it)."""
    from diagevo.diagnosis import tools

    base = cfg if cfg is not None else rnd.config.part("diagnosis", DiagnosisConfig)
    base = base.model_copy(update={"max_failed_share": rnd.config.diagnosis.max_failed_share})
    return tools.diagnosis_config(base, **names)


def _failure_record(f: FailureInput) -> FailureRecord:
    """A failure as ``failure.recorded`` holds it."""
    return {"failure_id": f.failure_id, "question_id": f.question_id, "response": f.response, "reference": f.reference}
