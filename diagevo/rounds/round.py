"""Round ``t`` of a run, the unit a trainer works in: its config and M_{t-1} read once, its steps."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from diagevo.api import version
from diagevo.catalog import (
    CATALOG,
    MEMORY_TYPES,
    MILESTONES,
    BatchWithdrawn,
    CausePromoted,
    CheckpointWritten,
    EvalRecorded,
    Event,
    FailureRecorded,
    MetricsRecorded,
    PromotionsDecided,
    QuestionGenerated,
    QuestionScored,
    RoundCommitted,
    of_type,
)
from diagevo.catalog.failure import Failure
from diagevo.config.reals import real_number
from diagevo.config.sections import MethodConfig
from diagevo.errors import BadInput, Call
from diagevo.log import AppendResult, Recorder, StoredEvent
from diagevo.memory.deciders import decide_promotions, promotion_evidence
from diagevo.memory.fold import InvariantError, fold, taken
from diagevo.memory.sampler import sample_requests
from diagevo.memory.schedule import schedule
from diagevo.memory.state import Memory
from diagevo.results import Json
from diagevo.rounds.failures import DIAGNOSES, DIAGNOSIS_STATE_TYPES, diagnosis_state, failure_event
from diagevo.rounds.metrics import check_metrics, check_summary, rank_metrics
from diagevo.rounds.protocol import MemoryMoved, OutOfOrder, ProtocolError, Reader, append_decision, round_event
from diagevo.rounds.questions import PURPOSES, Candidate, Recorded, Request, Scored, logged_questions, score
from diagevo.rounds.refusals import (
    DIAGNOSIS_TYPES,
    NOTE_TYPES,
    refuse_counted_twice,
    refuse_other_content,
    refuse_other_type,
    refuse_reused_failures,
)
from diagevo.rounds.runs import run_config
from diagevo.rounds.state import (
    RoundProgress,
    current_round,
    open_or_reopen,
    require_open,
    round_progress,
    round_state,
    seeded,
    state_from_rows,
)
from diagevo.rounds.withdraw import Batch, batch_of, rekeyed, standing, withdrawal
from diagevo.schemas import EventIn, InvalidEvent
from diagevo.text.calls import validated
from diagevo.text.parsing import quoted
from diagevo.text.words import plural
from diagevo.views.caches import refresh
from diagevo.views.memory import load_memory
from diagevo.views.stats import count_rounds
from diagevo.views.withdrawn import Withdrawn

NO_QUESTION = (
    "no question is recorded in it (deciding its promotions closes its evidence); record its questions first, "
    "or decide on none:"
)
PAST = {  # what a round whose promotions are decided takes next (Round.next_step), for a step it has passed
    "record_failures": "train the solver on its retained questions (verl: solver.parquet), then record and diagnose "
    "its failures (verl: its rollout dump), then commit it with",
    "diagnose": "diagnose its recorded failures, then commit it with",
    "commit": "commit it with",
}


class Round:
    """Round ``t`` of a run, the unit a trainer works in: the run's config and M_{t-1} are read
    from the log once, on first use, and every step of the round reuses them.

    The steps, in order: :meth:`requests` (any number of times), :meth:`record`, :meth:`promote`,
    :meth:`record_failures`, ``diagevo.diagnose(round)``, :meth:`commit`; :meth:`note` for the trainer's
    own bookkeeping. Each write re-checks the round's milestones under the store's append lock."""

    def __init__(self, store: Recorder, run: str, t: int) -> None:
        self.store = store
        """The event store the round reads and appends to."""
        self.run = run
        """The run's id."""
        self.t = t
        """The round's number t (1 for the first round; M_{t-1} is the memory it starts from)."""
        self._config: MethodConfig | None = None
        self._base: Memory | None = None
        self._head: Memory | None = None
        self.reopened = False
        """True when :meth:`open` found the round open already (its steps so far stand)."""
        self.last_batch: str | None = None
        """The batch (``FIRST-LAST``) the last :meth:`record_failures` of this object appended,
        None where it appended nothing: what :meth:`withdraw` takes back."""

    @classmethod
    @validated  # a run given as bytes or a number is BadInput naming it
    def open(cls, store: Recorder, run: str, t: int | None = None) -> Round:
        """Open the next round (``t`` defaults to it). A round open already is returned as it
        stands, nothing appended (every rank of a trainer opens it, a retry does too), with
        :attr:`reopened` True and :attr:`next_step` saying what it takes next: a trainer that
        forgot to commit round 2 gets round 2 back, ``next_step == "commit"``."""
        t, was_open = open_or_reopen(store, run, t)
        rnd = cls(store, run, t)
        rnd.reopened = was_open
        return rnd

    @classmethod
    @validated
    def current(cls, store: Recorder, run: str) -> Round:
        """The run's open round."""
        return cls(store, run, current_round(store, run))

    @property
    def config(self) -> MethodConfig:
        """The run's config as it stands for this round (``run.configured`` before it applied),
        with the components' own tables carried."""
        if self._config is None:
            self._config = run_config(self.store, self.run)
        return self._config

    @property
    def base(self) -> Memory:
        """M_{t-1}, the memory the round's schedule and decisions read (with the run's current
        ``k``: a ``run.configured`` after a fork may change it for the rounds that follow)."""
        if self._base is None:
            memory = load_memory(self.store, self.run, self.t - 1)
            k = self.config.memory.k
            self._base = memory if memory.k == k else replace(memory, k=k)
        return self._base

    @property
    def next_step(self) -> str:
        """What the round takes next, read from the log now, the same rule its steps refuse by:
        ``"open"`` (not opened yet); ``"record"`` (no question yet); ``"promote"`` (questions
        recorded: more may be); ``"record_failures"`` (promotions decided, nothing recorded since:
        the trainer's step on the retained questions, then its failures and metrics; a round
        without either may commit); ``"diagnose"`` (a recorded failure has no diagnosis, or more
        diagnoses failed than ``diagnosis.max_failed_share`` allows: the commit refuses until
        the round is diagnosed again); ``"commit"``; ``"committed"``. A trainer that resumes a
        round continues from here: every step before it is in the log."""
        st, run, t = round_state(self.store, self.run), self.run, self.t
        if t <= st.last_committed:
            return "committed"
        if t not in st.started:
            return "open"
        if t not in st.promoted:
            return "promote" if self._questions_standing() else "record"
        rows = list(self.store.rows(run, in_round=t, types=DIAGNOSIS_STATE_TYPES))
        pending, failed, total = diagnosis_state(rows, Withdrawn.of(self.store, run, t))
        if pending or self.config.diagnosis.too_many_failed(len(failed), total):
            return "diagnose"
        if not total and not self.store.count(run, in_round=t, types=(MetricsRecorded,)):
            return "record_failures"
        return "commit"

    def _questions_standing(self) -> bool:
        """Whether a recorded question of the round stands (a withdrawn batch was never recorded)."""
        run, t = self.run, self.t
        if not self.store.count(run, in_round=t, types=(QuestionScored,)):
            return False
        withdrawn = Withdrawn.of(self.store, run, t)
        return any(True for _ in withdrawn.standing(self.store.rows(run, in_round=t, types=(QuestionScored,))))

    def event(self, key: str, event: Event) -> EventIn:
        """``event`` of this round, under the id ``key`` gives it (the same on every retry)."""
        return round_event(self.run, self.t, key, event)

    # --- the steps ------------------------------------------------------------------------------
    def requests(self, n: int, *, purpose: str = "curriculum", seed: int | None = None) -> list[Request]:
        """``n`` requests from the schedule of M_{t-1}; the same for the same (run, round, seed,
        purpose), and the first ``m`` of them those of ``requests(m)``. ``purpose`` is
        ``curriculum`` (Q^cur) or ``challenger`` (Q^chal); ``n`` at most ``limits.requests``."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ProtocolError(f"n must be a whole number of at least 0, not {quoted(n, 40)}")
        if purpose not in PURPOSES:
            raise ProtocolError(f"purpose must be one of {', '.join(PURPOSES)}, not {purpose!r}")
        most = self.config.limits.requests
        if n > most:  # refused before any is drawn: a typo's 10**9 would fill the memory first
            raise ProtocolError(f"n {n:,} is more than limits.requests {most:,} allows in one call")
        st = round_state(self.store, self.run)
        require_open(st, self.t, "draw requests")
        cfg, memory, t = self.config.memory, self.base, self.t
        phase, prefix = PURPOSES[purpose]
        rng = seeded(st.seed if seed is None else seed, t, phase)
        drawn = sample_requests(
            memory,
            schedule(memory),
            n,
            rng,
            generation=cfg.generation,
            fixed_free_ratio=cfg.fixed_free_ratio,
            stitching=cfg.stitching,
        )
        return [Request(question_id=f"{prefix}{t}-{i:05d}", **asdict(r)) for i, r in enumerate(drawn)]

    def record(self, candidates: Sequence[Candidate]) -> Recorded:
        """Vote, filter and append ``question.generated`` + ``question.scored`` for each candidate
        (one transaction); returns them scored, with the ids the round held already
        (:class:`Recorded`). Recording a question id again is a no-op, after the promotions too
        (a resumed trainer's retry); a new question after them is refused (:class:`OutOfOrder`).
        A question id the round never handed out is the trainer's own question (a free one it
        wrote, say): taken as any other, its causes of M_{t-1} and its node checked."""
        if isinstance(candidates, str | bytes | Mapping) or not isinstance(candidates, Iterable):
            raise ProtocolError(f"candidates must be a sequence of Candidate, not {type(candidates).__name__}")
        candidates = list(candidates)
        for c in candidates:
            if not isinstance(c, Candidate):
                raise ProtocolError(f"candidates must be Candidate objects, not {type(c).__name__}")
        run, t, cfg, memory = self.run, self.t, self.config, self.base
        seen: set[str] = set()
        scored: list[Scored] = []
        generated: list[EventIn] = []
        scores: list[EventIn] = []
        for c in candidates:
            if c.question_id in seen:
                raise ProtocolError(f"question {c.question_id} appears twice")
            seen.add(c.question_id)
            for cause in (c.active_cause, c.mastered_cause):
                if cause is not None and cause not in memory.causes:
                    raise ProtocolError(f"question {c.question_id}: unknown cause {cause!r} (not in M_{t - 1})")
            node = memory.causes[c.active_cause].node if c.active_cause is not None else None
            if c.node is not None and c.node != node:
                said = f"its active cause {c.active_cause} is under node {node}" if node else "a free question has none"
                raise ProtocolError(f"question {c.question_id}: node {quoted(c.node, 40)} does not fit ({said})")
            s = score(c, cfg)
            try:
                # each field the candidate's own; its mode checked here, refused as the candidate's
                question = QuestionGenerated(**{name: getattr(c, name) for name in QuestionGenerated.model_fields})
                generated.append(self.event(f"gen/{c.question_id}", question))
            except InvalidEvent as exc:
                raise ProtocolError(f"question {c.question_id}: {exc}") from None
            scores.append(self.event(f"score/{c.question_id}", s.event()))
            scored.append(s)
        stored: set[str] = set()

        def decide(read: Reader) -> list[EventIn]:
            st = state_from_rows(run, read(MILESTONES))
            require_open(st, t, "record questions")
            events = rekeyed(self.store, run, [*generated, *scores])  # ids a withdrawal freed take the next
            closed = "and its promotions are decided (the evidence is closed)"
            passed = (lambda said: self._passed(f"{said}, {closed}")) if t in st.promoted else None
            refuse_other_content(self.store, run, t, events, passed)
            refuse_counted_twice(self.store, run, events, memory)  # a question id is one question
            stored.clear()  # read under the append lock: what this append skips
            stored.update(
                q.question_id for q in of_type(QuestionGenerated, standing(self.store, run, read, QuestionGenerated, t))
            )
            if passed and not seen <= stored:  # a retry of questions recorded stores nothing
                new = quoted(sorted(seen - stored)[0], 80)
                raise passed(f"cannot record question {new} into round {t}: it is new (round {t + 1} takes it)")
            return events

        done = append_decision(self.store, run, decide)
        return Recorded(run, t, scored, stored & seen, batch_of(done))

    def questions(self) -> Recorded:
        """The questions the round holds, scored as :meth:`record` returned them, in the order
        they were recorded (every rank's): what a resumed trainer trains on once the promotions
        are decided, without generating them again."""
        scored = [q.scored() for q in logged_questions(self.store, self.run, t=self.t)]
        return Recorded(self.run, self.t, scored, [s.question_id for s in scored])

    def promote(self, *, allow_empty: bool = False) -> list[CausePromoted]:
        """Decide Eq. 5-6 once, from every candidate recorded in the round against M_{t-1};
        appends the promotions and ``promotions.decided``. Returns the promotions (the
        ``cause.promoted`` events appended). Refused while
        the round holds no question, unless ``allow_empty`` (a generation none of whose outputs
        parsed): deciding closes the round's evidence, and a question recorded later is refused."""
        run, t, cfg, memory = self.run, self.t, self.config.memory, self.base

        def decide(read: Reader) -> list[EventIn]:
            st = state_from_rows(run, read(MILESTONES))
            require_open(st, t, "decide promotions")
            if t in st.promoted:
                raise self._passed(f"promotions of round {t} in run {run!r} are decided already")
            evidence = promotion_evidence(standing(self.store, run, read, (QuestionGenerated, QuestionScored), t))
            if not evidence and not allow_empty:
                raise OutOfOrder(
                    f"cannot decide the promotions of round {t} in run {run!r}: {NO_QUESTION}",
                    self._call("promote", allow_empty=True),
                )
            promotions = decide_promotions(memory, evidence, cfg.theta_up, enabled=cfg.state_updates)
            events = [self.event(f"promote/{p.cause_id}", p) for p in promotions]
            closed = PromotionsDecided(promoted=[p.cause_id for p in promotions], candidates=len(evidence))
            events.append(self.event("promotions", closed))
            return events

        return list(of_type(CausePromoted, append_decision(self.store, run, decide).events))

    def record_failures(self, failures: Sequence[Failure | Mapping[str, object]]) -> int:
        """Append ``failure.recorded`` for failed optimization responses of retained questions
        (each a :class:`~diagevo.catalog.failure.Failure` or a mapping of its fields: ``failure_id``,
        ``question_id``, ``response``, ``reference``, the last two non-empty; a line of ``diagevo
        diagnose``'s FAILURES.jsonl is one as it is), after :meth:`promote` (before it:
        :class:`OutOfOrder`); returns how many were new. Recording the same failure again in this
        round is a no-op; a failure id the run holds in another round, or here with other
        content, is refused (``ProtocolError``, a :class:`~diagevo.errors.BadInput`) and nothing
        is stored."""
        run, t = self.run, self.t
        events: list[EventIn] = []
        given: dict[str, FailureRecorded] = {}
        wanted: dict[str, str] = {}  # question -> its first failure
        for f in failures:
            event = failure_event(f)
            fid = event.failure_id
            if fid in given:
                if given[fid] != event:
                    raise ProtocolError(f"failure {fid!r} appears twice with different content")
                continue
            given[fid] = event
            events.append(self.event(f"fail/{fid}", event))
            wanted.setdefault(event.question_id, fid)

        def decide(read: Reader) -> list[EventIn]:
            st = state_from_rows(run, read(MILESTONES))
            require_open(st, t, "record failures")
            if t not in st.promoted:
                raise OutOfOrder(
                    f"cannot record failures in round {t} of run {run!r} before its promotions are decided: "
                    "promote first (the failures come from training on the retained questions)",
                    self._call("promote"),
                )
            refuse_reused_failures(self.store, run, t, given)
            scored = of_type(QuestionScored, standing(self.store, run, read, QuestionScored, t))
            missing = sorted(set(wanted) - {v.question_id for v in scored if v.retained})
            if missing:
                q = missing[0]
                raise ProtocolError(f"failure {wanted[q]!r}: question {q!r} is not a retained question of round {t}")
            return rekeyed(self.store, run, events)

        done = append_decision(self.store, run, decide)
        self.last_batch = batch_of(done)
        return done.appended

    def withdraw(self, batch: str | Batch, *, reason: str = "") -> BatchWithdrawn:
        """Take back a batch of the round's recorded questions or failures before the commit
        (``batch``: ``FIRST-LAST``, the seqs of its first and last event, as :meth:`record`
        returns it in :attr:`Recorded.batch` and :attr:`last_batch` says of
        :meth:`record_failures`): appends ``batch.withdrawn``, decided at the log's head under
        the append lock, and the round reads from here on as if the batch had never been
        recorded (its promotions, diagnosis and commit counts; the same ids may be recorded
        again). Refused, each in one line: after the commit, a batch that is not the round's
        recorded questions or failures, one withdrawn already, questions once the promotions are
        decided, failures one of which is diagnosed (:mod:`diagevo.rounds.withdraw`)."""
        run, t = self.run, self.t
        chosen = batch if isinstance(batch, Batch) else Batch.parse(batch)
        if not isinstance(reason, str):
            raise ProtocolError(f"reason must be a string, not {type(reason).__name__}")

        def decide(read: Reader) -> list[EventIn]:
            st = state_from_rows(run, read(MILESTONES))
            require_open(st, t, f"withdraw batch {chosen}", redo=True)
            return [self.event(f"withdraw/{chosen}", withdrawal(self.store, run, t, st, chosen, reason))]

        (made,) = of_type(BatchWithdrawn, append_decision(self.store, run, decide).events)
        return made

    def memory(self) -> Memory:
        """The memory now: M_{t-1} and what the round has appended so far. The memory this call
        returns is kept, and the next folds on it only the rows appended since (a fold is a left
        fold: the same memory as folding from M_{t-1}), so a round of N decisions costs N, not
        N^2, however often its appends check against the log's head."""
        self._head = load_memory(self.store, self.run, since=self._head or self.base)
        return self._head

    def _refuse_foreign(self, events: Sequence[EventIn], types: frozenset[type[Event]], what: str) -> None:
        """Refuse events of another type than ``types`` takes, or of another run or round."""
        for ev in events:
            refuse_other_type(types, ev.type, what)
            if ev.run != self.run or ev.round != self.t:
                raise ProtocolError(
                    f"{what} of round {self.t} of run {self.run!r} names run {ev.run!r}, round {ev.round}"
                )

    def append_diagnosis(self, events: Sequence[EventIn], *, since_seq: int | None = None) -> AppendResult:
        """Append the diagnostician's decisions and notes of this round (``failure.diagnosed``,
        ``llm.called``, ``diagnosis.failed`` and the memory events decided; ``failure.recorded``
        only in a round never opened), decided under the append lock: the round must be the run's
        next to commit, and each decision must follow from its evidence and fold on the memory at
        the log's head (:func:`~diagevo.rounds.refusals.refuse_counted_twice`). With
        ``since_seq``, the seq of the memory they were decided against, they are refused with
        :class:`MemoryMoved` when another producer has appended a memory event since (the caller
        decides again)."""
        run, t = self.run, self.t
        self._refuse_foreign(events, DIAGNOSIS_TYPES, "a diagnosis")

        def decide(read: Reader) -> Sequence[EventIn]:
            st = state_from_rows(run, read(MILESTONES))
            if t != st.last_committed + 1:
                raise OutOfOrder(
                    f"round {t} is not open in run {run!r}: its last committed round is {st.last_committed}"
                )
            if t in st.started and any(ev.type == FailureRecorded.name for ev in events):
                raise ProtocolError(
                    f"round {t} of run {run!r} is open: its failures are recorded by record_failures, each of a "
                    "retained question"
                )
            decided = {d.failure_id: None for d in of_type(DIAGNOSES, events) if d.failure_id}
            refuse_reused_failures(self.store, run, t, decided)  # a failure is diagnosed once in a run
            if since_seq is not None:  # decided against a memory another producer has moved: decide again
                foreign = read(MEMORY_TYPES, after_seq=since_seq)
                if foreign:
                    raise MemoryMoved(f"{plural(len(foreign), 'memory event')} by another producer")
            changes = any(CATALOG[ev.type].folded for ev in events)
            refuse_counted_twice(self.store, run, events, self.memory() if changes else None)  # ...and founded
            return events

        return append_decision(self.store, run, decide)

    def record_metrics(self, metrics: Mapping[str, float], *, rank: int = 0, weight: float = 1.0) -> bool:
        """Record this rank's metrics of the round (``metrics.recorded``): every rank of a
        data-parallel trainer records its own, and :meth:`commit` folds them into the round's
        metrics, the mean of each weighted by ``weight`` (e.g. the rank's number of questions).
        Recording the same again is a no-op (False); other metrics for a rank that recorded
        already, or a round that is committed, are refused and nothing is stored."""
        run, t = self.run, self.t
        values = check_metrics(metrics)
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ProtocolError(f"rank must be a whole number of at least 0, not {rank!r}")
        try:
            weight = float(real_number(weight, f"weight of rank {rank}"))
        except BadInput as exc:
            raise ProtocolError(str(exc)) from None
        if weight <= 0:
            raise ProtocolError(f"weight of rank {rank} must be a finite number above 0, not {weight!r}")
        mine = MetricsRecorded(rank=rank, weight=weight, metrics=values)
        ev = self.event(f"metrics/rank{rank}", mine)

        def decide(read: Reader) -> list[EventIn]:
            require_open(state_from_rows(run, read(MILESTONES)), t, f"record the metrics of rank {rank}")
            recorded = list(of_type(MetricsRecorded, read((MetricsRecorded,), t=t)))
            for m in recorded:
                if m.rank == rank and (m.metrics, m.weight) != (mine.metrics, mine.weight):
                    raise ProtocolError(f"rank {rank} recorded other metrics in round {t} of run {run!r} already")
            rank_metrics([*(m for m in recorded if m.rank != rank), mine])  # a mean the commit can store
            return [ev]

        return append_decision(self.store, run, decide).appended == 1

    def note(self, key: str, event: Event) -> None:
        """Append a trainer's bookkeeping event: a ``PhaseCompleted``, ``CheckpointWritten``,
        ``CheckpointPruned`` or ``TrainStep`` (what changes the memory or where the round stands
        has its own step)."""
        refuse_other_type(NOTE_TYPES, event.name, "a note")
        self.notes([self.event(key, event)])

    def notes(self, events: Sequence[EventIn]) -> None:
        """Append a trainer's bookkeeping events of this round (the types :meth:`note` takes) in
        one transaction, while the round is open (decided under the append lock): a checkpoint
        written after phase p is named ``round{t:03d}-p``, a pruned one is one the run wrote
        before, never the latest of its phase (:func:`~diagevo.memory.checkpoints.checkpoint_rule`)."""
        run, t = self.run, self.t
        self._refuse_foreign(events, NOTE_TYPES, "a note")
        for ev in events:
            path = e.path if isinstance(e := ev.event, CheckpointWritten) else None
            if path is not None and path.startswith("/"):
                raise ProtocolError(
                    f"checkpoint path {path[:80]!r} is absolute: a checkpoint is noted by its name in the run's "
                    "folder (roundNNN-phase), where a resume looks for it"
                )

        def decide(read: Reader) -> Sequence[EventIn]:
            require_open(state_from_rows(run, read(MILESTONES)), t, "note")
            refuse_counted_twice(self.store, run, events)  # a checkpoint named by its event
            return events

        append_decision(self.store, run, decide)

    def progress(self) -> RoundProgress:
        """Where this round stands (see :class:`RoundProgress`)."""
        return round_progress(self.store, self.run, self.t)

    def commit(
        self,
        metrics: Mapping[str, float] | None = None,
        *,
        summary: Mapping[str, Json] | None = None,
        allow_undiagnosed: bool = False,
        allow_failed: bool = False,
    ) -> RoundCommitted:
        """Append ``eval.recorded`` (the metrics: those the ranks recorded with
        :meth:`record_metrics`, weighted, and ``metrics`` over them) and ``round.committed``: M_t
        is the memory here. The commit waits for no rank: the trainer's ranks meet first (a
        barrier of its own), and a rank's write after the commit is refused.
        Refused before promotions are decided and, unless ``allow_undiagnosed``, while a recorded
        failure has no diagnosis, and unless ``allow_failed``, while more of its failures' diagnoses
        failed than ``diagnosis.max_failed_share`` allows (or all did): their evidence would be
        lost from M_t. A commit so allowed says how many in ``failed_diagnoses_allowed``.
        ``summary``: the trainer's own figures to keep in ``round.committed`` (never a count the
        commit takes from the log: ``questions``, ``F`` ...). Returns the ``round.committed``
        event appended (counts, F_t, ε_{t+1}, the summary)."""
        run, t, base = self.run, self.t, self.base
        metrics = check_metrics(metrics or {})
        extra = check_summary(summary)  # the summary as the event's fields

        def decide(read: Reader) -> list[EventIn]:
            st = state_from_rows(run, read(MILESTONES))
            require_open(st, t, "commit")
            if t not in st.promoted:
                self._refuse_undecided(read)
            rows = read(None, t=t)
            allowed = self._failed_diagnoses_allowed(rows, allow_undiagnosed, allow_failed)
            counts = {} if allowed is None else {"failed_diagnoses_allowed": allowed}
            folded = fold(read(None, after_seq=base.last_seq), run, base)
            sched = schedule(folded)
            # the round's statistics as `memory stats` counts them (the rows the fold takes), and
            # the schedule it leaves
            lawful = Withdrawn.of(self.store, run, t).lawful(taken(rows, run, base))  # a refused one counts nothing
            counts.update(count_rounds(lawful).get(t, {}))
            ranks = list(of_type(MetricsRecorded, rows))
            round_metrics = {**rank_metrics(ranks), **metrics}  # the caller's own, over the ranks'
            events = [self.event("eval", EvalRecorded(metrics=round_metrics))] if round_metrics else []
            fields: dict[str, Any] = {**counts, **({"ranks": len(ranks)} if ranks else {})}
            committed = RoundCommitted(**fields, F=sched.F, epsilon_next=sched.epsilon, diagevo=version(), **extra)
            return [*events, self.event(RoundCommitted.name, committed)]

        try:
            (done,) = of_type(RoundCommitted, append_decision(self.store, run, decide).events)
        except InvariantError as exc:
            raise ProtocolError(f"cannot commit round {t}: {exc}") from None
        refresh(self.store, run)
        return done

    def _refuse_undecided(self, read: Reader) -> None:
        """A commit before the round's promotions are decided: the step it names must go through
        as printed (``--allow-empty`` where the round holds no question)."""
        t = self.t
        if not read((QuestionGenerated,), t=t):
            raise OutOfOrder(
                f"cannot commit round {t}: its promotions are not decided, and {NO_QUESTION}",
                self._call("promote", allow_empty=True),
            )
        raise OutOfOrder(f"cannot commit round {t}: its promotions are not decided", self._call("promote"), aside=True)

    def _failed_diagnoses_allowed(
        self, rows: Sequence[StoredEvent], allow_undiagnosed: bool, allow_failed: bool
    ) -> int | None:
        """Refuse a commit that would lose recorded failures' evidence from M_t unless allowed;
        how many failed diagnoses a commit so allowed leaves out (None: within the share)."""
        t = self.t
        pending, failed, total = diagnosis_state(rows, Withdrawn.of(self.store, self.run, t))
        if pending and not allow_undiagnosed:
            raise OutOfOrder(
                f"cannot commit round {t}: {plural(len(pending), 'recorded failure')} "
                f"{'is' if len(pending) == 1 else 'are'} not diagnosed (first: {pending[0]}); diagnose them, "
                "or commit without their evidence:",
                self._call("commit", allow_undiagnosed=True),
            )
        if not self.config.diagnosis.too_many_failed(len(failed), total):
            return None
        if not allow_failed:
            raise OutOfOrder(
                f"cannot commit round {t}: {len(failed)} of {plural(total, 'failure')} failed to diagnose, "
                f"more than diagnosis.max_failed_share {self.config.diagnosis.max_failed_share:g} allows "
                f"(first: {failed[0]}); diagnose the round again (only they are asked), or commit without "
                "their evidence:",
                self._call("commit", allow_failed=True),
            )
        return len(failed)

    def _passed(self, said: str) -> OutOfOrder:
        """A step the round has passed, refused (``said``), naming the step it goes on at."""
        step = self.next_step
        return OutOfOrder(f"{said}; round {self.t} goes on at its next step {step}: {PAST[step]}", self._call("commit"))

    def _call(self, step: str, **allow: bool) -> Call:
        """The call that takes ``step`` for this round, with the ``allow`` options given."""
        said = ", ".join([*(["metrics"] if step == "commit" else []), *(f"{k}=True" for k in allow)])
        return Call(f"Round.{step}", f"rnd.{step}({said})", run=self.run, round=self.t, **allow)
