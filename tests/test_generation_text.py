"""What a model decodes is stored whole, but a NUL (refused by PostgreSQL, so by every backend)
becomes U+FFFD: a small or untrained model can decode one (tests/test_hf_acceptance met it)."""

from __future__ import annotations

import pytest

from diagevo.generation import model_text
from diagevo.schemas import InvalidEvent
from diagevo.train.hf.backend import completion_text
from tests.logs import wire_event


def test_a_nul_in_model_output_becomes_the_replacement_character() -> None:
    assert model_text("a\x00b\x00") == "a\ufffdb\ufffd"
    assert model_text("plain \u2028 text\n") == "plain \u2028 text\n"
    assert completion_text([{"role": "assistant", "content": "x\x00"}]) == "x\ufffd"
    assert completion_text("y\x00") == "y\ufffd"


def test_the_log_refuses_a_raw_nul_and_takes_the_cleaned_text() -> None:
    fields = {"failure_id": "f1", "question_id": "q1", "reference": "4"}
    with pytest.raises(InvalidEvent):
        wire_event("failure.recorded", "r", 1, "r/1/fail/f1", response="a\x00b", **fields)
    ev = wire_event("failure.recorded", "r", 1, "r/1/fail/f1", response=model_text("a\x00b"), **fields)
    assert ev.data["response"] == "a\ufffdb"
