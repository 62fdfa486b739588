"""A recorded batch withdrawn before the commit (``batch.withdrawn``, ``diagevo round withdraw``):
the round reads as if it had never been recorded (its promotions, diagnosis and commit counts,
``memory verify``), the same ids are recorded again, and each misuse is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import diagevo
from diagevo.diagnosis.pipeline import failure_inputs
from diagevo.report.data import load_run
from diagevo.rounds import Batch, OutOfOrder, ProtocolError, commit_counts
from diagevo.views.stats import count_rounds
from tests.test_cli_memory import assert_one_line_error, run_cli

RUN = "w"
SIZES = ["grpo.construction_responses=4"]


def candidates(rnd: diagevo.Round, label: str, n: int = 4) -> list[diagevo.Candidate]:
    """``n`` questions of the round's requests, each answered ``label`` three times of four (retained)."""
    return [
        diagevo.Candidate(
            q.question_id, q.mode, f"Question {i}?", responses=(f"\\boxed{{{label}}}",) * 3 + ("\\boxed{0}",)
        )
        for i, q in enumerate(rnd.requests(n))
    ]


def counts_of(store: diagevo.Recorder, run: str, wrong: bool) -> dict[str, object]:
    """Round 1 of ``run`` committed: with ``wrong``, a wrong batch of questions recorded and
    withdrawn, then failures of one question recorded and withdrawn, before the right ones."""
    diagevo.start_run(store, run, diagevo.load_config(None, SIZES))
    rnd = diagevo.Round.open(store, run)
    if wrong:
        bad = rnd.record(candidates(rnd, "7", n=6))  # the wrong file: other answers, two more questions
        assert bad.batch is not None and rnd.withdraw(bad.batch, reason="wrong n").questions == [
            c.question_id for c in candidates(rnd, "7", n=6)
        ]
    right = rnd.record(candidates(rnd, "5"))
    assert right.new == 4 and right.batch is not None
    rnd.promote()
    qid = candidates(rnd, "5")[0].question_id
    failure = {"failure_id": f"{qid}-s1-0", "question_id": qid, "reference": "\\boxed{5}"}
    if wrong:
        assert rnd.record_failures([{**failure, "response": "a stale \\boxed{3}"}]) == 1
        assert rnd.last_batch is not None
        rnd.withdraw(rnd.last_batch)
    assert rnd.record_failures([{**failure, "response": "the real \\boxed{4}"}]) == 1
    diagevo.diagnose(rnd, diagnostician="heuristic")
    return commit_counts(rnd.commit({}))


def test_a_withdrawn_batch_leaves_the_round_as_if_never_recorded(store: diagevo.Recorder) -> None:
    withdrawn = counts_of(store, RUN, wrong=True)
    only_right = counts_of(store, "plain", wrong=False)
    assert withdrawn == only_right and withdrawn["questions"] == 4 and withdrawn["failures"] == 1
    assert diagevo.verify_run(store, RUN) == []
    assert count_rounds(store.rows(RUN))[1] == count_rounds(store.rows("plain"))[1]  # memory stats' columns

    [f] = failure_inputs(store, RUN, 1)
    assert f.response == "the real \\boxed{4}"
    asked = {(q.round, q.mode): q.n for q in load_run(store, RUN).questions}  # the report's question figures
    assert asked == {(q.round, q.mode): q.n for q in load_run(store, "plain").questions} and asked[(1, "all")] == 4


def test_the_next_step_after_every_question_is_withdrawn_is_to_record(store: diagevo.Recorder) -> None:
    """A round whose only batch was withdrawn reads as one with no question: a resumed trainer
    records again, it does not promote nothing."""
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    rnd = diagevo.Round.open(store, RUN)
    assert rnd.next_step == "record"
    batch = rnd.record(candidates(rnd, "5")).batch
    assert batch is not None and rnd.next_step == "promote"
    rnd.withdraw(batch)
    assert rnd.next_step == "record"
    rnd.record(candidates(rnd, "5", n=2))
    assert rnd.next_step == "promote"


def test_withdrawing_after_the_commit_an_unknown_batch_or_twice_is_refused(store: diagevo.Recorder) -> None:
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    rnd = diagevo.Round.open(store, RUN)
    batch = rnd.record(candidates(rnd, "5")).batch
    assert batch is not None
    with pytest.raises(ProtocolError, match=r"^batch 9000-9001 of round 1 of run 'w': the run holds no event at those"):
        rnd.withdraw("9000-9001")
    with pytest.raises(ProtocolError, match=r"^batch 1-2 of round 1 of run 'w': seq 1 is a run.started of round 0"):
        rnd.withdraw("1-2")
    with pytest.raises(ProtocolError, match="is not FIRST-LAST"):
        rnd.withdraw("last")
    rnd.withdraw(batch)
    with pytest.raises(OutOfOrder, match=rf"^batch {batch} of round 1 of run 'w' is withdrawn already"):
        rnd.withdraw(batch)
    again = rnd.record(candidates(rnd, "5"))
    rnd.promote()
    with pytest.raises(OutOfOrder, match="its promotions are decided"):
        rnd.withdraw(str(again.batch))
    rnd.commit({})
    with pytest.raises(OutOfOrder, match="round 1"):
        rnd.withdraw(str(again.batch))
    assert diagevo.verify_run(store, RUN) == []


def test_round_withdraw_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'w.db'}"
    with diagevo.open_store(db) as store:
        diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
        rnd = diagevo.Round.open(store, RUN)
        batch = rnd.record(candidates(rnd, "5")).batch
    common = ("--run", RUN, "--db", db)
    code, out, err = run_cli(capsys, "round", "withdraw", "--batch", str(batch), *common)
    assert code == 0, err
    assert f"batch {batch} withdrawn" in out and "4 questions" in out
    code, _, err = run_cli(capsys, "round", "withdraw", "--batch", str(batch), *common)
    assert_one_line_error(code, err, f"batch {batch} of round 1 of run 'w' is withdrawn already")


def test_only_a_whole_batch_is_withdrawn(store: diagevo.Recorder) -> None:
    """Issue 83: a range that cuts a recorded batch (one question short at either end) or runs into
    the next batch is refused in one line naming the batch or batches it touches, storing nothing
    (it was taken, half-withdrawing the last question, and the round could then neither record,
    promote nor withdraw the rest). The whole batch withdraws; then the round records the right
    file, promotes and commits, and verifies."""
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    rnd = diagevo.Round.open(store, RUN)
    wrong = rnd.record(candidates(rnd, "7", n=3)).batch
    assert wrong is not None
    first, last = (int(s) for s in wrong.split("-"))
    nxt = rnd.record([diagevo.Candidate("extra", "free", "Extra?", responses=("\\boxed{1}",) * 4)]).batch
    head = store.last_seq(RUN)
    for cut, touched in (
        (f"{first}-{last - 1}", f"batch {wrong}"),
        (f"{first + 1}-{last}", f"batch {wrong}"),
        (f"{first}-{last + 1}", f"batches {wrong} and {nxt}"),
    ):
        with pytest.raises(ProtocolError, match=rf"batch {cut} of round 1 of run 'w' is not one recorded batch: "):
            rnd.withdraw(cut)
        try:
            rnd.withdraw(cut)
        except ProtocolError as exc:
            assert touched in str(exc) and "\n" not in str(exc), exc
        assert store.last_seq(RUN) == head  # nothing stored
    rnd.withdraw(wrong)
    rnd.withdraw(str(nxt))
    assert rnd.record(candidates(rnd, "5")).new == 4
    rnd.promote()
    rnd.commit({})
    assert diagevo.verify_run(store, RUN) == []


def test_a_conflicting_record_names_the_withdraw_of_its_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 83: the same question id recorded again with another answer is refused naming the
    batch that holds it and the command that takes it back."""
    db = f"sqlite:///{tmp_path / 'w.db'}"
    with diagevo.open_store(db) as store:
        diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
        rnd = diagevo.Round.open(store, RUN)
        batch = rnd.record(candidates(rnd, "5")).batch
        again = candidates(rnd, "7")
        with pytest.raises(ProtocolError) as refused:
            rnd.record(again)
    assert f"batch {batch}" in str(refused.value), refused.value
    c = again[0]
    line = {"question_id": c.question_id, "mode": c.mode, "text": c.text, "answers": list(c.responses)}
    (tmp_path / "again.jsonl").write_text(json.dumps(line) + "\n")
    code, _, err = run_cli(capsys, "round", "record", str(tmp_path / "again.jsonl"), "--run", RUN, "--db", db)
    assert code == 1 and f"round withdraw --run {RUN} --batch {batch}" in " ".join(err.split()), err


def test_verify_names_a_half_withdrawn_batch(store: diagevo.Recorder) -> None:
    """A ``batch.withdrawn`` appended past the round's checks (a writer of its own) whose range
    cuts the recorded batch: ``memory verify`` names it by its seq, in the words the protocol
    refuses such a withdrawal with, and the round reads its questions as recorded."""
    from diagevo.catalog import BatchWithdrawn
    from diagevo.schemas import new_event

    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    rnd = diagevo.Round.open(store, RUN)
    recorded = rnd.record(candidates(rnd, "5"))
    assert recorded.batch is not None
    first, last = (int(s) for s in recorded.batch.split("-"))
    named = [c.question_id for c in candidates(rnd, "5")]
    half = BatchWithdrawn(first_seq=first, last_seq=last - 1, questions=named, failures=[], counts={}, reason="")
    store.append([new_event(half, run=RUN, at_round=1, event_id="w/forged-withdrawal")])
    seq = store.last_seq(RUN)
    assert [p for p in diagevo.verify_run(store, RUN) if "not one recorded batch" in p] == [
        f"seq {seq}: batch {first}-{last - 1} of round 1 of run {RUN!r} is not one recorded batch: it touches batch "
        f"{first}-{last} (a withdrawal takes back one recorded batch whole)"
    ]
    assert len(rnd.questions()) == len(named)  # applied by no reader: the round's questions stand


@pytest.mark.parametrize(
    ("batch", "said"),
    [
        ("²", "is not FIRST-LAST"),  # a digit to str.isdigit, no number to int()
        ("1-" + "9" * 5000, "is not FIRST-LAST"),  # past Python's digits for int() and any seq
        ("٣-٤", "is not FIRST-LAST"),  # decimal digits of another script
        ("1-9999999999999999999", "no seq is past 9,223,372,036,854,775,807"),  # past SQLite's integer
    ],
)
def test_a_batch_that_names_no_seq_is_one_line(
    store: diagevo.Recorder, batch: str, said: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(diagevo.BadInput, match=said):
        Batch.parse(batch)
    code, _, err = run_cli(capsys, "round", "withdraw", "--batch", batch, "--db", f"sqlite:///{tmp_path / 'w.db'}")
    assert code != 0 and said in err and len(err.strip().splitlines()) == 1 and "internal error" not in err
