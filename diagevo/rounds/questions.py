"""Generation requests, the candidates a trainer records against them and their votes (Eq. 3)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

from pydantic import ValidationError

from diagevo.catalog import QuestionGenerated, QuestionScored
from diagevo.config.sections import MethodConfig
from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.filtering import keep
from diagevo.curriculum.harmony import harmonize
from diagevo.curriculum.prompts import challenger_messages
from diagevo.curriculum.votes import votes
from diagevo.memory.sampler import GenerationRequest
from diagevo.results import Json
from diagevo.rounds.protocol import ProtocolError
from diagevo.text.formats import CandidateLine, FieldRefusal
from diagevo.views.admission import admitted_rows

if TYPE_CHECKING:
    from diagevo.log import Recorder

PURPOSES = {"curriculum": ("cur-requests", "q"), "challenger": ("chal-requests", "c")}


@dataclass(frozen=True, slots=True, kw_only=True)
class Request(GenerationRequest):
    """One generation request: the schedule's draw (mode, causes and their texts, node) and the
    question id to record its question under; ``messages()`` is the Appendix J challenger prompt."""

    question_id: str

    def generation_request(self) -> GenerationRequest:
        """The draw alone, without the question id."""
        return GenerationRequest(**{f.name: getattr(self, f.name) for f in fields(GenerationRequest)})

    def messages(self) -> list[dict[str, str]]:
        """The challenger's chat prompt for this draw (Appendix J): ``[{"role": "system", ...},
        {"role": "user", ...}]``, ready for a chat template or an OpenAI-style request."""
        return challenger_messages(self.generation_request())

    def to_json(self) -> dict[str, Json]:
        """The request as a line of ``diagevo round requests --jsonl``, its prompt included."""
        return {"question_id": self.question_id} | asdict(self.generation_request()) | {"messages": self.messages()}


@dataclass(frozen=True)
class Candidate:
    """A generated question (the request's fields echoed back) with the solver's N construction
    responses, or their extracted answers."""

    question_id: str
    mode: str
    text: str
    active_cause: str | None = None
    mastered_cause: str | None = None
    node: str | None = None
    responses: tuple[str, ...] | None = None
    answers: tuple[str | None, ...] | None = None
    # the answers of the solver to each rewording of the question the trainer wrote (their answer is
    # the question's): read by the shared-error check (filter.shared_error_check), ignored without it
    variant_answers: tuple[tuple[str | None, ...], ...] | None = None

    def __post_init__(self) -> None:
        """Refuse, naming the argument, what a question cannot be recorded with (a number for a
        text, a list of numbers for the answers): the checks of a ``round record`` line
        (``text.formats.CandidateLine``), in Python's terms. A list of responses or
        answers is kept as a tuple."""
        given = {f.name: getattr(self, f.name) for f in fields(self)}
        try:
            line = CandidateLine.model_validate(given)
        except ValidationError as exc:
            raise ProtocolError(FieldRefusal.of(exc, CandidateLine).in_python("Candidate")) from None
        for name in ("responses", "answers"):
            value = getattr(line, name)
            object.__setattr__(self, name, None if value is None else tuple(value))
        if line.variant_answers is not None:
            object.__setattr__(self, "variant_answers", tuple(tuple(v) for v in line.variant_answers))

    @classmethod
    def from_json(cls, obj: Mapping[str, object]) -> Candidate:
        """From one JSON object, a line of ``round record``
        (``text.formats.CandidateLine``: the request's own fields, texts and
        messages, may be carried along)."""
        if not isinstance(obj, Mapping):
            raise ProtocolError("a candidate is a JSON object")
        try:
            return cls.from_line(CandidateLine.model_validate(obj))
        except ValidationError as exc:
            raise ProtocolError(str(FieldRefusal.of(exc, CandidateLine))) from None

    @classmethod
    def from_line(cls, line: CandidateLine) -> Candidate:
        """From a checked line of ``round record``."""
        kept = {name: getattr(line, name) for name in ("active_cause", "mastered_cause", "node")}
        texts = {name: getattr(line, name) for name in ("responses", "answers", "variant_answers")}
        return cls(line.question_id, line.mode, line.the_text, **kept, **texts)


@dataclass(frozen=True)
class Scored:
    """A recorded candidate: votes, whether Eq. 3 keeps it, its pseudo-label and reference."""

    question_id: str
    text: str
    mode: str
    active_cause: str | None
    mastered_cause: str | None
    n: int
    p1: float
    p2: float
    pseudo_label: str | None
    retained: bool
    reference: str
    # the shared-error check's verdict, where it ran (filter.shared_error_check)
    majority_label: str | None = None  # the plain majority, where the check labelled with another answer
    check_score: float | None = None  # the label's harmonic mean of shares over the wordings (0: doubted)
    variant_labels: list[str | None] | None = None  # each rewording's own majority answer

    def to_json(self) -> dict[str, Json]:
        """The scored question as ``diagevo round record --json`` prints it."""
        return asdict(self)

    def event(self) -> QuestionScored:
        """The ``question.scored`` event that records these votes (one place builds it: the round
        that stores it and the loop that keeps it in hand)."""
        return QuestionScored(**{name: getattr(self, name) for name in QuestionScored.model_fields})


@dataclass(frozen=True, slots=True)
class LoggedQuestion:
    """A question as the log holds it: its ``question.generated`` (what was asked, for which
    causes) joined with its ``question.scored`` (the votes), and the round holding them."""

    round: int
    asked: QuestionGenerated
    votes: QuestionScored

    @property
    def question_id(self) -> str:
        return self.asked.question_id

    @property
    def text(self) -> str:
        return self.asked.text

    @property
    def pseudo_label(self) -> str:
        """The pseudo-label, empty where the votes gave none (as a failure's line holds it)."""
        return self.votes.pseudo_label or ""

    @property
    def known_causes(self) -> tuple[str, ...]:
        """The causes the question was generated for (what its diagnosis is told)."""
        return tuple(c for c in (self.asked.active_cause, self.asked.mastered_cause) if c is not None)

    def scored(self) -> Scored:
        """The question as :meth:`Round.record` returned it: each field from the event that holds it."""
        asked = QuestionGenerated.model_fields
        return Scored(
            **{f.name: getattr(self.asked if f.name in asked else self.votes, f.name) for f in fields(Scored)}
        )


def logged_questions(
    store: Recorder,
    run: str,
    *,
    t: int | None = None,
    upto: int | None = None,
    ids: Collection[str] | None = None,
    retained: bool = False,
) -> list[LoggedQuestion]:
    """The scored questions of round ``t`` (or of rounds 1..``upto``; ``ids``: those alone;
    ``retained``: those Eq. 3 kept), texts inline, in the order they were generated: the one
    reading of a round's questions (the round's own, the verl export and dump, the diagnosis,
    the dataset), as the rules admit them (:func:`~diagevo.views.admission.admitted_rows`)."""
    asked: dict[str, tuple[int, QuestionGenerated]] = {}
    votes: dict[str, QuestionScored] = {}
    keys = None if ids is None else {"question_id": ids}
    rows = admitted_rows(store, run, types=(QuestionGenerated, QuestionScored), in_round=t, keys=keys, texts=True)
    for e in rows:  # as the rules admit them: a refused row, a batch withdrawn, never met
        if upto is not None and not 1 <= e.round <= upto:
            continue
        match e.event:
            case QuestionGenerated() as q:
                asked[q.question_id] = (e.round, q)
            case QuestionScored() as v:
                votes[v.question_id] = v
    return [
        LoggedQuestion(rnd, q, votes[qid])
        for qid, (rnd, q) in asked.items()
        if qid in votes and (votes[qid].retained or not retained)
    ]


class Recorded(list[Scored]):
    """What :meth:`Round.record` returns: every candidate of round ``t`` of ``run`` scored, in
    order, the question ids the round held already (a retry stores nothing for those), and the
    batch this call appended (``FIRST-LAST``, what ``Round.withdraw`` takes back; None: nothing new)."""

    def __init__(
        self,
        run: str,
        t: int,
        scored: Iterable[Scored] = (),
        stored_before: Collection[str] = (),
        batch: str | None = None,
    ) -> None:
        super().__init__(scored)
        self.run, self.t = run, t
        self.stored_before = frozenset(stored_before)
        self.batch = batch

    @property
    def new(self) -> int:
        """How many of the questions this call stored."""
        return sum(1 for s in self if s.question_id not in self.stored_before)

    @property
    def retained(self) -> list[Scored]:
        """The questions Eq. 3 keeps, in order: those the trainer trains on."""
        return [s for s in self if s.retained]

    def to_dict(self) -> dict[str, Json]:
        """``round record --json``: ``questions``, every question with its ``retained`` flag;
        ``retained``, the retained ones only (as it was before ``questions``, for callers that
        read it); ``recorded``, how many this call stored; ``already_stored``, how many the round
        held already (a retry); ``batch``, the seqs it appended (``round withdraw --batch``)."""
        return {
            "run": self.run,
            "round": self.t,
            "recorded": self.new,
            "already_stored": len(self) - self.new,
            "batch": self.batch,
            "questions": [s.to_json() for s in self],
            "retained": [s.to_json() for s in self.retained],
        }


def score(c: Candidate, cfg: MethodConfig) -> Scored:
    """Votes over the construction answers and the double-confidence filter (Eq. 3); with
    ``filter.shared_error_check = "variants"`` and the candidate's rewordings answered, the label
    the wordings agree on (:mod:`diagevo.curriculum.harmony`)."""
    if (c.responses is None) == (c.answers is None):
        raise ProtocolError(f"question {c.question_id}: give exactly one of responses and answers")
    answers = list(c.answers) if c.answers is not None else [extract_answer(x) for x in c.responses or ()]
    if not answers:
        raise ProtocolError(f"question {c.question_id}: no construction responses")
    v = votes(answers)
    label, ref = v.label, v.reference  # ref: the earliest response of the label's class
    majority: str | None = None
    score_of: float | None = None
    variant_labels: list[str | None] | None = None
    wordings = [list(w) for w in c.variant_answers or () if w]
    checking = cfg.filter.shared_error_check == "variants"
    if checking and len(wordings) > cfg.filter.check_variants:
        raise ProtocolError(
            f"question {c.question_id}: {len(wordings)} rewordings' answers, more than filter.check_variants "
            f"({cfg.filter.check_variants}) asks for"
        )
    if checking and wordings and v.label is not None:
        h = harmonize(v, wordings)
        label, ref = (h.label, h.chosen.indices[0]) if h.chosen is not None else (None, None)
        score_of, variant_labels = h.score, list(h.variant_labels)
        if label is not None and label != v.label:  # relabelled (a doubted question keeps its majority's)
            majority = v.label
    retained = label is not None and keep(v.p1, v.p2, cfg.filter)
    reference = c.responses[ref] if retained and ref is not None and c.responses is not None else ""
    return Scored(
        c.question_id,
        c.text,
        c.mode,
        c.active_cause,
        c.mastered_cause,
        len(answers),
        v.p1,
        v.p2,
        v.label if label is None else label,  # a doubted question keeps its majority's label, unretained
        retained,
        reference,
        majority,
        score_of,
        variant_labels,
    )
