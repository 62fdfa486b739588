"""One failure record from a trainer to the diagnostician (:class:`diagevo.catalog.Failure`), its
id from one function (:func:`diagevo.catalog.failure_id`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import diagevo
from diagevo.catalog import FailureRecorded, failure_id
from diagevo.catalog.failure import Failure
from diagevo.rounds import Round, start_run

LINE = {
    "failure_id": "q2-00002-6",
    "question_id": "q2-00002",
    "question": "What is 2 + 3?",
    "pseudo_label": "5",
    "response": "2 + 3 = 6, so \\boxed{6}",
    "reference": "2 + 3 = 5, so \\boxed{5}",
    "known_causes": ["C1"],
}


def test_a_failure_id_is_its_question_and_which_response() -> None:
    assert failure_id("q2-00002", 6) == "q2-00002-6"  # the loop's: the question's 7th response
    assert failure_id("q1-00017", "s3", 0) == "q1-00017-s3-0"  # verl's: step 3, the first failure there
    assert failure_id("my-own-id", 0) != failure_id("my-own-id", 1)


def test_a_file_line_and_a_python_record_are_one_record() -> None:
    """A line of FAILURES.jsonl read back is the record a trainer builds; its first four fields
    are what the log stores, and a failure read back from the log is the record again."""
    line = Failure.model_validate(json.loads(json.dumps(LINE)))
    built = Failure(**{**LINE, "known_causes": ("C1",)})
    assert line == built and line.unnamed() == []
    stored = built.recorded()
    assert stored == FailureRecorded(
        failure_id="q2-00002-6", question_id="q2-00002", response=LINE["response"], reference=LINE["reference"]
    )
    back = Failure.from_log(stored, question=LINE["question"], pseudo_label="5", known_causes=["C1"])
    assert back == built


def test_a_failure_names_what_it_lacks() -> None:
    lean = Failure(failure_id="f", question_id="q", response="r", reference="s")
    assert lean.unnamed() == ["question", "pseudo_label"]
    with pytest.raises(ValueError, match="response"):
        Failure(failure_id="f", question_id="q", response="  ", reference="s")
    with pytest.raises(ValueError, match="extra"):
        Failure.model_validate({**LINE, "extra": 1})


def test_failures_into_a_round_never_opened_must_name_their_question(tmp_path: Path) -> None:
    """The diagnosis reads the question and the pseudo-label; a round no trainer opened holds
    neither, so a failure without them is refused before anything is stored."""
    with diagevo.open_store(f"sqlite:///{tmp_path / 'u.db'}") as store:
        start_run(store, "u", diagevo.Config(), seed=1)
        before = store.last_seq("u")
        lean = Failure(failure_id="f1", question_id="q1", response="\\boxed{6}", reference="\\boxed{5}")
        with pytest.raises(diagevo.BadInput, match="failure 'f1' has no question: a round never opened"):
            diagevo.diagnose(Round(store, "u", 1), diagnostician="heuristic", failures=[lean])
        assert store.last_seq("u") == before
