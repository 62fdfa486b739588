"""The shared-error check (``filter.shared_error_check = "variants"``, beyond the paper): the label
the wordings of a question agree on, by hand; through the round protocol, where it is recorded in
``question.scored``; and the mini world's rewordings, which keep the answer."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from diagevo.catalog import QuestionScored
from diagevo.curriculum.harmony import harmonize, share_of
from diagevo.curriculum.votes import votes
from diagevo.rounds.protocol import ProtocolError
from diagevo.rounds.questions import Candidate, score
from diagevo.train.config import load_config
from diagevo.train.mini import world
from tests.test_cli_memory import run_cli

# 47+38: five of eight samples drop the carry (75), three are right (85): a shared error
SHARED_ERROR = ("75", "75", "85", "75", "85", "75", "85", "75")


def config(check: str = "variants", mode: str = "absolute"):  # noqa: ANN201
    return load_config(None, [f'filter.shared_error_check="{check}"', f'filter.mode="{mode}"'])


def test_the_label_is_the_answer_with_the_highest_harmonic_mean_of_shares() -> None:
    v = votes(list(SHARED_ERROR))
    # the rewording 50+35 needs no carry: seven of eight right, one 75
    h = harmonize(v, [["85"] * 7 + ["75"]])
    # 85: HM(3/8, 7/8) = 2 * 0.375 * 0.875 / 1.25 = 0.525; 75: HM(5/8, 1/8) = 2 * 0.625 * 0.125 / 0.75 = 0.2083
    assert h.label == "85" and h.score == pytest.approx(0.525) and h.variant_labels == ("85",)
    assert h.chosen is not None and h.chosen.indices == (2, 4, 6)  # the reference: the earliest 85
    # two rewordings, one of them sharing the error: 85 HM(3/8, 7/8, 3/8) = 3 / (8/3 + 8/7 + 8/3) = 0.4773
    h = harmonize(v, [["85"] * 7 + ["75"], ["75"] * 5 + ["85"] * 3])
    assert h.label == "85" and h.score == pytest.approx(3 / (8 / 3 + 8 / 7 + 8 / 3))
    # 75: HM(5/8, 1/8, 5/8) = 3 / (8/5 + 8 + 8/5) = 0.2679
    assert h.variant_labels == ("85", "75")


def test_agreeing_wordings_keep_the_majority_and_no_common_answer_doubts_the_question() -> None:
    v = votes(list(SHARED_ERROR))
    assert harmonize(v, [["75"] * 6 + ["85"] * 2]).label == "75"  # the rewording shares the error: kept
    # 85 and 75 tie at HM 0.5 over (4/8, 4/8) / (4/8, 4/8): the earlier (larger) class, the majority
    tied = votes(["75", "85", "75", "85"])
    assert harmonize(tied, [["75", "85", "75", "85"]]).label == "75"
    doubted = harmonize(v, [["12"] * 8])  # no answer of the original under the rewording
    assert doubted.label is None and doubted.chosen is None and doubted.score == 0.0
    assert share_of("85", votes(["85", None, "85.0", "x"])) == 0.5  # no answer counts against


def test_the_round_protocol_labels_with_the_check_and_records_its_verdict() -> None:
    c = Candidate("q1", "free", "47+38=", answers=SHARED_ERROR, variant_answers=(("85",) * 7 + ("75",),))
    checked = score(c, config())
    assert (checked.pseudo_label, checked.majority_label, checked.retained) == ("85", "75", True)
    assert (checked.p1, checked.p2) == (0.625, 0.375)  # the filter's and the promotions' votes: the original's
    event = checked.event()
    assert isinstance(event, QuestionScored) and event.check_score == pytest.approx(0.525)
    assert event.stored_data()["variant_labels"] == ["85"] and event.stored_data()["majority_label"] == "75"
    # without the check (the paper's method, the default) the shared error is the label; the
    # rewordings are not read, and nothing of the check is stored
    plain = score(c, config("none"))
    assert (plain.pseudo_label, plain.majority_label, plain.check_score) == ("75", None, None)
    assert {"majority_label", "check_score", "variant_labels"}.isdisjoint(plain.event().stored_data())
    # a candidate without rewordings: the check abstains
    alone = score(Candidate("q2", "free", "7*38=", answers=SHARED_ERROR), config())
    assert (alone.pseudo_label, alone.check_score) == ("75", None)
    # no answer under every wording: recorded, not retained
    doubted = score(Candidate("q3", "free", "47+38=", answers=SHARED_ERROR, variant_answers=(("12",) * 8,)), config())
    assert (doubted.pseudo_label, doubted.retained, doubted.check_score) == ("75", False, 0.0)
    assert doubted.majority_label is None  # its label is its majority's: nothing relabelled
    # more rewordings than the run asks for: refused, naming the key (their checks cost CPU)
    many = Candidate("q4", "free", "47+38=", answers=SHARED_ERROR, variant_answers=(("85",),) * 2)
    with pytest.raises(ProtocolError, match="more than filter.check_variants"):
        score(many, config())
    assert score(many, config("none")).pseudo_label == "75"  # without the check they are not read


def test_a_reference_follows_the_label_the_check_chose() -> None:
    responses = tuple(rf"\boxed{{{a}}} ({i})" for i, a in enumerate(SHARED_ERROR))
    c = Candidate("q1", "free", "47+38=", responses=responses, variant_answers=(("85",) * 8,))
    assert score(c, config()).reference == responses[2]  # the earliest 85, not the earliest 75
    assert score(c, config("none")).reference == responses[0]


@pytest.mark.parametrize("question", ["47+38=", "52+19=", "83-47=", "61-15=", "83%7=", "40%9="])
def test_a_mini_world_rewording_keeps_the_answer(question: str) -> None:
    rng = random.Random(0)
    got = world.variants(question, 5, rng)
    assert len(got) == 5 == len(set(got)) and question not in got
    assert all(world.answer(v) == world.answer(question) and world.parse(v) for v in got)
    assert got == world.variants(question, 5, random.Random(0))  # drawn by the rng alone


def test_a_product_or_a_foreign_text_has_no_rewording() -> None:
    assert world.variants("7*38=", 3, random.Random(0)) == []
    assert world.variants("what is 2+2?", 3, random.Random(0)) == []


def test_the_check_never_looks_at_which_skill_is_weak() -> None:
    """A shift of a carried sum's operands removes the carry for some draws and keeps it for others."""
    skills = {world.skill_of(v) for v in world.variants("47+38=", 40, random.Random(1))}
    assert skills == {"add_c", "add_nc"}


def test_a_trainer_of_its_own_records_rewordings_through_round_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any trainer (verl, TRL, its own) gives the check its evidence in the candidate line, as
    ``variant_answers``; the verdict is in ``question.scored`` as the log keeps it."""
    common = ("--db", f"sqlite:///{tmp_path / 'h.db'}", "--run", "mine")
    code, out, err = run_cli(
        capsys, "round", "start", *common, "--set", 'filter.shared_error_check="variants"', "--json"
    )
    assert code == 0, err
    code, out, err = run_cli(capsys, "round", "requests", "--n", "1", *common, "--json")
    (req,) = json.loads(out)["requests"]
    line = req | {"text": "47+38=", "answers": list(SHARED_ERROR), "variant_answers": [["85"] * 7 + ["75"]]}
    (tmp_path / "q.jsonl").write_text(json.dumps(line) + "\n")
    code, out, err = run_cli(capsys, "round", "record", str(tmp_path / "q.jsonl"), *common, "--json")
    assert code == 0, err
    (q,) = json.loads(out)["questions"]
    assert (q["pseudo_label"], q["majority_label"], q["variant_labels"]) == ("85", "75", ["85"])
    code, out, err = run_cli(capsys, "memory", "events", *common, "--type", "question.scored", "--json")
    assert code == 0, err
    (stored,) = json.loads(out)["events"]
    assert stored["data"]["majority_label"] == "75" and stored["data"]["check_score"] == pytest.approx(0.525)
    bad = req | {"text": "47+38=", "answers": ["1"], "variant_answers": ["85"]}
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n")
    code, out, err = run_cli(capsys, "round", "record", str(tmp_path / "bad.jsonl"), *common)
    assert code == 1 and "variant_answers" in err and "Traceback" not in err


def test_a_backend_that_writes_no_rewordings_refuses_before_any_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = run_cli(capsys, "train", "--set", 'filter.shared_error_check="variants"', "--db", db)
    assert code == 2 and "not ready: rewordings" in err and "the simulator does not write" in err
    code, out, err = run_cli(capsys, "runs", "--db", db, "--json")
    assert code != 0 or json.loads(out)["runs"] == []  # nothing of the run was written


def test_the_challenger_is_asked_to_reword_a_question_in_its_own_format() -> None:
    """On real models the challenger writes the rewordings: its own system message (one
    ``<question>`` block), and the question to reword as the user message's last paragraph."""
    from diagevo.curriculum.prompts import CHALLENGER_SYSTEM, reword_messages

    system, user = reword_messages("What is {x}? 47+38")
    assert system == {"role": "system", "content": CHALLENGER_SYSTEM}
    assert user["role"] == "user" and user["content"].endswith("\n\nWhat is {x}? 47+38")  # braces stay text
    assert "answer is exactly the same" in user["content"]
