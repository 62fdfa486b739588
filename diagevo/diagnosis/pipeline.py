"""One round of diagnosis and memory maintenance (Sec. 2.3, Appendix J), as appended events.

Stage 1 runs Prompt 1 for every failure concurrently and stores each reply (``failure.diagnosed``
or ``diagnosis.failed``, with one ``llm.called`` per HTTP attempt). Everything after is
sequential, in failure-id order, against a working memory kept in step with the log:

* a match with a supplied cause -> ``failure.attributed`` (via recurrence; ``cause.reactivated``
  first when it is Mastered); neither a match nor a cause -> a non-skill slip, nothing more;
* a new cause -> stage 2a screening against every stored cause (θ_dup) -> Prompt 2 when some
  candidate passes -> a confirmed duplicate is attributed (via dedup, with its similarity);
* otherwise stage 3a shortlist (node score = best member similarity, top K) -> Prompt 3 ->
  stage 3.5 routing: ``node.created`` when asked, then ``cause.created`` (Active, 1).

A failure's decision is never split across transactions; the decisions of up to 16 failures
share one (a durable commit per failure would cost more than the decision), so a crash never
leaves half a failure and a resumed round redoes at most the last 16, identically. After
all failures, stage 4a screens node pairs on label embeddings (θ_merge) and Prompt 4 decides each
pair in a fixed order; the older node survives, and a node absorbed this round is not merged
again. Event ids derive from (run, round, failure, stage): a resumed round skips failures already
decided in the log, reuses stored Prompt 1 replies, and re-appending anything is a no-op.
"""

from __future__ import annotations

from diagevo.errors import BadInput, Conflict

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from diagevo.config import DiagnosisConfig
from diagevo.diagnosis.calibration import thresholds_for
from diagevo.diagnosis.index import VectorIndex
from diagevo.diagnosis.interface import (
    Diagnostician,
    Embedder,
    Extraction,
    ExtractionInput,
    KnownCause,
    NodeView,
    Reply,
)
from diagevo.events.keys import digest_event_id
from diagevo.events.schemas import EventIn, new_event
from diagevo.memory.deciders import DecisionError, decide_attribution, decide_merge, decide_new_cause
from diagevo.memory.fold import MEMORY_TYPES, InvariantError, evolve
from diagevo.memory.state import Memory
from diagevo.replay import load_memory

ProgressFn = Callable[[str, int, "int | None"], None]

# Stage-1 replies are appended in batches of this many failures (one transaction each).
FLUSH_EVERY = 64
# Stage 2a-3.5 decisions of this many failures share a transaction: a durable commit (an fsync
# with SQLite's synchronous=FULL) per failure would cost more than deciding it. A crash loses at
# most these decisions, which a resumed round makes again, identically.
DECISIONS_PER_COMMIT = 16
_PAIR_BLOCK = 512  # rows of the node-similarity matrix computed at a time


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
    run: str
    round: int
    theta_dup: float
    theta_merge: float
    failures: int = 0
    resumed: int = 0  # already decided in the log: skipped
    reused_replies: int = 0  # Prompt 1 reply found in the log: the model was not asked again
    recurrences: int = 0
    duplicates: int = 0
    reactivations: int = 0
    new_causes: int = 0
    new_nodes: int = 0
    non_skill: int = 0
    failed: int = 0
    dedup_truncated: int = 0  # Prompt 2 saw only the best diagnosis.dedup_candidates screened causes
    merge_candidates: int = 0
    merges: int = 0
    llm_calls: int = 0
    extraction_s: float = 0.0
    maintenance_s: float = 0.0
    maintenance_model_s: float = 0.0  # inside the diagnostician and the embedder
    consolidation_s: float = 0.0
    outcomes: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def event_id(run: str, round: int, *parts: object) -> str:
    """Deterministic id of a diagnosis event: the idempotency key of a resumed round."""
    return digest_event_id(run, round, *parts)


def _no_progress(phase: str, done: int, total: int | None) -> None:
    """Report nothing."""


def _call_events(run: str, round: int, key: tuple[object, ...], reply: Reply[Any], **extra: Any) -> list[EventIn]:
    out = []
    for i, c in enumerate(reply.calls):
        data = {k: v for k, v in c.items() if k not in ("stage", "model", "latency_s", "prompt_tokens", "completion_tokens", "raw")}
        out.append(
            new_event(
                "llm.called",
                run,
                round,
                event_id(run, round, *key, "call", i),
                stage=c.get("stage", key[-1]),
                model=c.get("model", reply.model),
                latency_s=float(c.get("latency_s", 0.0)),
                prompt_tokens=c.get("prompt_tokens"),
                completion_tokens=c.get("completion_tokens"),
                raw=c.get("raw", ""),
                **extra,
                **data,
            )
        )
    return out


def _prior_outcomes(store: Any, run: str, round: int) -> tuple[dict[str, Extraction], set[str]]:
    """What the log already holds for this round: stored Prompt 1 replies, decided failures."""
    types = ("failure.diagnosed", "failure.attributed", "cause.created", "diagnosis.failed")
    diagnosed: dict[str, Extraction] = {}
    decided: set[str] = set()
    for _seq, _rnd, etype, d in store.iter_rows(run, types=types, round=round):
        fid = d.get("failure_id")
        if fid is None:
            continue
        if etype == "failure.diagnosed":
            ext = Extraction(d.get("matched_cause"), d.get("error_cause"))
            diagnosed[fid] = ext
            if ext.matched_cause_id is None and ext.error_cause is None:
                decided.add(fid)  # a non-skill slip: nothing follows
        else:
            decided.add(fid)
    return diagnosed, decided


def _counts(summary: DiagnosisSummary) -> tuple[dict[str, Any], int]:
    """The summary's counters and how many outcomes it lists (outcomes are only appended)."""
    return {k: v for k, v in summary.__dict__.items() if k != "outcomes"}, len(summary.outcomes)


class MemoryMoved(Exception):
    """Another producer changed the memory since the working memory was read."""


Pending = tuple[FailureInput, Extraction, "np.ndarray | None", "int | None"]


class _Round:
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

    def flush(self) -> None:
        """Append the deferred decisions in one transaction, if the memory they were decided
        against is still the log's; else raise :class:`MemoryMoved` and append nothing."""
        if not self.pending:
            return
        pending = self.pending

        def check(read: Any) -> list[EventIn]:
            foreign = read(MEMORY_TYPES, after_seq=self.seen_seq)
            if foreign:
                raise MemoryMoved(f"{len(foreign)} memory events by another producer")
            return pending

        result = self.store.append_checked(self.run, check)
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
        _, decided = _prior_outcomes(self.store, self.run, self.round)
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

    def eid(self, *parts: object) -> str:
        return event_id(self.run, self.round, *parts)

    def event(self, type: str, *parts: object, **data: Any) -> EventIn:
        return new_event(type, self.run, self.round, self.eid(*parts), **data)

    def failed(self, fid: str | None, stage: str, reason: str, reply: Reply[Any] | None, *key: object) -> EventIn:
        self.summary.failed += 1
        return self.event(
            "diagnosis.failed",
            *key,
            "failed",
            failure_id=fid,
            stage=stage,
            reason=reason[:500],
            model=reply.model if reply else getattr(self.dx, "model_name", ""),
            raw=reply.raw if reply else "",
        )

    def commit(self, events: list[EventIn], vec: np.ndarray | None = None, *, defer: bool = False) -> None:
        """Validate the batch against the working memory, append it (``defer``: with the next
        few failures' batches, see DECISIONS_PER_COMMIT), then adopt the result."""
        mem = self.mem
        for ev in events:
            if ev.type in MEMORY_TYPES:
                mem = evolve(mem, ev.type, self.round, ev.data)
        if events:
            self.pending.extend(events)
            self.pending_failures += 1
            if self.current is not None:
                self.pending_inputs.append(self.current)
            if not defer or self.pending_failures >= DECISIONS_PER_COMMIT:
                self.flush()
        self.mem = mem
        for ev in events:
            if ev.type in MEMORY_TYPES:
                self.index.apply(ev.type, ev.data, vec if ev.type == "cause.created" else None)
            if ev.type == "llm.called":
                self.summary.llm_calls += 1

    async def timed(self, coro: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await coro
        finally:
            self.model_s += time.perf_counter() - t0

    # --- stage 1 --------------------------------------------------------------------------------

    def known(self, f: FailureInput) -> tuple[KnownCause, ...]:
        return tuple(
            KnownCause(cid, self.mem.causes[cid].state.value, self.mem.causes[cid].description) for cid in f.known_causes
        )

    async def extract_all(self, items: Sequence[FailureInput]) -> dict[str, Extraction]:
        out: dict[str, Extraction] = {}
        if not items:
            return out

        async def one(f: FailureInput) -> tuple[FailureInput, Reply[Extraction] | None, str | None]:
            item = ExtractionInput(
                f.failure_id, f.question_id, f.question, f.pseudo_label, f.response, f.reference, self.known(f)
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
            events = _call_events(self.run, self.round, (fid, "extract"), reply, failure_id=fid) if reply else []
            value = reply.value if reply else None
            if reply is None or value is None:
                # without a reply, ``crash`` always holds the exception that prevented it
                reply_error = reply.error if reply is not None else None
                events.append(self.failed(fid, "extract", crash or reply_error or "no decision", reply, fid, "extract"))
            elif value.matched_cause_id is not None and value.matched_cause_id not in f.known_causes:
                reason = f"matched_cause_id {value.matched_cause_id!r} was not supplied"
                events.append(self.failed(fid, "extract", reason, reply, fid, "extract"))
            else:
                events.append(
                    self.event(
                        "failure.diagnosed",
                        fid,
                        "extract",
                        failure_id=fid,
                        matched_cause=value.matched_cause_id,
                        error_cause=value.error_cause,
                        model=reply.model,
                        raw=reply.raw,
                    )
                )
                out[fid] = value
            self.summary.llm_calls += sum(1 for e in events if e.type == "llm.called")
            buffer.extend(events)
            done += 1
            if done % FLUSH_EVERY == 0:
                self.store.append(buffer)
                buffer = []
            self.progress("extract", done, len(items))
        if buffer:
            self.store.append(buffer)
        return out

    # --- stages 2a-3.5 --------------------------------------------------------------------------

    async def maintain(self, f: FailureInput, ext: Extraction, vec: np.ndarray | None, row: int | None) -> None:
        fid = f.failure_id
        self.current = (f, ext, vec, row)
        outcome: dict[str, Any] = {"failure_id": fid}
        events: list[EventIn] = []
        changes: list[tuple[str, dict[str, Any]]] = []
        try:
            if ext.matched_cause_id is not None:
                changes = decide_attribution(self.mem, fid, ext.matched_cause_id, "recurrence")
                outcome.update(outcome="recurrence", cause=ext.matched_cause_id)
            elif ext.error_cause is None or vec is None:
                self.summary.non_skill += 1
                self.summary.outcomes.append({**outcome, "outcome": "non_skill"})
                return
            else:
                changes, failed = await self.route_new(fid, ext.error_cause, vec, row, events, outcome)
                if failed is not None:
                    events.append(failed)
        except DecisionError as exc:
            events.append(self.failed(fid, "route", str(exc), None, fid, "route"))
            changes = []
        for i, (etype, data) in enumerate(changes):
            events.append(self.event(etype, fid, "decide", i, etype, **data))
        try:
            self.commit(events, vec, defer=True)
        except InvariantError as exc:  # the decision does not fit the memory: record, go on
            events = [e for e in events if e.type == "llm.called"]
            events.append(self.failed(fid, "route", str(exc), None, fid, "route"))
            self.commit(events, defer=True)
            outcome = {"failure_id": fid}
        finally:
            self.current = None
        self._count(events, outcome)

    def _count(self, events: list[EventIn], outcome: dict[str, Any]) -> None:
        s = self.summary
        types = [e.type for e in events]
        if "diagnosis.failed" in types:
            outcome["outcome"] = "failed"
        for e in events:
            if e.type == "failure.attributed":
                if e.data["via"] == "recurrence":
                    s.recurrences += 1
                else:
                    s.duplicates += 1
            elif e.type == "cause.reactivated":
                s.reactivations += 1
                outcome["reactivated"] = True
            elif e.type == "cause.created":
                s.new_causes += 1
                outcome.update(cause=e.data["cause_id"], node=e.data["node_id"])
            elif e.type == "node.created":
                s.new_nodes += 1
        s.outcomes.append(outcome)

    async def route_new(
        self,
        fid: str,
        description: str,
        vec: np.ndarray,
        row: int | None,
        events: list[EventIn],
        outcome: dict[str, Any],
    ) -> tuple[list[tuple[str, dict[str, Any]]], EventIn | None]:
        theta_dup = self.summary.theta_dup
        sims = self.index.cause_sims(vec, row)
        # stage 2a: every stored cause at or above θ_dup is a candidate for Prompt 2 (the cap only
        # guards the prompt's length; a cut list is counted)
        screened, passed = self.index.screen(sims, theta_dup, max(1, self.cfg.dedup_candidates), vec)
        if passed > len(screened):
            self.summary.dedup_truncated += 1
        if screened:
            sim_of = dict(screened)
            candidates = [
                KnownCause(cid, self.mem.causes[cid].state.value, self.mem.causes[cid].description) for cid, _ in screened
            ]
            reply = await self.timed(self.dx.deduplicate(description, candidates))
            events.extend(_call_events(self.run, self.round, (fid, "deduplicate"), reply, failure_id=fid))
            dedup = reply.value
            if dedup is None:
                return [], self.failed(fid, "deduplicate", reply.error or "no decision", reply, fid, "deduplicate")
            if dedup.duplicate:
                if dedup.matched_cause_id not in sim_of:
                    reason = f"matched_cause_id {dedup.matched_cause_id!r} was not among the candidates"
                    return [], self.failed(fid, "deduplicate", reason, reply, fid, "deduplicate")
                sim = round(sim_of[dedup.matched_cause_id], 6)
                outcome.update(outcome="duplicate", cause=dedup.matched_cause_id, similarity=sim)
                return decide_attribution(self.mem, fid, dedup.matched_cause_id, "dedup", similarity=sim), None
        # stage 3a: shortlist of nodes by best member similarity
        shortlist = self.index.node_shortlist(sims, max(1, self.cfg.shortlist_k), vec)
        views = [
            NodeView(nid, self.mem.nodes[nid].label, (self.mem.causes[best].description,) if best else ())
            for nid, _score, best in shortlist
        ]
        reply = await self.timed(self.dx.assign_node(description, views))
        events.extend(_call_events(self.run, self.round, (fid, "assign_node"), reply, failure_id=fid))
        choice = reply.value
        if choice is None:
            return [], self.failed(fid, "assign_node", reply.error or "no decision", reply, fid, "assign_node")
        # stage 3.5: routing in code
        if choice.new_node_label is not None:
            outcome["outcome"] = "new_node"
            return decide_new_cause(self.mem, fid, description, new_node_label=choice.new_node_label), None
        if choice.assigned_node not in {v.id for v in views}:
            reason = f"assigned_node {choice.assigned_node!r} was not on the shortlist"
            return [], self.failed(fid, "assign_node", reason, reply, fid, "assign_node")
        outcome["outcome"] = "existing_node"
        return decide_new_cause(self.mem, fid, description, node_id=choice.assigned_node), None

    # --- stage 4a ---------------------------------------------------------------------------------

    def merge_candidates(self) -> list[tuple[float, str, str]]:
        """Node pairs with label similarity >= θ_merge, best first, then by node age."""
        t0 = time.perf_counter()
        ids, vecs = self.index.node_vectors(self.mem)
        self.model_s += time.perf_counter() - t0
        theta = self.summary.theta_merge
        pairs: list[tuple[float, int, int]] = []
        exact = vecs.astype(np.float64)  # rounded float64 products: the same pairs in any run
        for start in range(0, len(ids), _PAIR_BLOCK):
            block = np.round(exact[start : start + _PAIR_BLOCK] @ exact.T, 6)
            for r, row in enumerate(block):
                i = start + r
                for j in np.flatnonzero(row[i + 1 :] >= theta) + i + 1:
                    pairs.append((float(row[j]), i, int(j)))
        pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
        return [(s, ids[i], ids[j]) for s, i, j in pairs]

    def view(self, node_id: str) -> NodeView:
        causes = tuple(c.description for c in self.mem.members(node_id))
        return NodeView(node_id, self.mem.nodes[node_id].label, causes)

    async def consolidate(self) -> None:
        pairs = self.merge_candidates()
        self.summary.merge_candidates = len(pairs)
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
        if a in absorbed or b in absorbed or a not in self.mem.nodes or b not in self.mem.nodes:
            return False
        key = ("merge", a, b)
        reply = await self.timed(self.dx.consolidate(self.view(a), self.view(b)))
        events = _call_events(self.run, self.round, (*key, "consolidate"), reply, nodes=[a, b])
        decision = reply.value
        merged = False
        if decision is None:
            reason = f"nodes {a} and {b}: {reply.error or 'no decision'}"
            events.append(self.failed(None, "consolidate", reason, reply, *key))
        elif decision.merge:
            for i, (etype, data) in enumerate(decide_merge(self.mem, a, b, decision.merged_label, similarity=sim)):
                events.append(self.event(etype, *key, "decide", i, **data))
            merged = True
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
) -> DiagnosisSummary:
    """Diagnose the round's failures and maintain the memory; everything is appended to ``store``.

    ``round`` must be the run's open round (its last committed round + 1). ``index`` (a
    :class:`VectorIndex`, LanceDB-backed when it has a path) is caught up with the log first and
    after the round; without one, vectors are computed from the memory's texts. ``memory`` is
    the run's memory as it stands (read from the log when not given).
    """
    progress = progress or _no_progress
    ids = [f.failure_id for f in failures]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise BadInput(f"failure {dup!r} appears twice")
    if memory is None:  # the memory now (the round protocol hands it over, folded from M_{t-1})
        memory = load_memory(store, run)
    if memory.committed + 1 != round:
        raise Conflict(f"round {round} is not open in run {run!r}: its last committed round is {memory.committed}")
    for f in failures:
        unknown = [c for c in f.known_causes if c not in memory.causes]
        if unknown:
            raise BadInput(f"failure {f.failure_id!r}: unknown known cause {unknown[0]!r}")
    if index is None:
        index = VectorIndex(embedder)
    elif index.embedder.name != embedder.name:
        raise BadInput(f"the index holds {index.embedder.name} vectors, not {embedder.name}")
    th = thresholds_for(cfg, embedder.name)
    summary = DiagnosisSummary(run=run, round=round, theta_dup=th.dup, theta_merge=th.merge, failures=len(failures))
    state = _Round(store, run, round, diagnostician, index, cfg, memory, summary, progress)

    try:
        return await _run(state, store, run, round, failures, embedder, index, progress)
    finally:
        aclose = getattr(diagnostician, "aclose", None)
        if aclose is not None:  # the HTTP pool belongs to this event loop
            await aclose()


async def _run(
    state: _Round,
    store: Any,
    run: str,
    round: int,
    failures: Sequence[FailureInput],
    embedder: Embedder,
    index: VectorIndex,
    progress: ProgressFn,
) -> DiagnosisSummary:
    summary = state.summary
    diagnosed, decided = _prior_outcomes(store, run, round)
    todo = sorted((f for f in failures if f.failure_id not in decided), key=lambda f: f.failure_id)
    summary.resumed = len(failures) - len(todo)
    reused = {f.failure_id: diagnosed[f.failure_id] for f in todo if f.failure_id in diagnosed}
    summary.reused_replies = len(reused)

    t0 = time.perf_counter()
    fresh = await state.extract_all([f for f in todo if f.failure_id not in reused])
    summary.extraction_s = time.perf_counter() - t0
    extractions = {**reused, **fresh}

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
    await state.settle()
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
