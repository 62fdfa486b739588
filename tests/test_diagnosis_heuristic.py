"""``diagevo diagnose --diagnostician heuristic``: the offline rule-based stand-in (not the
paper's LLM diagnostician) that lets the CLI round protocol be walked through without a server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import FailureDiagnosed, FailureRecorded
from diagevo.config.sections import DiagnosisConfig
from diagevo.diagnosis.calibration import thresholds_for
from diagevo.diagnosis.heuristic import ANSWER_MODEL, ANSWER_RULES, HeuristicDiagnostician, answer_mismatch
from diagevo.diagnosis.interface import Consolidation, ExtractionInput, KnownCause, NodeView
from diagevo.diagnosis.tools import make_embedder
from diagevo.log import open_log, payload
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_diagnosis_pipeline import D1, L1, RUN, seed


@pytest.mark.parametrize(
    ("response", "label", "rule"),
    [
        ("so the total is 12", "12", "no_final_answer"),
        ("the answer is \\boxed{12", "12", "no_final_answer"),  # cut off: no final answer
        ("\\boxed{-12}", "12", "sign"),
        ("\\boxed{3/4}", "-\\frac{3}{4}", "sign"),
        ("\\boxed{11}", "12", "off_by_one"),
        ("\\boxed{120}", "12", "off_by_factor"),
        ("\\boxed{6}", "12", "off_by_factor"),
        ("\\boxed{0.12}", "12", "off_by_factor"),
        ("\\boxed{17}", "12", "wrong_number"),
        ("\\boxed{x+2}", "x+1", "wrong_expression"),
        ("\\boxed{12.0}", "12", None),  # the same number: the final answer agrees
        ("\\boxed{ 12 }", "12", None),
    ],
)
def test_how_a_final_answer_misses_the_label(response: str, label: str, rule: str | None) -> None:
    assert answer_mismatch(response, label) == rule


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    return out


LABELS = ["12", "30", "8", "5"]


def _open_round(capsys: pytest.CaptureFixture[str], tmp_path: Path, common: tuple[str, ...]) -> list[dict[str, Any]]:
    """Round 1 through the CLI: started, 4 requests recorded as retained questions (``LABELS``) or,
    for the last one, a question the filter drops, promotions decided. Returns the requests."""
    assert json.loads(_cli(capsys, "round", "start", *common, "--set", "memory.k=1.0", "--json"))["round"] == 1
    reqs: list[dict[str, Any]] = json.loads(_cli(capsys, "round", "requests", "--n", "5", *common, "--json"))[
        "requests"
    ]
    answers = [[lab] * 9 + ["1", "2", "3"] for lab in LABELS] + [[str(i) for i in range(12)]]  # the last: no majority
    lines = [json.dumps(q | {"text": f"question {i}?", "answers": a}) for i, (q, a) in enumerate(zip(reqs, answers))]
    (tmp_path / "q.jsonl").write_text("\n".join(lines) + "\n")
    recorded = json.loads(_cli(capsys, "round", "record", "q.jsonl", *common, "--json"))
    assert [q["retained"] for q in recorded["questions"]] == [True] * 4 + [False]
    _cli(capsys, "round", "promote", *common)
    return reqs


def _failure(reqs: list[dict[str, Any]], i: int, response: str, fid: str | None = None) -> str:
    """A line of FAILURES.jsonl for the question of request ``i``."""
    label = LABELS[i] if i < len(LABELS) else "0"
    return json.dumps(
        {
            "failure_id": fid or f"f{i}",
            "question_id": reqs[i]["question_id"],
            "question": f"question {i}?",
            "pseudo_label": label,
            "response": response,
            "reference": f"so it is \\boxed{{{label}}}",
            "known_causes": [],
        }
    )


def test_the_round_protocol_walks_through_with_the_heuristic_diagnostician(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """round start -> requests -> record -> promote -> diagnose --diagnostician heuristic ->
    commit, all through the CLI on a SQLite file; the causes it names are in ``memory show``,
    and the failures diagnose records are in ``memory why``, ``memory stats`` and the commit."""
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    common = ("--run", "h", "--db", db)
    reqs = _open_round(capsys, tmp_path, common)

    def failure(i: int, response: str) -> str:
        return _failure(reqs, i, response)

    failures = [
        failure(0, "so it is \\boxed{-12}"),  # sign
        failure(1, "so it is \\boxed{300}"),  # off by a factor of 10
        failure(2, "I think the count is eight, probably"),  # no final answer
        failure(3, "so it is \\boxed{5}"),  # agrees with the label: a slip elsewhere, no cause
    ]
    (tmp_path / "f.jsonl").write_text("\n".join(failures) + "\n")
    diag = ("diagnose", "f.jsonl", "--round", "1", "--diagnostician", "heuristic", *common)
    code, out, err = run_cli(capsys, *diag)
    assert code == 0, err
    assert "not the paper's LLM diagnostician" in " ".join((out + err).split())
    assert "recorded (new / already stored)" in out and "4 / 0" in out and "never opened" not in out + err
    summary = json.loads(_cli(capsys, *diag, "--json"))  # again: everything is decided already
    assert summary["diagnostician"] == "heuristic" and summary["model"] == ANSWER_MODEL
    assert summary["resumed"] == 4 and summary["llm_calls"] == 0
    assert (summary["recorded"], summary["already_recorded"], summary["unopened"]) == (0, 4, 0)
    done = json.loads(_cli(capsys, "round", "commit", *common, "--metric", "acc=0.5", "--json"))
    assert done["round"] == 1 and done["failures"] == 4
    stats = json.loads(_cli(capsys, "memory", "stats", *common, "--json"))
    assert stats["rounds"][0]["failures"] == 4

    shown = json.loads(_cli(capsys, "memory", "show", *common[:2], "--db", db, "--json"))
    text = json.dumps(shown)
    for rule in ("sign", "off_by_factor", "no_final_answer"):
        assert ANSWER_RULES[rule][0] in text, rule
    assert ANSWER_RULES["off_by_one"][0] not in text and ANSWER_RULES["wrong_number"][0] not in text

    with open_log(db) as store:
        diagnosed = {e.event.failure_id: e.event for e in store.read("h", types=(FailureDiagnosed,), texts=True)}
    assert set(diagnosed) == {"f0", "f1", "f2", "f3"}
    assert all(d.model == ANSWER_MODEL for d in diagnosed.values())
    raws = {fid: json.loads(d.raw) for fid, d in diagnosed.items()}
    assert {r["diagnostician"] for r in raws.values()} == {"heuristic"}
    assert [raws[f]["rule"] for f in ("f0", "f1", "f2", "f3")] == [
        "sign",
        "off_by_factor",
        "no_final_answer",
        "final_answer_agrees",
    ]
    assert diagnosed["f3"].error_cause is None and diagnosed["f3"].matched_cause is None
    with open_log(db) as store:
        recorded = {e.event.failure_id: payload(e) for e in store.read("h", types=(FailureRecorded,), texts=True)}
    assert recorded["f0"] == {
        "failure_id": "f0",
        "question_id": reqs[0]["question_id"],
        "response": "so it is \\boxed{-12}",
        "reference": "so it is \\boxed{12}",
    }
    assert set(recorded) == {"f0", "f1", "f2", "f3"}  # once each, though diagnose ran twice

    # the story of the cause f0 created shows its failing response and the reference
    sign = next(c for c in shown["causes"] if c["description"] == ANSWER_RULES["sign"][0])
    story = json.loads(_cli(capsys, "memory", "why", sign["id"], *common, "--json"))
    created = story["timeline"][0]["failure"]
    assert created["failure_id"] == "f0" and created["response"] == "so it is \\boxed{-12}"
    assert created["reference"] == "so it is \\boxed{12}"


def test_diagnose_refuses_a_failure_of_a_question_the_round_did_not_retain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only failures of retained questions are diagnosed (the paper's rule): one line naming the
    failure and its question, and nothing stored, the good failure beside it included."""
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    common = ("--run", "h", "--db", db)
    reqs = _open_round(capsys, tmp_path, common)
    dropped = reqs[4]["question_id"]
    (tmp_path / "f.jsonl").write_text(
        _failure(reqs, 0, "so it is \\boxed{-12}") + "\n" + _failure(reqs, 4, "\\boxed{3}", "f-dropped") + "\n"
    )
    with open_log(db) as store:
        before = store.last_seq("h")
    code, _, err = run_cli(capsys, "diagnose", "f.jsonl", "--round", "1", "--diagnostician", "heuristic", *common)
    assert_one_line_error(code, err, f"failure 'f-dropped': question '{dropped}' is not a retained question of round 1")
    with open_log(db) as store:
        assert store.last_seq("h") == before


def test_diagnose_into_a_round_never_opened_records_the_failures_with_their_diagnosis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trainer that records nothing else need not open the round: its failures are recorded
    with their diagnosis (a decision follows from a recorded failure), and the summary says so."""
    db = f"sqlite:///{tmp_path / 'h.db'}"
    with open_log(db) as store:
        seed(store, {"N1": (L1, [("C1", D1)])})  # round 2 is next, never opened
    line = {
        "failure_id": "f1",
        "question_id": "q1",
        "question": "What is 3+3?",
        "pseudo_label": "6",
        "response": "so it is \\boxed{-6}",
        "reference": "so it is \\boxed{6}",
        "known_causes": [],
    }
    (tmp_path / "f.jsonl").write_text(json.dumps(line) + "\n")
    diag = ("diagnose", str(tmp_path / "f.jsonl"), "--run", RUN, "--round", "2", "--diagnostician", "heuristic")
    code, out, err = run_cli(capsys, *diag, "--db", db, "--index", str(tmp_path / "i.lance"))
    assert code == 0, err
    assert "recorded with their diagnosis (round never opened)" in out and "0 / 0" in out
    assert "was never opened (diagevo round start)" in " ".join(err.split())
    summary = json.loads(_cli(capsys, *diag, "--db", db, "--index", str(tmp_path / "i.lance"), "--json"))
    assert (summary["recorded"], summary["already_recorded"], summary["unopened"]) == (0, 0, 1)
    assert summary["resumed"] == 1  # diagnosed by the first run
    with open_log(db) as store:
        assert [e.event.failure_id for e in store.read(RUN, types=(FailureRecorded,))] == ["f1"]
        assert [e.event.failure_id for e in store.read(RUN, types=(FailureDiagnosed,))] == ["f1"]


NO_FINAL_ANSWER = ExtractionInput(
    failure_id="f9",
    question_id="q9",
    question="What is 3+3?",
    pseudo_label="6",
    response="3+3 = 9",
    reference="3+3 = 6, so \\boxed{6}",
)


@pytest.fixture(scope="module")
def local() -> Any:
    cfg = DiagnosisConfig()
    return make_embedder(cfg.embedder, cfg.embed_model, None)


def _heuristic(embedder: Any, theta_merge: float | None = None) -> HeuristicDiagnostician:
    cfg = DiagnosisConfig()
    th = thresholds_for(cfg, embedder.name)
    merge = th.merge if theta_merge is None else theta_merge
    return HeuristicDiagnostician(embedder, th.dup, merge, cfg.min_words, cfg.max_words, answers=True)


def test_a_cause_of_another_rule_is_no_duplicate_however_close(local: Any) -> None:
    """The trial's case: ``3+3 = 9`` with no boxed answer (rule no_final_answer) was attached by
    Prompt 2 to the stored cause of the off-by-one rule, their similarity 0.375 passing θ_dup
    0.37. Decisions match only texts of the same rule: not a duplicate, not a recurrence, not
    in that rule's node, and the two rules' nodes are not merged."""
    dx = _heuristic(local)
    ext = asyncio.run(dx.extract(NO_FINAL_ANSWER)).value
    assert ext is not None and ext.error_cause is not None
    new = ext.error_cause
    assert json.loads(asyncio.run(dx.extract(NO_FINAL_ANSWER)).raw)["rule"] == "no_final_answer"
    off_by_one, off_by_one_node = ANSWER_RULES["off_by_one"]
    vecs = local.embed([new, off_by_one, off_by_one_node, ANSWER_RULES["no_final_answer"][1]])
    assert float(vecs[0] @ vecs[1]) >= dx.theta_dup  # the screen lets it through to Prompt 2

    stored = KnownCause("C1", "active", off_by_one)
    dedup = asyncio.run(dx.deduplicate(new, [stored])).value
    assert dedup is not None and not dedup.duplicate and dedup.matched_cause_id is None
    recurrence = asyncio.run(dx.extract(NO_FINAL_ANSWER.model_copy(update={"known": (stored,)}))).value
    assert recurrence is not None and recurrence.matched_cause_id is None

    lenient = _heuristic(local, theta_merge=-1.0)  # any node would do by similarity alone
    node = NodeView("N1", off_by_one_node, (off_by_one,))
    assignment = asyncio.run(lenient.assign_node(new, [node])).value
    assert assignment is not None and assignment.create_new_node and assignment.assigned_node is None
    mine = NodeView("N2", ANSWER_RULES["no_final_answer"][1], (new,))
    merge = asyncio.run(lenient.consolidate(node, mine)).value
    assert merge is not None and not merge.merge

    # the same rule still matches: a stored cause, a node and a node pair of no_final_answer
    same = asyncio.run(dx.deduplicate(new, [stored, KnownCause("C2", "active", new)])).value
    assert same is not None and same.duplicate and same.matched_cause_id == "C2"
    joined = asyncio.run(lenient.assign_node(new, [node, mine])).value
    assert joined is not None and joined.assigned_node == "N2"
    twin = NodeView("N3", ANSWER_RULES["no_final_answer"][1], (new,))
    assert asyncio.run(lenient.consolidate(mine, twin)).value == Consolidation(True, mine.label)


def test_help_says_the_heuristic_is_not_the_papers_diagnostician(capsys: pytest.CaptureFixture[str]) -> None:
    out = " ".join(_cli(capsys, "diagnose", "--help").replace("│", " ").split())  # the option's help, unwrapped
    assert "'heuristic': offline rules" in out and "NOT the paper's LLM diagnostician" in out


def test_without_an_endpoint_the_error_names_the_heuristic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f.jsonl").write_text("{}\n")
    code, _, err = run_cli(
        capsys,
        "diagnose",
        str(tmp_path / "f.jsonl"),
        "--run",
        "r",
        "--round",
        "1",
        "--db",
        f"sqlite:///{tmp_path / 'x.db'}",
    )
    assert code == 1 and "--diagnostician heuristic" in err
