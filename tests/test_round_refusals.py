"""The log refuses what would corrupt it, from Python and from the CLI alike: one line naming the
id or field, and nothing stored (a failure id reused, a failure without its texts, a metric
that is not a finite number, ``train --resume`` on another trainer's run, a failure diagnosed
twice); ``memory verify`` names a log in which one failure was diagnosed in two rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagevo import rounds
from diagevo.catalog import EvalRecorded, FailureDiagnosed
from diagevo.log import Recorder, open_log
from diagevo.views.verify import verify_run
from tests.logs import wire_event
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_diagnosis_heuristic import _cli, _failure, _open_round
from tests.test_rounds import RUN, candidate, promote_on_a_question, round_one


def _round_two_with_a_failure(store: Recorder) -> None:
    """Round 1 committed, round 2 open with one retained question ``q`` and failure ``f`` of it."""
    round_one(store)
    rounds.open_round(store, RUN)
    rounds.Round(store, RUN, 2).record([candidate("q", agree=9)])
    rounds.Round(store, RUN, 2).promote()
    rounds.Round(store, RUN, 2).record_failures([_fail("f", "q")])


def _fail(fid: str, qid: str, response: str = "\\boxed{8}", reference: str = "\\boxed{7}") -> dict[str, str]:
    return {"failure_id": fid, "question_id": qid, "response": response, "reference": reference}


def _count(store: Recorder) -> int:
    return len(list(store.read(RUN)))


def test_a_failure_id_names_one_failure_of_the_run(store: Recorder) -> None:
    _round_two_with_a_failure(store)
    assert rounds.Round(store, RUN, 2).record_failures([_fail("f", "q")]) == 0  # the same again: a retry
    n = _count(store)
    with pytest.raises(rounds.ProtocolError, match="failure 'f' is recorded in round 2 already with another response"):
        rounds.Round(store, RUN, 2).record_failures([_fail("f", "q", response="\\boxed{9}")])
    with pytest.raises(rounds.ProtocolError, match="failure 'g' appears twice with different content"):
        rounds.Round(store, RUN, 2).record_failures([_fail("g", "q"), _fail("g", "q", reference="\\boxed{6}")])
    rounds.Round(store, RUN, 2).commit(allow_undiagnosed=True)
    n = _count(store)
    rounds.open_round(store, RUN)
    rounds.Round(store, RUN, 3).record([candidate("q3", agree=9)])
    rounds.Round(store, RUN, 3).promote()
    n = _count(store)
    with pytest.raises(rounds.ProtocolError, match="failure 'f' was recorded in round 2 of run 'ext' already"):
        rounds.Round(store, RUN, 3).record_failures([_fail("new", "q3"), _fail("f", "q3")])
    assert _count(store) == n  # nothing, not even the new one


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        ({"failure_id": "f", "question_id": "q", "response": "\\boxed{8}"}, "failure 'f': reference must be"),
        ({"failure_id": "f", "question_id": "q", "reference": "\\boxed{7}"}, "failure 'f': response must be"),
        (_fail("f", "q", response="  "), "failure 'f': response must be a non-empty string"),
        ({**_fail("f", "q"), "extra": 1}, "failure 'f': unknown field 'extra'"),
        ({"question_id": "q", "response": "a", "reference": "b"}, "failure_id must be a non-empty string"),
    ],
)
def test_a_failure_without_its_texts_is_refused(store: Recorder, failure: dict, message: str) -> None:
    round_one(store)
    rounds.open_round(store, RUN)
    rounds.Round(store, RUN, 2).record([candidate("q", agree=9)])
    rounds.Round(store, RUN, 2).promote()
    n = _count(store)
    with pytest.raises(rounds.ProtocolError, match=message):
        rounds.Round(store, RUN, 2).record_failures([failure])
    assert _count(store) == n


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({"acc": "high"}, "metric 'acc' must be a number, not 'high'"),
        ({"acc": float("nan")}, "metric 'acc' must be a finite number, not nan"),
        ({"acc": float("inf")}, "metric 'acc' must be a finite number, not inf"),
        ({"acc": True}, "metric 'acc' must be a number, not True"),
        ({"": 0.5}, "metric name '' must be a non-empty string"),
    ],
)
def test_a_metric_that_is_not_a_finite_number_is_refused(store: Recorder, metrics: dict, message: str) -> None:
    round_one(store)
    rounds.open_round(store, RUN)
    promote_on_a_question(rounds.Round(store, RUN, 2))
    n = _count(store)
    with pytest.raises(rounds.ProtocolError, match=message):
        rounds.Round(store, RUN, 2).commit(metrics)
    assert _count(store) == n
    rounds.Round(store, RUN, 2).commit({"acc": 0.5, "n": 3})
    [ev] = [json.loads(r.data) for r in store.raw(RUN) if r.type == EvalRecorded.name and r.round == 2]
    assert ev == {"metrics": {"acc": 0.5, "n": 3}}  # version 2: the metrics in their field


def test_a_failure_is_diagnosed_once_in_a_run(store: Recorder) -> None:
    _round_two_with_a_failure(store)
    rnd = rounds.Round(store, RUN, 2)
    diagnosed = rnd.event("dx/f", FailureDiagnosed(failure_id="f", error_cause=None, matched_cause=None))
    assert rnd.append_diagnosis([diagnosed]).appended == 1
    rounds.Round(store, RUN, 2).commit()
    rnd3 = rounds.Round.open(store, RUN)
    again = rnd3.event("dx/f", FailureDiagnosed(failure_id="f", error_cause=None, matched_cause=None))
    n = _count(store)
    with pytest.raises(rounds.ProtocolError, match="failure 'f' was diagnosed in round 2 of run 'ext' already"):
        rnd3.append_diagnosis([again])
    assert _count(store) == n


def test_verify_names_a_failure_diagnosed_in_two_rounds(store: Recorder) -> None:
    """A log of an older diagevo (or edited by hand): the second diagnosis appended directly."""
    _round_two_with_a_failure(store)
    rnd = rounds.Round(store, RUN, 2)
    rnd.append_diagnosis([rnd.event("dx/f", FailureDiagnosed(failure_id="f"))])
    rounds.Round(store, RUN, 2).commit()
    assert verify_run(store, RUN) == []
    rounds.open_round(store, RUN)
    store.append([wire_event("failure.diagnosed", RUN, 3, "by-hand/f", failure_id="f")])
    (problem,) = verify_run(store, RUN)
    seq = store.last_seq(RUN)
    way_back = "; its rounds through 2 are intact: fork it from round 2"
    assert problem == f"seq {seq}: failure diagnosed once: failure 'f' is diagnosed in round 2 already{way_back}"


# --- the same refusals through the CLI ---------------------------------------------------------


def test_the_cli_refuses_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The newcomer's case: round 1's failure file sent again to round 2 is refused (it was
    counted twice), as are a non-finite metric and ``train --resume`` on this external run."""
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    common = ("--run", "h", "--db", db)
    reqs = _open_round(capsys, tmp_path, common)
    (tmp_path / "f.jsonl").write_text(_failure(reqs, 0, "so it is \\boxed{-12}") + "\n")
    diag = ("diagnose", "f.jsonl", "--diagnostician", "heuristic", *common)
    _cli(capsys, *diag, "--round", "1", "--json")
    for value in ("high", "nan", "inf"):
        code, _, err = run_cli(capsys, "round", "commit", *common, "--metric", f"acc={value}")
        assert code == 1 and "acc" in err and "number" in err, err
    _cli(capsys, "round", "commit", *common, "--metric", "acc=0.5")
    with open_log(db) as store:
        n = _count_run(store, "h")
    code, _, err = run_cli(capsys, *diag, "--round", "2")  # round 2 never opened: diagnosed, not recorded
    assert_one_line_error(code, err, "failure 'f0' was diagnosed in round 1 of run 'h' already")
    _cli(capsys, "round", "start", *common)
    code, _, err = run_cli(capsys, *diag, "--round", "2")  # round 2 opened: recorded first
    assert_one_line_error(code, err, "failure 'f0' was diagnosed in round 1 of run 'h' already")
    code, _, err = run_cli(capsys, "train", "--db", db, "--run", "h", "--resume", "--quiet")
    assert_one_line_error(code, err, "run 'h' is driven by 'external trainer', not by diagevo's own trainer")
    assert "round start --run h" in err
    with open_log(db) as store:
        assert _count_run(store, "h") == n + 1  # round 2's round.started alone
        assert verify_run(store, "h") == []


def _count_run(store: Recorder, run: str) -> int:
    return len(list(store.read(run)))
