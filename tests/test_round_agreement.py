"""The round protocol refuses what would make the trainer and the log disagree (a question id
recorded again with other content, a run started again with another config, a metric the log
cannot hold, a count in a summary, a given failure whose question is not the log's), and its
errors are the project's own, shaped for Python: the argument named, did-you-mean for a typo or
an unknown run, the Python call as the fix (the CLI spells its command from the same hint)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import diagevo
from diagevo import rounds
from diagevo.catalog import EvalRecorded, QuestionScored
from diagevo.catalog.failure import Failure
from diagevo.cli.fixes import message as cli_reading
from diagevo.config.errors import ConfigError
from diagevo.config.limits import LimitsConfig
from diagevo.errors import BadInput, NotFound
from diagevo.log import Recorder
from diagevo.schemas import text_limits
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_rounds import RUN, answers, candidate, promote_on_a_question, round_one


def _count(store: Recorder, run: str = RUN) -> int:
    return sum(1 for _ in store.read(run)) if store.has_run(run) else 0


def _open(store: Recorder, k: float = 0.5) -> rounds.Round:
    rounds.start_run(store, RUN, {"k": k})
    return rounds.Round.open(store, RUN)


# --- a question id recorded again ---------------------------------------------------------------


def test_a_question_id_recorded_again_with_other_content_is_refused(store: Recorder) -> None:
    rnd = _open(store)
    [first] = rnd.record([candidate("q1", label="10")])
    assert first.pseudo_label == "10"
    before = _count(store)
    other_text = rounds.Candidate("q1", "free", "What is 9*9?", answers=tuple(answers("10", 6)))
    with pytest.raises(
        rounds.ProtocolError, match=r"question 'q1' is recorded in round 1 of run 'ext' already with another text"
    ):
        rnd.record([other_text])
    with pytest.raises(rounds.ProtocolError, match=r"already with another pseudo_label"):
        rnd.record([candidate("q1", label="81")])  # the same text and agreement, another label
    with pytest.raises(rounds.ProtocolError, match=r"already with another p1"):
        rnd.record([candidate("q1", label="10", agree=9)])  # 9 of 12 agree: p1 0.75, not 0.5
    assert _count(store) == before  # nothing stored by a refusal
    again = rnd.record([candidate("q1", label="10"), candidate("q2")])  # a retry with one new question
    assert again.new == 1 and again.stored_before == {"q1"}
    stored = [e.event.pseudo_label for e in store.read(RUN, types=(QuestionScored,))]
    assert stored == ["10", "7"]


def test_a_question_whose_text_differs_past_the_cut_is_refused(store: Recorder) -> None:
    """Both texts are stored cut to the same first KiB; only the record of what was cut tells them
    apart, and the second is a new question, not a retry."""
    rnd = _open(store)
    head = "How many? " + "x" * 2000
    with text_limits(LimitsConfig(text_bytes=1024)):
        rnd.record([rounds.Candidate("q1", "free", head + " first", answers=tuple(answers("10", 6)))])
        before = _count(store)
        again = rnd.record([rounds.Candidate("q1", "free", head + " first", answers=tuple(answers("10", 6)))])
        assert again.new == 0  # the same long text again: a retry
        with pytest.raises(rounds.ProtocolError, match=r"question 'q1' is recorded in round 1 .* another text"):
            rnd.record([rounds.Candidate("q1", "free", head + " other", answers=tuple(answers("10", 6)))])
    assert _count(store) == before


# --- a run started again --------------------------------------------------------------------------


def test_a_run_started_again_with_another_config_is_refused_naming_the_fields(store: Recorder) -> None:
    assert rounds.start_run(store, RUN, {"k": 0.5})
    assert not rounds.start_run(store, RUN, {"k": 0.5})  # a retry (every rank calls it): nothing stored
    assert not rounds.start_run(store, RUN, {"memory": {"k": 0.5}})  # the same config, by its section
    before = _count(store)
    with pytest.raises(rounds.RunDiffers) as refused:
        rounds.start_run(store, RUN, {"k": 0.7})
    said = str(refused.value)
    assert "run 'ext' exists with another config: memory.k 0.5 (given 0.7)" in said
    assert "`diagevo.start_run(store, 'ext', config, resume='allow')`" in said  # the Python call
    assert cli_reading(refused.value).count("diagevo round start --run ext --resume allow") == 1  # the CLI's
    with pytest.raises(
        rounds.RunDiffers, match=r"another config: filter.tau 1.6 \(given 0.2\); memory.k 0.5 \(given 0.7\);"
    ):
        rounds.start_run(store, RUN, {"k": 0.7, "tau": 0.2})
    with pytest.raises(rounds.RunDiffers, match=r"another config: seed 0 \(given 1\)"):
        rounds.start_run(store, RUN, {"k": 0.5}, seed=1)
    assert _count(store) == before
    assert not rounds.start_run(store, RUN, {"k": 0.7}, resume="allow")  # the caller says: go on as it is
    assert not rounds.start_run(store, RUN, {"k": 0.7}, resume="must")
    assert rounds.run_config(store, RUN).memory.k == 0.5 and _count(store) == before
    with pytest.raises(rounds.RunExists, match="run 'ext' already exists"):
        rounds.start_run(store, RUN, {"k": 0.5}, resume="never")
    with pytest.raises(rounds.UnknownRun, match=r"no run 'EXT' in .* to resume \(did you mean 'ext'\?\)"):
        rounds.start_run(store, "EXT", {"k": 0.5}, resume="must")
    with pytest.raises(
        BadInput, match=r"^start_run: resume: Input should be 'allow', 'must' or 'never' \(got 'yes', of type str\)$"
    ):
        rounds.start_run(store, RUN, {"k": 0.5}, resume="yes")  # type: ignore[arg-type]
    assert not store.has_run("EXT") and _count(store) == before


def test_more_rounds_to_train_is_the_same_run(store: Recorder) -> None:
    config = diagevo.Config()
    assert rounds.start_run(store, RUN, config)
    longer = config.model_copy(update={"train": config.train.model_copy(update={"rounds": 9})})
    assert not rounds.start_run(store, RUN, longer)


# --- an open round opened again -----------------------------------------------------------------


def test_opening_an_open_round_returns_it_and_says_what_comes_next(store: Recorder) -> None:
    first = _open(store)
    assert (first.t, first.reopened, first.next_step) == (1, False, "record")
    first.record([candidate("q1")])
    again = rounds.Round.open(store, RUN)  # the trainer forgot to commit: round 1 again, not round 2
    assert (again.t, again.reopened, again.next_step) == (1, True, "promote")
    again.promote()
    assert again.next_step == "record_failures"
    again.record_failures([{"failure_id": "f1", "question_id": "q1", "response": "8", "reference": "7"}])
    assert again.next_step == "diagnose"
    with pytest.raises(rounds.ProtocolError) as late:  # names the step the round goes on at, not a withdrawal
        again.record([candidate("q2")])
    assert str(late.value).startswith("cannot record question 'q2' into round 1: it is new (round 2 takes it), and its")
    assert "round 1 goes on at its next step diagnose: diagnose its recorded failures, then commit" in str(late.value)
    with pytest.raises(rounds.ProtocolError, match="decided already; round 1 goes on at its next step diagnose"):
        again.promote()
    again.commit(allow_undiagnosed=True)
    assert again.next_step == "committed"
    with pytest.raises(
        rounds.ProtocolError, match=r"round 2 of run 'ext' is not open \(`diagevo.Round.open\(store, 'ext'\)`\)"
    ):
        rounds.Round(store, RUN, 2).record([candidate("q2")])
    second = rounds.Round.open(store, RUN)
    assert (second.t, second.reopened, second.next_step) == (2, False, "record")


# --- metrics ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "stored"),
    [(np.float32(0.5), 0.5), (np.float64(0.25), 0.25), (np.int64(3), 3), (np.array(0.75), 0.75), (7, 7)],
)
def test_any_real_number_is_a_metric(store: Recorder, value: object, stored: float) -> None:
    rnd = _open(store)
    promote_on_a_question(rnd)
    rnd.commit({"acc": value})  # type: ignore[dict-item]
    [e] = store.read(RUN, types=(EvalRecorded,))
    metrics = e.event.metrics  # eval.recorded's metrics field (version 2: closed)
    assert metrics == {"acc": stored} and type(metrics["acc"]) is type(stored)


def test_a_torch_scalar_is_a_metric(store: Recorder) -> None:
    torch = pytest.importorskip("torch")
    assert rounds.check_metrics({"acc": torch.tensor(0.5), "n": torch.tensor(4)}) == {"acc": 0.5, "n": 4}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "metric 'acc' must be a finite number, not nan"),
        (np.float32("inf"), "metric 'acc' must be a finite number, not np.float32(inf)"),
        ("0.5", "metric 'acc' must be a number, not '0.5'"),
        (True, "metric 'acc' must be a number, not True"),
        (np.bool_(True), "metric 'acc' must be a number, not np.True_"),
        (np.array([0.5, 0.5]), "metric 'acc' must be a number, not array([0.5, 0.5])"),
        (10**400, "metric 'acc' is too large to store as a number: 1000000000"),
    ],
)
def test_what_is_not_a_real_number_is_refused(store: Recorder, value: object, message: str) -> None:
    rnd = _open(store)
    before = _count(store)
    with pytest.raises(rounds.ProtocolError) as refused:
        rnd.record_metrics({"acc": value})  # type: ignore[dict-item]
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    assert _count(store) == before


def test_ranks_near_the_largest_float_have_their_mean_and_an_overflowing_weight_is_refused(store: Recorder) -> None:
    rnd = _open(store)
    rnd.record_metrics({"acc": 1e308}, rank=0)
    rnd.record_metrics({"acc": 1.5e308}, rank=1)  # the sum overflows; the mean is 1.25e308
    promote_on_a_question(rnd)
    assert rnd.commit().ranks == 2
    [e] = store.read(RUN, types=(EvalRecorded,))
    assert e.event.metrics["acc"] == pytest.approx(1.25e308) and math.isfinite(e.event.metrics["acc"])
    nxt = rounds.Round.open(store, RUN)
    nxt.record_metrics({"acc": 0.5}, rank=0, weight=1e308)
    before = _count(store)
    with pytest.raises(rounds.ProtocolError, match=r"metric 'acc': the ranks' weighted mean is not a finite number"):
        nxt.record_metrics({"acc": 0.5}, rank=1, weight=1e308)  # 2e308 in all: no weight to divide by
    assert _count(store) == before


def test_a_summary_cannot_hold_a_count(store: Recorder) -> None:
    rnd = _open(store)
    rnd.record([candidate("q1")])
    rnd.promote()
    for name in ("questions", "failures", "F", "epsilon_next", "ranks"):
        with pytest.raises(rounds.ProtocolError, match=rf"summary field '{name}' is counted from the log"):
            rnd.commit(summary={name: 999})
    committed = rnd.commit(summary={"note": "first", "questions_seen": 3})
    assert (committed.questions, committed.summary["note"], committed.summary["questions_seen"]) == (1, "first", 3)


# --- wrong types --------------------------------------------------------------------------------------


def test_wrong_types_are_refused_naming_the_argument(store: Recorder) -> None:
    rnd = _open(store)
    cases = [
        (lambda: rnd.record(5), "candidates must be a sequence of Candidate, not int"),  # type: ignore[arg-type]
        (lambda: rnd.record(["q"]), "candidates must be Candidate objects, not str"),  # type: ignore[list-item]
        (lambda: rnd.requests("5"), "n must be a whole number of at least 0, not '5'"),  # type: ignore[arg-type]
        (lambda: rnd.requests(True), "n must be a whole number of at least 0, not True"),
        (lambda: rounds.Candidate("q", "free", "x?", answers=(1, 2)), "Candidate answers must hold strings, not 1"),  # type: ignore[arg-type]
        (lambda: rounds.Candidate("q", "free", "x?", answers="12"), "Candidate answers must be a sequence of strings"),  # type: ignore[arg-type]
        (lambda: rounds.Candidate("q", "free", 5), "Candidate text must be a non-empty string, not 5"),  # type: ignore[arg-type]
        (lambda: rounds.Candidate("q", "free", "x?", node=3), "Candidate node must be a string or None, not 3"),  # type: ignore[arg-type]
    ]
    for call, message in cases:
        with pytest.raises(BadInput) as refused:
            call()
        assert str(refused.value).startswith(message)
    kept = rounds.Candidate("q", "free", "x?", answers=["7", None])  # type: ignore[arg-type]
    assert kept.answers == ("7", None)


# --- config typos and unknown runs -------------------------------------------------------------------


def test_config_typos_are_the_projects_error_with_the_name_meant(store: Recorder) -> None:
    with pytest.raises(ConfigError) as section:
        diagevo.Config(memroy={"k": 0.5})
    assert section.value.meant == ("memory",) and "did you mean memory?" in str(section.value)
    with pytest.raises(ConfigError) as nested:
        rounds.start_run(store, RUN, {"memory": {"k": 0.5, "theta_upp": 0.7}})
    assert (nested.value.key, nested.value.meant) == ("memory.theta_upp", ("memory.theta_up",))
    assert str(nested.value) == "unknown config field 'memory.theta_upp' (did you mean memory.theta_up?)"
    with pytest.raises(
        ConfigError, match=r"unknown config field 'memory.theta_upp' \(did you mean memory.theta_up\?\)"
    ):
        rounds.start_run(store, RUN, {"memory": {"theta_upp": 0.7}})  # the typo, not the missing k
    with pytest.raises(ConfigError, match=r"unknown field 'thetaup' \(did you mean 'theta_up'"):
        rounds.start_run(store, RUN, {"k": 0.5, "thetaup": 0.7})
    assert not store.has_run(RUN)


def test_an_unknown_run_is_not_found_with_the_run_meant_and_the_python_call(
    store: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds.start_run(store, "heur", {"k": 0.5})
    calls = [
        (lambda: diagevo.stats(store, "huer"), "`store.runs()`"),
        (lambda: diagevo.show(store, "huer"), "`store.runs()`"),
        (lambda: diagevo.load_memory(store, "huer"), "`store.runs()`"),
        (lambda: diagevo.Round.open(store, "huer"), "`diagevo.start_run(store, 'huer', config)`"),
        (lambda: rounds.round_state(store, "huer"), "`diagevo.start_run(store, 'huer', config)`"),
        (lambda: rounds.run_config(store, "huer"), "`diagevo.start_run(store, 'huer', config)`"),
        (lambda: rounds.Round(store, "huer", 1).record_failures([]), "`diagevo.start_run(store, 'huer', config)`"),
    ]
    for call, fix in calls:
        with pytest.raises(NotFound) as refused:
            call()
        said = str(refused.value)
        assert said.startswith("no run 'huer' in ") and "(did you mean 'heur'?)" in said and fix in said
        assert "diagevo round" not in said and "diagevo runs" not in said  # a Python caller gets Python
        assert refused.value.value == "huer" and "heur" in refused.value.allowed  # and the parts, as fields
    monkeypatch.setattr("diagevo.cli.common._acting_on", [store.url])  # the CLI says so when it opens the store
    spelled = cli_reading(refused.value)
    assert "`diagevo round start --run huer --db " in spelled  # the CLI spells the command from the same fix


# --- a given failure held against the log ------------------------------------------------------------


def test_diagnose_refuses_a_failure_whose_question_is_not_the_logs(store: Recorder) -> None:
    round_one(store)
    rnd = diagevo.Round.open(store, RUN)
    rnd.record([candidate("q", agree=9)])  # "question q?", pseudo-label 7, no causes
    before = _count(store)
    for wrong, field in [
        (
            Failure(
                failure_id="f",
                question_id="q",
                question="question q?",
                pseudo_label="8",
                response="\\boxed{8}",
                reference="\\boxed{7}",
            ),
            "pseudo_label '8'",
        ),
        (
            Failure(
                failure_id="f",
                question_id="q",
                question="another question?",
                pseudo_label="7",
                response="\\boxed{8}",
                reference="\\boxed{7}",
            ),
            "question 'another question\\?'",
        ),
        (
            Failure(
                failure_id="f",
                question_id="q",
                question="question q?",
                pseudo_label="7",
                response="\\boxed{8}",
                reference="\\boxed{7}",
                known_causes=("C1",),
            ),
            "known_causes \\('C1',\\)",
        ),
    ]:
        with pytest.raises(
            BadInput, match=rf"failure 'f': its {field}.* is not the one round 2 recorded for question 'q'"
        ):
            diagevo.diagnose(rnd, diagnostician="heuristic", failures=[wrong])
    assert _count(store) == before  # refused before anything was recorded or any model called


# --- the same on the command line -------------------------------------------------------------------


def test_round_start_refuses_another_config_and_takes_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    first, other = tmp_path / "a.toml", tmp_path / "b.toml"
    first.write_text("[memory]\nk = 0.5\n", encoding="utf-8")
    other.write_text("[memory]\nk = 0.9\n", encoding="utf-8")
    assert run_cli(capsys, "round", "start", "--run", "x", "--db", db, "--config", str(first))[0] == 0
    code, _, err = run_cli(capsys, "round", "start", "--run", "x", "--db", db, "--config", str(first))
    assert code == 0, err  # the same config again: the open round, nothing stored
    code, _, err = run_cli(capsys, "round", "start", "--run", "x", "--db", db, "--config", str(other))
    assert_one_line_error(
        code, err, "run 'x' exists with another config: memory.k 0.5 (given 0.9)", "round start --run x --resume allow"
    )
    assert "start_run(" not in err  # the command line gets its command, not the Python call
    code, out, err = run_cli(
        capsys, "round", "start", "--run", "x", "--db", db, "--config", str(other), "--resume", "allow"
    )
    assert code == 0 and "round 1 is open" in out, err
    code, _, err = run_cli(capsys, "round", "start", "--run", "x", "--db", db, "--resume", "never")
    assert_one_line_error(code, err, "run 'x' already exists in", "round start --run x")
    code, _, err = run_cli(capsys, "round", "start", "--run", "y", "--db", db, "--resume", "must")
    assert_one_line_error(code, err, "no run 'y' in", "to resume")
    code, _, err = run_cli(capsys, "round", "start", "--run", "x", "--db", db, "--resume", "yes")
    assert_one_line_error(code, err, "--resume must be allow, must or never, not 'yes'")
    with diagevo.open_store(db) as store:
        assert store.runs() == ["x"] and rounds.run_config(store, "x").memory.k == 0.5
