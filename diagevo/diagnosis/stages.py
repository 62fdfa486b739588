"""One round's diagnosis, as a pass over its failures that owns its state: what the log already
holds of the round (:class:`Prior`), stage 1 (Prompt 1, concurrent), stages 2a-3.5 (one failure
at a time, against a working memory kept in step with the log) and stage 4a (node consolidation).
:func:`~diagevo.diagnosis.pipeline.diagnose_round` checks a call's inputs and runs one pass."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
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
    of_type,
)
from diagevo.catalog.failure import Failure
from diagevo.catalog.ids import digest_event_id
from diagevo.config.sections import DiagnosisConfig
from diagevo.diagnosis import routing
from diagevo.diagnosis.calibration import thresholds_for
from diagevo.diagnosis.interface import Diagnostician, Embedder, Extraction, ExtractionInput, Reply
from diagevo.diagnosis.routing import Decision, ReplyRefusal, Routed
from diagevo.diagnosis.summary import DiagnosisSummary
from diagevo.log import Recorder
from diagevo.memory.fold import InvariantError, evolve
from diagevo.memory.state import Memory
from diagevo.results import Json
from diagevo.rounds import MemoryMoved, Round
from diagevo.rounds.failures import DECIDING, decided_failures
from diagevo.runtime.progress import ProgressFn, no_progress
from diagevo.schemas import EventIn, new_event
from diagevo.views.admission import admitted_rows
from diagevo.views.index import VectorIndex
from diagevo.views.memory import load_memory

# Stage-1 replies are appended in batches of this many failures (one transaction each).
FLUSH_EVERY = 64
# Stage 2a-3.5 decisions of this many failures share a transaction: a durable commit (an fsync
# with SQLite's synchronous=FULL) per failure would cost more than deciding it. A crash loses at
# most these decisions, which a resumed round makes again, identically.
DECISIONS_PER_COMMIT = 16


Pending = tuple[Failure, Extraction, "np.ndarray | None", "int | None"]


@dataclass(frozen=True, slots=True)
class Prior:
    """What the log already holds for a round: stored Prompt 1 replies (``diagnosed``), the
    failures decided (``decided``), and how often each undecided failure's diagnosis failed
    (``tries``): a failed diagnosis decides nothing, so the next call asks again, under ids of
    its own (the ``tries``-th retry)."""

    diagnosed: dict[str, Extraction]
    decided: set[str]
    tries: dict[str, int]


def prior_outcomes(store: Recorder, run: str, t: int) -> Prior:
    """What the log holds of round ``t`` of ``run`` (see :class:`Prior`)."""
    events = [e.event for e in admitted_rows(store, run, types=(*DECIDING, DiagnosisFailed), in_round=t)]
    decided = decided_failures(events)
    diagnosed: dict[str, Extraction] = {}
    tries: dict[str, int] = {}
    for e in events:
        match e:
            case FailureDiagnosed(failure_id=fid, matched_cause=matched, error_cause=new):
                diagnosed[fid] = Extraction(matched, new)
            case DiagnosisFailed(failure_id=str(fid)) if fid not in decided:
                tries[fid] = tries.get(fid, 0) + 1
    return Prior(diagnosed, decided, tries)


def reply_ref(reply: Reply[Any] | None) -> dict[str, Any]:
    """How a decision names its reply: ``call``, the ``attempt`` of the ``llm.called`` event of
    the same decision that holds the reply (stored once, there), or the reply inline as ``raw``
    when no call recorded it (a diagnostician without HTTP calls)."""
    if reply is None or not reply.raw:
        return {"raw": ""}
    for c in reversed(reply.calls):
        if c.raw == reply.raw and c.attempt is not None:
            return {"raw": "", "call": c.attempt}
    return {"raw": reply.raw}


class DiagnosisPass:
    """One round's diagnosis: built from the round, the diagnostician and the memory as it
    stands, it keeps the working memory, the round summary and what is decided but not yet
    appended; :meth:`diagnose` runs the stages over the round's failures.

    The working memory is the log's memory as of ``seen_seq``. Decisions are appended only if
    no other producer has appended a memory event since (checked under the store's append lock);
    otherwise the working memory is read again and the undecided failures are decided anew, so
    two processes naming the same new cause end with one cause (the second finds the first's
    cause in stage 2a and Prompt 2 deduplicates)."""

    def __init__(
        self,
        store: Recorder,
        run: str,
        t: int,
        diagnostician: Diagnostician,
        embedder: Embedder,
        cfg: DiagnosisConfig,
        memory: Memory,
        *,
        index: VectorIndex | None = None,
        progress: ProgressFn | None = None,
    ) -> None:
        self.store, self.run, self.t = store, run, t
        self.protocol = Round(store, run, t)  # every write goes through the round protocol
        self.dx, self.embedder, self.cfg = diagnostician, embedder, cfg
        self.index = index if index is not None else VectorIndex(embedder)
        self.mem = memory
        th = thresholds_for(cfg, embedder.name)
        self.summary = DiagnosisSummary(run=run, round=t, theta_dup=th.dup, theta_merge=th.merge)
        self.progress = progress or no_progress
        self.model_s = 0.0
        self.pending: list[EventIn] = []  # decided, not yet appended (whole failures only)
        self.pending_inputs: list[Pending] = []  # the failures whose decisions are pending
        self.seen_seq = memory.last_seq
        self.saved = self._counts()  # the summary as of the last append
        self.pre_vecs: np.ndarray | None = None
        self.tries: dict[str, int] = {}  # failures whose diagnosis failed before: how often
        self.halted = False  # the endpoint stopped answering in stages 2a-3.5: decide no further failure

    async def diagnose(self, failures: Sequence[Failure]) -> DiagnosisSummary:
        """Run the stages over ``failures``: those the log holds decided are skipped, stored
        Prompt 1 replies reused, failed diagnoses asked again under ids of their own."""
        summary = self.summary
        summary.failures = len(failures)
        prior = prior_outcomes(self.store, self.run, self.t)
        todo = sorted((f for f in failures if f.failure_id not in prior.decided), key=lambda f: f.failure_id)
        summary.resumed = len(failures) - len(todo)
        self.tries = {f.failure_id: prior.tries[f.failure_id] for f in todo if f.failure_id in prior.tries}
        summary.retried = len(self.tries)
        reused = {f.failure_id: prior.diagnosed[f.failure_id] for f in todo if f.failure_id in prior.diagnosed}
        summary.reused_replies = len(reused)

        self.record_unrecorded(failures)
        t0 = time.perf_counter()
        fresh = await self.extract_all([f for f in todo if f.failure_id not in reused])
        summary.extraction_s = time.perf_counter() - t0
        extractions = {**reused, **fresh}
        if self.cfg.too_many_failed(summary.failed, len(failures)):
            # the round stops: what Prompt 1 answered is stored (reused next time), and the memory is
            # decided next time, in failure-id order, as in a round whose diagnostician never failed
            summary.deferred = len(todo) - summary.failed
            return summary

        t0 = time.perf_counter()
        await self.maintain_all(todo, extractions)
        if self.halted:
            return summary
        summary.maintenance_s = time.perf_counter() - t0
        summary.maintenance_model_s = self.model_s

        t0 = time.perf_counter()
        await self.consolidate()
        if self.index.path is not None:
            self.index.sync(self.store, self.run)
        summary.consolidation_s = time.perf_counter() - t0
        return summary

    def record_unrecorded(self, failures: Sequence[Failure]) -> None:
        """Record the given failures the log does not hold (a round its trainer never opened): a
        diagnosis, and what it decides, follow from a failure recorded in the run."""
        ids = [f.failure_id for f in failures]
        if not ids:
            return
        held = {
            f.failure_id
            for f in of_type(
                FailureRecorded, admitted_rows(self.store, self.run, types=(FailureRecorded,), keys={"failure_id": ids})
            )
        }
        events = [
            self.protocol.event(f"fail/{f.failure_id}", f.recorded()) for f in failures if f.failure_id not in held
        ]
        if events:
            self.protocol.append_diagnosis(events)

    def _counts(self) -> tuple[dict[str, Any], int]:
        """The summary's counters and how many outcomes it lists (outcomes are only appended)."""
        return {k: v for k, v in vars(self.summary).items() if k != "outcomes"}, len(self.summary.outcomes)

    def flush(self) -> None:
        """Append the deferred decisions in one transaction, if the memory they were decided
        against is still the log's; else raise :class:`MemoryMoved` and append nothing."""
        if not self.pending:
            return
        result = self.protocol.append_diagnosis(self.pending, since_seq=self.seen_seq)
        self.seen_seq = result.last_seq
        self.pending, self.pending_inputs = [], []
        self.saved = self._counts()

    def reread(self) -> list[Pending]:
        """Drop the pending decisions, adopt the log's memory; returns the failures to decide
        again (those another producer has decided meanwhile are left out)."""
        inputs = self.pending_inputs
        self.pending, self.pending_inputs = [], []
        counts, outcomes = self.saved
        self.summary.__dict__.update(counts)
        del self.summary.outcomes[outcomes:]
        self.mem = load_memory(self.store, self.run)
        self.seen_seq = self.mem.last_seq
        self.index.attach(self.mem)
        if self.pre_vecs is not None:
            self.index.prescreen(self.pre_vecs)
        decided = prior_outcomes(self.store, self.run, self.t).decided
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

    def calls(self, key: tuple[object, ...], reply: Reply[Any], **extra: Any) -> list[EventIn]:
        """``llm.called`` of a reply's HTTP attempts, with ids from ``key`` and the ``extra``
        fields that say what they were about."""
        return [
            self.event(LLMCalled(**{**c.model_dump(), **extra}), *key, "call", i) for i, c in enumerate(reply.calls)
        ]

    def event(self, event: Event, *parts: object) -> EventIn:
        """``event`` of this round under the id ``parts`` give it."""
        return new_event(
            event, run=self.run, at_round=self.t, event_id=digest_event_id(self.run, self.t, *self.key(*parts))
        )

    def refused(self, fid: str | None, refusal: ReplyRefusal, reply: Reply[Any] | None, *key: object) -> EventIn:
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

    def commit(self, events: list[EventIn], vec: np.ndarray | None = None, *, deciding: Pending | None = None) -> None:
        """Validate the batch against the working memory, append it (with the next few failures'
        batches when it decides the failure ``deciding``, see DECISIONS_PER_COMMIT), then adopt
        the result."""
        mem = self.mem
        for ev in events:
            if CATALOG[ev.type] in MEMORY_TYPES:
                mem = evolve(mem, ev.event, self.t)
        if events:
            self.pending.extend(events)
            if deciding is not None:
                self.pending_inputs.append(deciding)
            if deciding is None or len(self.pending_inputs) >= DECISIONS_PER_COMMIT:
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

    async def extract_all(self, items: Sequence[Failure]) -> dict[str, Extraction]:
        out: dict[str, Extraction] = {}
        if not items:
            return out

        async def one(f: Failure) -> tuple[Failure, Reply[Extraction] | None, str | None]:
            item = ExtractionInput.of(f, routing.known_causes(self.mem, f.known_causes))
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
            if isinstance(value, ReplyRefusal):
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

    async def maintain_all(self, todo: Sequence[Failure], extractions: dict[str, Extraction]) -> None:
        """Stages 2a-3.5 for ``todo`` in order: the round's new causes embedded in one batch, each
        failure routed, then what is pending appended (deciding again where the memory moved)."""
        t0 = time.perf_counter()
        if self.index.path is not None:
            self.index.sync(self.store, self.run)
        self.index.attach(self.mem)
        texts = list(
            dict.fromkeys(
                e.error_cause
                for f in todo
                if (e := extractions.get(f.failure_id)) is not None and e.matched_cause_id is None and e.error_cause
            )
        )
        vecs = self.embedder.embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)
        rows = {t: i for i, t in enumerate(texts)}
        if texts:
            self.index.prescreen(vecs)
            self.pre_vecs = vecs
        self.model_s = time.perf_counter() - t0
        self.saved = self._counts()
        for done, f in enumerate(todo, 1):
            ext = extractions.get(f.failure_id)
            if ext is not None:  # None: Prompt 1 failed, already recorded
                row = rows.get(ext.error_cause) if ext.error_cause else None
                await self.decide([(f, ext, None if row is None else vecs[row], row)])
            self.progress("maintain", done, len(todo))
            if self.halted:  # the rest next time, in the same order
                self.summary.deferred = sum(1 for g in todo[done:] if g.failure_id in extractions)
                break
        await self.settle()

    async def maintain(self, f: Failure, ext: Extraction, vec: np.ndarray | None, row: int | None) -> None:
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
        if isinstance(decision, ReplyRefusal) and decision.reason.startswith("endpoint:"):
            self.halted = True
        if isinstance(decision, ReplyRefusal):
            # a decision the memory refuses ("route") is the code's, not the diagnostician's reply
            events.append(self.refused(fid, decision, None if decision.stage == "route" else reply))
        else:
            outcome.update(decision.outcome)
            for i, change in enumerate(decision.changes):
                events.append(self.event(change, fid, "decide", i, change.name))
        deciding = (f, ext, vec, row)
        try:
            self.commit(events, vec, deciding=deciding)
        except InvariantError as exc:  # the decision does not fit the memory: record, go on
            events = [e for e in events if e.type == LLMCalled.name]
            events.append(self.refused(fid, ReplyRefusal("route", str(exc)), None))
            self.commit(events, deciding=deciding)
            outcome = {"failure_id": fid}
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
            candidates = list(routing.known_causes(self.mem, [cid for cid, _ in screened]))
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
        self.saved = self._counts()  # nothing is pending: a retried pair restores this
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
        events = self.calls((*key, "consolidate"), reply, nodes=[a, b])
        decision = routing.after_consolidation(self.mem, a, b, sim, reply.value, reply.error)
        merged = isinstance(decision, Routed) and bool(decision.changes)
        if isinstance(decision, ReplyRefusal):
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
