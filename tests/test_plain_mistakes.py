"""Ordinary mistakes refused in one line naming what to change, nothing stored or written: a
warm-up of no steps, promotions decided before any question is recorded, an export into the file
system's root or into an unnamed directory, values of the wrong type or range and evidence that
names what the run does not hold on ingest (the event classes' and the counting rules, for every
writer), and the public functions called with arguments of the wrong type."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

import diagevo
from diagevo import rounds
from diagevo.catalog import PromotionsDecided
from diagevo.errors import BadInput
from diagevo.interchange import IngestError, ingest
from diagevo.log import Recorder, open_log
from diagevo.rounds import OutOfOrder
from diagevo.views.verify import verify_run
from tests.input_cases import cli
from tests.logs import Log
from tests.test_extras import _files


def one_line(code: int, err: str, *needles: str) -> None:
    assert code != 0 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in " ".join(err.split()), err


@pytest.mark.parametrize("steps", ["0", "-3"])
def test_models_tiny_refuses_non_positive_steps(tmp_path: Path, steps: str) -> None:
    code, _, err = cli("models", "tiny", "--steps", steps, "--out", str(tmp_path / "tiny"))
    one_line(code, err, "--steps", "greater than or equal to 1")
    assert list(tmp_path.iterdir()) == []


def test_round_promote_with_no_question_recorded_is_refused(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    assert cli("round", "start", "--run", "r", "--db", db)[0] == 0
    code, _, err = cli("round", "promote", "--run", "r", "--db", db)
    one_line(code, err, "no question is recorded in it", "record its questions first", "round promote", "--allow-empty")
    with open_log(db) as store:
        assert store.count("r", types=(PromotionsDecided,)) == 0
        rnd = rounds.Round(store, "r", 1)
        assert rnd.next_step == "record"  # the round is not burnt: its questions may still come
        with pytest.raises(OutOfOrder, match=r"no question is recorded .*: `rnd.promote\(allow_empty=True\)`$"):
            rnd.promote()
    assert cli("round", "promote", "--run", "r", "--db", db, "--allow-empty")[0] == 0  # a round none parsed in
    with open_log(db) as store:
        assert store.count("r", types=(PromotionsDecided,)) == 1


@pytest.mark.parametrize("out", ["/", ""], ids=["root", "empty"])
def test_export_verl_refuses_the_root_and_an_empty_output_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str
) -> None:
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    assert cli("round", "start", "--run", "r", "--db", db)[0] == 0
    before = _files(tmp_path)
    code, _, err = cli("export", "verl", "--run", "r", "-o", out, "--db", db)
    one_line(code, err, "root of the file system" if out else "the output directory needs a name")
    assert _files(tmp_path) == before
    assert not Path("/solver.parquet").exists() and not Path("/challenger.parquet").exists()


# --- ingest: each value refused by its event class, naming the field and the value ------------------


def _attributed(similarity: Any) -> Log:
    log = Log("r").node("N1").cause("C1", "N1")
    log.evidence("f", matched_cause="C1")
    return log.add("failure.attributed", failure_id="f", cause_id="C1", via="recurrence", similarity=similarity)


def _edited(log: Log, event_type: str, change: Any) -> str:
    """The log's JSONL with the first line of ``event_type`` changed by ``change`` (line -> None)."""
    lines = [json.loads(line) for line in log.jsonl().splitlines()]
    change(next(line for line in lines if line["type"] == event_type))
    return "\n".join(json.dumps(line) for line in lines) + "\n"


@pytest.mark.parametrize(
    ("event_type", "change", "said"),
    [
        (
            "failure.attributed",
            lambda e: e["data"].update(similarity="0.9"),
            "data.similarity: Input should be a valid number (got '0.9')",
        ),
        (
            "failure.attributed",
            lambda e: e["data"].update(similarity=5.0),
            "data.similarity: Input should be less than or equal to 1 (got 5.0)",
        ),
        (
            "llm.called",
            lambda e: e["data"].update(latency_s=-1),
            "data.latency_s: Input should be greater than or equal to 0 (got -1)",
        ),
        ("failure.attributed", lambda e: e.update(round="3"), "round: Input should be a valid integer (got '3')"),
        (
            "run.started",
            lambda e: e["data"].update(seed=-2),
            "data.seed: Input should be greater than or equal to 0 (got -2)",
        ),
    ],
    ids=["similarity-string", "similarity-out-of-range", "negative-latency", "round-string", "negative-seed"],
)
def test_ingest_refuses_a_value_of_the_wrong_type_or_range_naming_it(
    store: Recorder, event_type: str, change: Any, said: str
) -> None:
    log = _attributed(0.9).add("llm.called", stage="extract", model="m", latency_s=0.5)
    text = _edited(log, event_type, change)
    with pytest.raises(IngestError, match=r"^line \d+: ") as exc:
        ingest(store, text)
    assert said in str(exc.value) and "\n" not in str(exc.value)
    assert not store.has_run("r")


def test_ingest_takes_a_similarity_written_as_a_whole_number(store: Recorder) -> None:
    """A JSON 1 is a number: strict types refuse text, not integers."""
    assert ingest(store, _attributed(1).jsonl()).appended > 0


def _refused_and_named(store: Recorder, log: Log, rule: str, said: str) -> None:
    with pytest.raises(IngestError, match=rf"^line \d+: {rule}: ") as exc:
        ingest(store, log.jsonl())
    assert said in str(exc.value)
    assert not store.has_run(log.run)
    store.append(log.events())  # stored raw: verify names it by the same rule
    assert any(f"{rule}: " in p for p in verify_run(store, log.run)), verify_run(store, log.run)


def test_ingest_refuses_a_failure_of_an_unknown_question(store: Recorder) -> None:
    log = Log("r").add("round.started").question("q1", 0.75)
    log.add("failure.recorded", failure_id="f1", question_id="q-ghost", response="r", reference="x")
    _refused_and_named(store, log, "failure of a retained question", "'q-ghost', not a retained question of round 1")


def test_ingest_refuses_a_failure_of_a_question_the_round_dropped(store: Recorder) -> None:
    log = Log("r").add("round.started").question("q1", 0.2, retained=False)
    log.add("failure.recorded", failure_id="f1", question_id="q1", response="r", reference="x")
    _refused_and_named(store, log, "failure of a retained question", "'q1', not a retained question of round 1")


def test_ingest_refuses_a_diagnosis_matching_an_unknown_cause(store: Recorder) -> None:
    log = Log("r").node("N1").cause("C1", "N1")
    log.evidence("f", matched_cause="C-ghost")
    _refused_and_named(store, log, "diagnosis matches a known cause", "cause 'C-ghost', which the memory does not hold")


# --- the public functions: a wrong argument type is BadInput naming the argument -------------------


def test_what_if_with_a_list_of_settings_names_the_argument(store: Recorder) -> None:
    said = r"^what_if: settings: Input should be a valid dictionary \(got \['memory.k=2'\], of type list\)$"
    with pytest.raises(BadInput, match=said):
        diagevo.what_if(store, "base", ["memory.k=2"])  # type: ignore[arg-type]


def test_start_run_without_a_config_names_the_argument(store: Recorder) -> None:
    said = r"^start_run: config: .*instance of MethodConfig, or a valid dictionary \(got None"
    with pytest.raises(BadInput, match=said):
        diagevo.start_run(store, "r", None)  # type: ignore[arg-type]
    assert not store.has_run("r")


STRING = "Input should be a valid string"
PUBLIC_FUNCTIONS = sorted(n for n in diagevo.__all__ if inspect.isfunction(getattr(diagevo, n)))


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_a_public_function_given_a_wrong_argument_type_raises_bad_input_naming_it(name: str) -> None:
    """Every required argument an object of no type it takes: the first checked one is named
    (pydantic's ``validate_call`` checks them: :mod:`diagevo.text.calls`)."""
    func = getattr(diagevo, name)
    params = inspect.signature(func).parameters.values()
    required = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    with pytest.raises(BadInput, match=rf"^{name}: \w+: Input should be .*, of type object\)$"):
        func(*[object()] * max(1, len(required)))


def test_a_path_argument_may_be_a_string(store: Recorder, tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no run 'none'"):  # past the boundary: the path was taken
        diagevo.export_dataset(store, "none", str(tmp_path / "out"))


# issue 74: each a crash before (TypeError, AttributeError, ValueError from deep inside)
@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda s: diagevo.Round.open(s, 5), rf"^Round.open: run: {STRING} \(got 5, of type int\)$"),
        (lambda s: diagevo.Round.open(s, b"x"), rf"^Round.open: run: {STRING} \(got b'x', of type bytes\)$"),
        (lambda s: diagevo.Round.current(s, 5), rf"^Round.current: run: {STRING} \(got 5, of type int\)$"),
        (lambda s: diagevo.load_config(None, [5]), rf"^load_config: overrides\[0\]: {STRING} \(got 5, of type int\)$"),
        (lambda s: diagevo.load_config(None, ["a=1", b"b=2"]), rf"^load_config: overrides\[1\]: {STRING} \(got b'b=2'"),
        (lambda s: diagevo.what_if(s, "base", {"memory.k": 2}), rf"^what_if: settings\['memory.k'\]: {STRING} \(got 2"),
        (lambda s: diagevo.what_if(s, "base", {5: "2"}), rf"^what_if: settings key 5: {STRING}"),
        (lambda s: diagevo.what_if(s, "base", {"memory.k": "1,2"}), r"^memory.k='1,2' asks for 2 what-ifs"),
    ],
)
def test_a_wrong_value_inside_an_argument_is_one_line_naming_it(store: Recorder, call: Any, said: str) -> None:
    with pytest.raises(BadInput, match=said) as err:
        call(store)
    assert "\n" not in str(err.value)
    assert store.runs() == []
