"""One round of diagnosis and memory maintenance (Sec. 2.3, Appendix J), as appended events.

The modules form one order: :mod:`~diagevo.diagnosis.routing` states the rules, stage by stage;
:class:`~diagevo.diagnosis.stages.DiagnosisPass` asks the diagnostician and appends what the
rules decide; this module checks a call's inputs before any model is called and runs one pass.

Stage 1 runs Prompt 1 for every failure concurrently; everything after is sequential, in
failure-id order, against a working memory kept in step with the log. A failure's decision is
never split across transactions and the decisions of up to 16 failures share one (a durable
commit per failure would cost more than the decision), so a crash never leaves half a failure.
Event ids derive from (run, round, failure, stage): a resumed round skips failures already
decided in the log, reuses stored Prompt 1 replies, and re-appending anything is a no-op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from diagevo.catalog import FailureRecorded, of_type
from diagevo.catalog.failure import Failure
from diagevo.config.limits import LimitsConfig
from diagevo.config.sections import DiagnosisConfig
from diagevo.diagnosis import tools
from diagevo.diagnosis.interface import Diagnostician, Embedder
from diagevo.diagnosis.stages import DiagnosisPass
from diagevo.diagnosis.summary import DiagnosisSummary
from diagevo.errors import BadInput, DiagnosticianBroken, DiagnosticianDown
from diagevo.generation.openai_client import unanswered
from diagevo.log import Recorder
from diagevo.memory.state import Memory
from diagevo.rounds import (
    Round,
    logged_questions,
    refuse_reused_failures,
    require_open,
    round_state,
)
from diagevo.rounds.protocol import OutOfOrder
from diagevo.rounds.state import RunState
from diagevo.runtime import aio
from diagevo.runtime.progress import ProgressFn
from diagevo.schemas import current_limits, text_limits
from diagevo.text.calls import validated
from diagevo.text.parsing import quoted
from diagevo.views.admission import admitted_rows
from diagevo.views.index import VectorIndex
from diagevo.views.memory import load_memory


async def diagnose_round(
    *,
    store: Recorder,
    run: str,
    t: int,
    failures: Sequence[Failure],
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
    if memory is None:  # the memory now (the round protocol hands it over, folded from M_{t-1})
        memory = load_memory(store, run)
    if memory.committed + 1 != t:
        raise OutOfOrder(f"round {t} is not open in run {run!r}: its last committed round is {memory.committed}")
    _check_inputs(failures, memory)
    if index is not None and index.embedder.name != embedder.name:
        raise BadInput(f"the index holds {index.embedder.name} vectors, not {embedder.name}")
    diagnosis = DiagnosisPass(store, run, t, diagnostician, embedder, cfg, memory, index=index, progress=progress)
    try:
        with text_limits(limits or current_limits()):
            return await diagnosis.diagnose(failures)
    finally:
        aclose = getattr(diagnostician, "aclose", None)
        if aclose is not None:  # the HTTP pool belongs to this event loop
            await aclose()


def _check_inputs(failures: Sequence[Failure], memory: Memory) -> None:
    """Refuse failures given twice or naming causes the memory does not hold."""
    seen: set[str] = set()
    for f in failures:
        if f.failure_id in seen:
            raise BadInput(f"failure {f.failure_id!r} appears twice")
        seen.add(f.failure_id)
        unknown = [c for c in f.known_causes if c not in memory.causes]
        if unknown:
            raise BadInput(f"failure {f.failure_id!r}: unknown known cause {unknown[0]!r}")


def refuse_contradictions(store: Recorder, run: str, t: int, failures: Sequence[Failure]) -> None:
    """:class:`BadInput` naming the first given failure whose question text, pseudo-label or
    known causes differ from those round ``t`` recorded for its question: the diagnosis would
    explain a failure the log does not hold (a question the round does not hold is left to
    :meth:`~diagevo.rounds.Round.record_failures`, which refuses it)."""
    named = sorted({f.question_id for f in failures})
    if not named:
        return
    logged = {q.question_id: q for q in logged_questions(store, run, t=t, ids=named)}
    for f in failures:
        q = logged.get(f.question_id)
        if q is None:
            continue
        for name, given, held in (
            ("question", f.question, q.text),
            ("pseudo_label", f.pseudo_label, q.pseudo_label),
            ("known_causes", tuple(f.known_causes), q.known_causes),
        ):
            if given != held:
                raise BadInput(
                    f"failure {quoted(f.failure_id, 60)}: its {name} {_shown(given)} is not the one round {t} "
                    f"recorded for question {quoted(f.question_id, 60)} ({_shown(held)})"
                )


def refuse_unnamed(failures: Sequence[Failure]) -> None:
    """:class:`BadInput` naming the first failure built without its question or pseudo-label: a
    round never opened holds no question to take them from, and the diagnosis reads both."""
    for f in failures:
        missing = f.unnamed()
        if missing:
            raise BadInput(
                f"failure {quoted(f.failure_id, 60)} has no {missing[0]}: a round never opened holds no question "
                "to take it from"
            )


def _shown(value: Any) -> str:
    """A text or a tuple of cause ids as a message shows it, bounded (``()`` for no causes)."""
    if not isinstance(value, tuple):
        return quoted(value, 60)
    text = repr(value)  # ids quoted, control characters escaped
    return text if len(text) <= 120 else f"{text[:120]}…"


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


def failure_inputs(store: Recorder, run: str, t: int) -> list[Failure]:
    """The failures recorded in round ``t``, with their questions' fields, as the diagnosis reads them."""
    questions = {q.question_id: q for q in logged_questions(store, run, t=t)}
    rows = admitted_rows(
        store, run, types=(FailureRecorded,), in_round=t, texts=True
    )  # a withdrawn one: never recorded
    recorded = of_type(FailureRecorded, rows)
    out = []
    for f in sorted(recorded, key=lambda f: f.failure_id):
        q = questions[f.question_id]
        out.append(Failure.from_log(f, question=q.text, pseudo_label=q.pseudo_label, known_causes=q.known_causes))
    return out


@validated
def diagnose(
    rnd: Round,
    *,
    diagnostician: Diagnostician | str = "llm",
    embedder: Embedder | str | None = None,
    llm_url: str | None = None,
    model: str | None = None,
    cfg: DiagnosisConfig | None = None,
    index: VectorIndex | None = None,
    failures: Sequence[Failure] | None = None,
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
    summary counts which was done. A failure recorded or diagnosed in another round of the run
    is refused before any model call."""
    st = round_state(rnd.store, rnd.run)
    named = {"llm_url": llm_url, "model": model, "embedder": embedder if isinstance(embedder, str) else None}
    cfg = _checked_config(rnd, st, cfg, diagnostician, failures, named)
    memory = rnd.memory()
    # before any model call (the decisive check is the append's, under the lock): a failure
    # of another round, diagnosed here again, would be counted twice
    refuse_reused_failures(rnd.store, rnd.run, rnd.t, {f.failure_id: None for f in failures or ()})
    if failures is not None and rnd.t in st.started:  # what the diagnostician reads is what the log holds
        refuse_contradictions(rnd.store, rnd.run, rnd.t, failures)
    elif failures is not None:
        refuse_unnamed(failures)
    emb = embedder if embedder is not None and not isinstance(embedder, str) else tools.embedder_for(cfg)
    dx = tools.diagnostician_for(diagnostician, cfg, emb) if isinstance(diagnostician, str) else diagnostician
    # the endpoints asked once before anything is appended: one that is down fails the call here,
    # instead of every failure of the round being marked failed one by one
    tools.check_endpoints(cfg, dx, embedder=embedder is None or isinstance(embedder, str))
    recorded = already = unrecorded = 0
    if failures is None:
        failures = failure_inputs(rnd.store, rnd.run, rnd.t)
        already = len(failures)
    elif rnd.t in st.started:  # the trainer drives the round protocol: the story needs the failures
        _check_inputs(failures, memory)
        recorded = rnd.record_failures(failures)
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
    st: RunState,
    cfg: DiagnosisConfig | None,
    diagnostician: Diagnostician | str,
    failures: object,
    named: dict[str, str | None],
) -> DiagnosisConfig:
    """The call's ``[diagnosis]``, after the round's state and the diagnostician's name are
    checked, before anything is called: the recorded failures need an open round; given ones,
    the next round. ``cfg`` (default: the run's) with the names given, and the run's own rule for
    how many failed diagnoses stop the round (as its commit checks it)."""
    if failures is None:
        require_open(st, rnd.t, "diagnose")
    elif rnd.t != st.last_committed + 1:
        raise OutOfOrder(
            f"round {rnd.t} is not open in run {rnd.run!r}: its last committed round is {st.last_committed}"
        )
    share = rnd.config.diagnosis.max_failed_share
    cfg = tools.diagnosis_config(cfg or rnd.config.diagnosis, max_failed_share=share, **named)
    if isinstance(diagnostician, str):
        tools.check_name(diagnostician, cfg)
    return cfg
