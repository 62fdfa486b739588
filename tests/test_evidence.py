"""Every decision in the log follows from its evidence, whoever writes it: ingest refuses the line
(its number and the rule), ``memory verify`` names the seq and the rule, and the round protocol
refuses the step (:mod:`diagevo.memory.counting`, one rule set for all three)."""

from __future__ import annotations

import json
import uuid

import pytest

from diagevo import rounds
from diagevo.catalog import CauseCreated, FailureAttributed, FailureDiagnosed, QuestionGenerated, RunForked
from diagevo.fork import fork_run
from diagevo.interchange import IngestError, ingest
from diagevo.log import Recorder
from diagevo.views.verify import verify_run
from diagevo.whatif import what_if
from tests.logs import Log, wire_event
from tests.test_rounds import RUN, answers, promote_on_a_question, round_one


def _round_two(store: Recorder) -> rounds.Round:
    """Round 1 committed (C1, C2 Active), round 2 open, its promotions decided."""
    round_one(store)
    rounds.open_round(store, RUN)
    promote_on_a_question(rounds.Round(store, RUN, 2))
    return rounds.Round(store, RUN, 2)


def _line_of(text: str, pattern: str) -> int:
    """The number of the first line of ``text`` holding ``pattern``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if pattern in line)


def _refused_and_named(store: Recorder, log: Log, pattern: str, rule: str) -> None:
    """Ingest refuses the log at the line holding ``pattern``, naming ``rule``; stored raw,
    ``memory verify`` names the same event by its seq and ``rule``."""
    text = log.jsonl()
    line = _line_of(text, pattern)
    with pytest.raises(IngestError, match=rf"^line {line}: {rule}: "):
        ingest(store, text)
    assert not store.has_run(log.run)
    store.append(log.events())
    seq = next(e.seq for e in store.read(log.run) if e.event_id == json.loads(text.splitlines()[line - 1])["event_id"])
    assert any(p.startswith(f"seq {seq}: {rule}: ") for p in verify_run(store, log.run)), verify_run(store, log.run)


def test_attributions_of_failures_the_run_never_recorded(store: Recorder) -> None:
    log = Log("r").node("N1").cause("C1", "N1")
    log.add("failure.attributed", failure_id="ghost-1", cause_id="C1", via="recurrence")
    _refused_and_named(store, log, "ghost-1", "failure attributed from its diagnosis")


def test_an_attribution_to_another_cause_than_its_diagnosis_names(store: Recorder) -> None:
    log = Log("r").node("N1").cause("C1", "N1").cause("C2", "N1")
    log.evidence("f", matched_cause="C2")
    log.add("failure.attributed", failure_id="f", cause_id="C1", via="recurrence")
    _refused_and_named(store, log, '"via"', "failure attributed from its diagnosis")


def test_causes_created_from_no_failure(store: Recorder) -> None:
    log = Log("r").node("N1")
    log.add("cause.created", cause_id="C1", node_id="N1", description="made up", failure_id=None)
    _refused_and_named(store, log, '"cause_id": "C1"', "cause created from its failure")


def test_a_cause_created_from_a_failure_diagnosed_as_another_cause(store: Recorder) -> None:
    log = Log("r").node("N1").cause("C1", "N1")
    log.evidence("f", matched_cause="C1")
    log.add("cause.created", cause_id="C2", node_id="N1", description="made up", failure_id="f")
    _refused_and_named(store, log, '"cause_id": "C2"', "cause created from its failure")


def _mastered_c1() -> Log:
    """Round 1 creates C1; round 2 promotes it (its targeted question at p1 0.9)."""
    log = Log("r").node("N1").cause("C1", "N1").commit()
    log.question("q1", 0.9, active="C1")
    log.add("cause.promoted", cause_id="C1", acc=0.9, n_candidates=1)
    return log.add("promotions.decided", promoted=["C1"], candidates=1)


def test_a_reactivation_by_a_failure_that_does_not_exist(store: Recorder) -> None:
    log = _mastered_c1()
    log.add("cause.reactivated", cause_id="C1", failure_id="nobody")
    _refused_and_named(store, log, "nobody", "cause reactivated by its failure")


def test_a_reactivation_by_a_recurring_failure_is_taken(store: Recorder) -> None:
    log = _mastered_c1().reactivate("C1", "again").commit()
    assert ingest(store, log.jsonl()).appended == len(log.events())
    assert verify_run(store, "r") == []


def test_a_cause_promoted_at_acc_0_01(store: Recorder) -> None:
    """θ_up 0.7: a cause whose one targeted question scored 0.01 is not promoted."""
    log = Log("r").node("N1").cause("C1", "N1").commit()
    log.question("q1", 0.01, active="C1")
    log.add("cause.promoted", cause_id="C1", acc=0.01, n_candidates=1)
    _refused_and_named(store, log, "cause.promoted", "promotion decided from the evidence")


def test_a_decision_that_leaves_out_a_promotion_the_evidence_decides(store: Recorder) -> None:
    log = Log("r").node("N1").cause("C1", "N1").commit()
    log.question("q1", 0.9, active="C1")
    log.add("promotions.decided", promoted=[], candidates=1)
    _refused_and_named(store, log, "promotions.decided", "promotion decided from the evidence")


def test_a_question_scored_before_it_is_generated(store: Recorder) -> None:
    log = Log("r")
    log.add("question.scored", question_id="q", n=12, p1=0.5, p2=0.5, pseudo_label="1", retained=True)
    log.add("question.generated", question_id="q", mode="free", text="what?")
    _refused_and_named(store, log, "question.scored", "question scored after generated")


def test_a_stitched_question_naming_an_active_cause_as_mastered(store: Recorder) -> None:
    log = Log("r").node("N1").cause("C1", "N1").cause("C2", "N1").commit()
    log.question("q1", 0.5, active="C1", mastered="C2")
    _refused_and_named(store, log, "question.generated", "stitched question on a Mastered cause")


def test_an_ingested_run_forked_line_makes_no_run_a_whatif_of_itself(store: Recorder) -> None:
    log = Log("r").node("N1").commit()
    ingest(store, log.jsonl())
    head = next(store.read("r", newest=True, limit=1))
    forked = {
        "type": RunForked.name,
        "run": "r",
        "round": 1,
        "event_id": "r/1/run.forked",
        "data": {
            "source_run": "r",
            "source_round": 1,
            "source_hash": head.hash,
            "source_seq": head.seq,
            "whatif": {"settings": {}, "meaning": "x"},
        },
    }
    with pytest.raises(IngestError, match=r"^line 1: run forked at its opening: run 'r' is in the database already"):
        ingest(store, json.dumps(forked) + "\n")
    rounds.open_round(store, "r")  # the run goes on


def test_a_run_forked_of_a_new_run_names_its_source_and_its_hash(store: Recorder) -> None:
    ingest(store, Log("src").node("N1").commit().jsonl())
    head = next(store.read("src", newest=True, limit=1))
    copy = Log("copy").node("N1").commit()
    data = {"source_run": "src", "source_round": 1, "source_hash": "0" * 64, "source_seq": head.seq}
    copy.round = 1
    copy.add(RunForked.name, **data)
    with pytest.raises(IngestError, match="run forked at its opening: the commit of round 1 of run 'src' has another"):
        ingest(store, copy.jsonl())
    store.append(copy.events())
    assert any("run forked at its opening" in p for p in verify_run(store, "copy"))


def test_a_run_forked_line_after_the_run_went_on(store: Recorder) -> None:
    """Not right after the commit of its round: only a fork or a what-if writes run.forked."""
    log = Log("r").node("N1").commit()
    log.add("round.started")
    log.round = 1
    log.add(RunForked.name, source_run="x", source_round=1, source_hash="0" * 64, source_seq=1)
    store.append(log.events())
    assert any(
        "run forked at its opening: run.forked (source round 1) does not follow" in p for p in verify_run(store, "r")
    )


def test_a_whatif_and_a_fork_verify(store: Recorder) -> None:
    log = _mastered_c1().reactivate("C1", "again").commit()
    log.question("q2", 0.5, active="C1")
    log.add("promotions.decided", promoted=[], candidates=1).commit()
    ingest(store, log.jsonl())
    made = what_if(store, "r", {"memory.theta_up": "0.95"})
    assert verify_run(store, made.run) == []
    fork_run(store, "r", 2, "r-fork")
    assert verify_run(store, "r-fork") == []


# --- the round protocol ------------------------------------------------------------------------


def test_append_diagnosis_refuses_an_attribution_of_a_failure_the_run_never_recorded(store: Recorder) -> None:
    rnd = _round_two(store)
    n = store.last_seq(RUN)
    attributed = rnd.event("a/ghost", FailureAttributed(failure_id="ghost", cause_id="C1", via="recurrence"))
    with pytest.raises(
        rounds.ProtocolError, match="failure attributed from its diagnosis: failure 'ghost' is not recorded"
    ):
        rnd.append_diagnosis([attributed])
    assert store.last_seq(RUN) == n


def test_append_diagnosis_refuses_a_cause_created_from_no_failure(store: Recorder) -> None:
    rnd = _round_two(store)
    n = store.last_seq(RUN)
    created = rnd.event("c/3", CauseCreated(cause_id="C3", node_id="N1", description="made up"))
    with pytest.raises(rounds.ProtocolError, match="cause created from its failure: cause 'C3' names no failure"):
        rnd.append_diagnosis([created])
    assert store.last_seq(RUN) == n


def test_append_diagnosis_refuses_an_attribution_to_an_unknown_cause(store: Recorder) -> None:
    rnd = _round_two(store)
    rounds.Round(store, RUN, 2).record([])
    store.append(
        [wire_event("failure.recorded", RUN, 2, "fr/f", failure_id="f", question_id="q", response="a", reference="b")]
    )
    diagnosed = rnd.event("dx/f", FailureDiagnosed(failure_id="f", matched_cause="C9"))
    attributed = rnd.event("a/f", FailureAttributed(failure_id="f", cause_id="C9", via="recurrence"))
    with pytest.raises(
        rounds.ProtocolError, match="diagnosis matches a known cause: failure 'f' is diagnosed as cause 'C9'"
    ):
        rnd.append_diagnosis([diagnosed, attributed])


def test_record_refuses_a_question_id_from_an_earlier_round(store: Recorder) -> None:
    round_one(store)
    earlier = next(e.event.question_id for e in store.read(RUN, types=(QuestionGenerated,)))
    rounds.open_round(store, RUN)
    n = store.last_seq(RUN)
    again = rounds.Candidate(earlier, "free", "another question?", answers=tuple(answers("7", 9)))
    with pytest.raises(
        rounds.ProtocolError, match=f"question generated once: question '{earlier}' is generated in round 1"
    ):
        rounds.Round(store, RUN, 2).record([again])
    assert store.last_seq(RUN) == n
    assert verify_run(store, RUN) == []


def test_record_refuses_a_stitched_question_naming_an_active_cause(store: Recorder) -> None:
    round_one(store)
    rounds.open_round(store, RUN)
    stitched = rounds.Candidate("s", "stitched", "q?", "C1", "C2", "N1", answers=tuple(answers("7", 9)))
    with pytest.raises(rounds.ProtocolError, match="stitched question on a Mastered cause: question 's' names Active"):
        rounds.Round(store, RUN, 2).record([stitched])


# --- one of each milestone, texts every backend can hold ----------------------------------------


def test_a_duplicate_round_started_is_refused_with_its_line_on_every_backend(store: Recorder) -> None:
    """SQLite and PostgreSQL (the ``store`` fixture), and ``memory://``, which has no index to refuse it."""
    from diagevo.log import open_log

    log = Log("r").node("N1").commit()
    log.add("round.started").add("round.started")
    text = log.jsonl()
    with open_log(f"memory://duplicate-round-{uuid.uuid4().hex}", create=True) as in_memory:
        for backend in (store, in_memory):
            with pytest.raises(IngestError, match=rf"^line {len(text.splitlines())}: round started once: round 2"):
                ingest(backend, text)
            assert not backend.has_run("r")
            ingest(backend, "".join(text.splitlines(keepends=True)[:-1]))
            again = {**json.loads(text.splitlines()[-1]), "event_id": "another"}
            with pytest.raises(IngestError, match=r"^line 1: round started once"):
                ingest(backend, json.dumps(again) + "\n")


@pytest.mark.parametrize(
    ("add", "field"),
    [
        (lambda log: log.node("N9", "a label \x00 with NUL"), "node.created: data.label"),
        (lambda log: log.cause("C9", "N1", "a cause \x00 with NUL"), "failure.diagnosed: data.error_cause"),
        (lambda log: log.add("run.noted", note="a note \x00 with NUL"), "run.noted: data.note"),
    ],
)
def test_nul_in_cause_node_and_note_texts_is_refused_on_every_backend(add: object, field: str) -> None:
    """Refused when the event is built, as ingest validates a line, whatever the backend."""
    from diagevo.catalog import InvalidEvent

    log = Log("r").node("N1")
    with pytest.raises(InvalidEvent, match=f"{field} contains a NUL character"):
        add(log)  # type: ignore[operator]
    with pytest.raises(InvalidEvent, match="cause.created: data.description contains a NUL character"):
        wire_event("cause.created", "r", 1, "c", cause_id="C9", node_id="N1", description="x\x00y", failure_id="f")
