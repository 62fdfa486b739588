"""One round of diagnosis and memory maintenance (Sec. 2.3, Appendix J), as appended events.

The routing rules, stage by stage, are :mod:`diagevo.diagnosis.routing`; the stages that ask the
diagnostician, stamp and append what the rules decide are :mod:`diagevo.diagnosis.stages`; this
module checks a call's inputs, runs the stages in order and keeps the round summary
(:mod:`diagevo.diagnosis.summary`).

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

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from diagevo.catalog import FailureRecorded
from diagevo.config import DiagnosisConfig
from diagevo.diagnosis.calibration import thresholds_for
from diagevo.diagnosis.given import refuse_contradictions
from diagevo.diagnosis.interface import Diagnostician, Embedder
from diagevo.diagnosis.outcomes import check_reachable, prior_outcomes, refuse_failed
from diagevo.diagnosis.stages import DiagnosisPass
from diagevo.diagnosis.summary import DiagnosisSummary, FailureInput, summary_counts
from diagevo.errors import BadInput
from diagevo.limits import LimitsConfig
from diagevo.memory.state import Memory
from diagevo.progress import ProgressFn, no_progress
from diagevo.rounds import FailureRecord, Round, logged_questions, refuse_reused_failures, require_open, round_state
from diagevo.rounds.protocol import OutOfOrder
from diagevo.views.index import VectorIndex
from diagevo.views.memory import load_memory
from diagevo.views.typed import of_type


async def diagnose_round(
    *,
    store: Any,
    run: str,
    t: int,
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

    ``t`` must be the run's open round (its last committed round + 1). ``index`` (a
    :class:`VectorIndex`, LanceDB-backed when it has a path) is caught up with the log first and
    after the round; without one, vectors are computed from the memory's texts. ``memory`` is
    the run's memory as it stands (read from the log when not given). ``limits``: what texts are
    stored and replies read up to (the run's ``[limits]``; by default those in effect).
    """
    progress = progress or no_progress
    if memory is None:  # the memory now (the round protocol hands it over, folded from M_{t-1})
        memory = load_memory(store, run)
    if memory.committed + 1 != t:
        raise OutOfOrder(f"round {t} is not open in run {run!r}: its last committed round is {memory.committed}")
    _check_inputs(failures, memory)
    if index is None:
        index = VectorIndex(embedder)
    elif index.embedder.name != embedder.name:
        raise BadInput(f"the index holds {index.embedder.name} vectors, not {embedder.name}")
    th = thresholds_for(cfg, embedder.name)
    summary = DiagnosisSummary(run=run, round=t, theta_dup=th.dup, theta_merge=th.merge, failures=len(failures))
    state = DiagnosisPass(store, run, t, diagnostician, index, cfg, memory, summary, progress)

    from diagevo.schemas import current_limits, text_limits

    try:
        with text_limits(limits or current_limits()):
            return await _run(state, store, run, t, failures, embedder, index, progress)
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
    state: DiagnosisPass,
    store: Any,
    run: str,
    t: int,
    failures: Sequence[FailureInput],
    embedder: Embedder,
    index: VectorIndex,
    progress: ProgressFn,
) -> DiagnosisSummary:
    summary = state.summary
    prior = prior_outcomes(store, run, t)
    todo = sorted((f for f in failures if f.failure_id not in prior.decided), key=lambda f: f.failure_id)
    summary.resumed = len(failures) - len(todo)
    state.tries = {f.failure_id: prior.tries[f.failure_id] for f in todo if f.failure_id in prior.tries}
    summary.retried = len(state.tries)
    reused = {f.failure_id: prior.diagnosed[f.failure_id] for f in todo if f.failure_id in prior.diagnosed}
    summary.reused_replies = len(reused)

    _record_unrecorded(state, store, run, failures)
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
    state.saved = summary_counts(summary)
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


def _record_unrecorded(state: DiagnosisPass, store: Any, run: str, failures: Sequence[FailureInput]) -> None:
    """Record the given failures the log does not hold (a round its trainer never opened): a
    diagnosis, and what it decides, follow from a failure recorded in the run."""
    ids = [f.failure_id for f in failures]
    if not ids:
        return
    held = {
        f.failure_id
        for f in of_type(FailureRecorded, store.rows(run, types=(FailureRecorded,), keys={"failure_id": ids}))
    }
    rnd = state.protocol
    events = [
        rnd.event(
            f"fail/{f.failure_id}",
            FailureRecorded(
                failure_id=f.failure_id, question_id=f.question_id, response=f.response, reference=f.reference
            ),
        )
        for f in failures
        if f.failure_id not in held
    ]
    if events:
        rnd.append_diagnosis(events)


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
    questions = {q.question_id: q for q in logged_questions(store, run, t=t)}
    recorded = of_type(FailureRecorded, store.rows(run, types=(FailureRecorded,), in_round=t, texts=True))
    out = []
    for f in sorted(recorded, key=lambda f: f.failure_id):
        q = questions[f.question_id]
        out.append(
            FailureInput(f.failure_id, f.question_id, q.text, q.pseudo_label, f.response, f.reference, q.known_causes)
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
    object, an embeddings endpoint URL, ``"static"`` or ``"local"``; by default the one
    ``diagnosis.embedder`` names (``"static"``: MiniLM distilled to token vectors). ``cfg``
    defaults to the run's diagnosis config; ``index`` (:func:`~diagevo.diagnosis.tools.vector_index`)
    keeps the vectors between rounds.

    The round's recorded failures are diagnosed, or ``failures`` given by the caller
    (``diagevo diagnose FILE``). Given failures are first recorded into an opened round
    (:meth:`Round.record_failures`: each must be of a retained question of the round); a round
    never opened (a trainer that records nothing else) need only be the next one, and its
    failures are recorded with their diagnosis (a decision follows from a recorded failure). The
    summary counts which was done. A
    failure recorded or diagnosed in another round of the run is refused before any model call."""
    from diagevo import aio
    from diagevo.diagnosis import tools

    st = round_state(rnd.store, rnd.run)
    named = {"llm_url": llm_url, "model": model, "embedder": embedder if isinstance(embedder, str) else None}
    cfg = _checked_config(rnd, st, cfg, diagnostician, failures, named)
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
            t=rnd.t,
            failures=failures,
            diagnostician=dx,
            embedder=emb,
            cfg=cfg,
            index=index,
            progress=progress,
            memory=memory,
            limits=rnd.config.limits,  # the run's [limits]: what its texts are stored up to
        )
    )
    summary.recorded, summary.already_recorded, summary.unopened = recorded, already, unrecorded
    refuse_failed(summary, rnd.config.diagnosis)
    return summary


def _checked_config(
    rnd: Round,
    st: Any,
    cfg: DiagnosisConfig | None,
    diagnostician: Diagnostician | str,
    failures: object,
    named: dict[str, str | None],
) -> DiagnosisConfig:
    """The call's ``[diagnosis]``, after the round's state and the diagnostician's name are
    checked, before anything is called: the recorded failures need an open round; given ones,
    the next round."""
    from diagevo.diagnosis import tools

    if failures is None:
        require_open(st, rnd.t, "diagnose")
    elif rnd.t != st.last_committed + 1:
        raise OutOfOrder(
            f"round {rnd.t} is not open in run {rnd.run!r}: its last committed round is {st.last_committed}"
        )
    cfg = _config_of(rnd, cfg, **named)
    if isinstance(diagnostician, str) and diagnostician not in tools.DIAGNOSTICIANS:
        raise BadInput(f"diagnostician {diagnostician[:40]!r}: use 'llm' (the paper's) or 'heuristic' (offline rules)")
    if isinstance(diagnostician, str) and diagnostician == "llm" and not cfg.llm_url:
        tools.llm_diagnostician(cfg)  # refuses, naming what to give
    return cfg


def _config_of(rnd: Round, cfg: DiagnosisConfig | None, **names: str | None) -> DiagnosisConfig:
    """The ``[diagnosis]`` a call uses: ``cfg`` (default: the run's) with the names given, and the
    run's own rule for how many failed diagnoses stop the round (as its commit checks it)."""
    from diagevo.diagnosis import tools

    share = rnd.config.diagnosis.max_failed_share
    return tools.diagnosis_config(cfg or rnd.config.diagnosis, max_failed_share=share, **names)


def _failure_record(f: FailureInput) -> FailureRecord:
    """A failure as ``failure.recorded`` holds it."""
    return {"failure_id": f.failure_id, "question_id": f.question_id, "response": f.response, "reference": f.reference}
