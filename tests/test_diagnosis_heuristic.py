"""``diagevo diagnose --diagnostician heuristic``: the offline rule-based stand-in (not the
paper's LLM diagnostician) that lets the CLI round protocol be walked through without a server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from diagevo.config import DiagnosisConfig
from diagevo.diagnosis.calibration import thresholds_for
from diagevo.diagnosis.embedder import make_embedder
from diagevo.diagnosis.heuristic import ANSWER_MODEL, ANSWER_RULES, HeuristicDiagnostician, answer_mismatch
from diagevo.diagnosis.interface import Consolidation, ExtractionInput, KnownCause, NodeView
from diagevo.log import open_log
from tests.test_cli_memory import run_cli


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


def test_the_round_protocol_walks_through_with_the_heuristic_diagnostician(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """round start -> requests -> record -> promote -> diagnose --diagnostician heuristic ->
    commit, all through the CLI on a SQLite file; the causes it names are in ``memory show``."""
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    common = ("--run", "h", "--db", db)
    assert json.loads(_cli(capsys, "round", "start", *common, "--set", "memory.k=1.0", "--json"))["round"] == 1
    reqs = json.loads(_cli(capsys, "round", "requests", "--n", "4", *common, "--json"))["requests"]
    labels = ["12", "30", "8", "5"]
    lines = [
        json.dumps(q | {"text": f"question {i}?", "answers": [lab] * 9 + ["1", "2", "3"]})
        for i, (q, lab) in enumerate(zip(reqs, labels))
    ]
    (tmp_path / "q.jsonl").write_text("\n".join(lines) + "\n")
    recorded = json.loads(_cli(capsys, "round", "record", "q.jsonl", *common, "--json"))
    assert all(q["retained"] for q in recorded["questions"])
    _cli(capsys, "round", "promote", *common)

    def failure(i: int, response: str) -> str:
        q = reqs[i]["question_id"]
        return json.dumps(
            {
                "failure_id": f"f{i}",
                "question_id": q,
                "question": f"question {i}?",
                "pseudo_label": labels[i],
                "response": response,
                "reference": f"so it is \\boxed{{{labels[i]}}}",
                "known_causes": [],
            }
        )

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
    summary = json.loads(_cli(capsys, *diag, "--json"))  # again: everything is decided already
    assert summary["diagnostician"] == "heuristic" and summary["model"] == ANSWER_MODEL
    assert summary["resumed"] == 4 and summary["llm_calls"] == 0
    done = json.loads(_cli(capsys, "round", "commit", *common, "--metric", "acc=0.5", "--json"))
    assert done["round"] == 1

    shown = json.loads(_cli(capsys, "memory", "show", *common[:2], "--db", db, "--json"))
    text = json.dumps(shown)
    for rule in ("sign", "off_by_factor", "no_final_answer"):
        assert ANSWER_RULES[rule][0] in text, rule
    assert ANSWER_RULES["off_by_one"][0] not in text and ANSWER_RULES["wrong_number"][0] not in text

    with open_log(db) as store:
        diagnosed = {e.data["failure_id"]: e.data for e in store.read("h", types=("failure.diagnosed",), texts=True)}
    assert set(diagnosed) == {"f0", "f1", "f2", "f3"}
    assert all(d["model"] == ANSWER_MODEL for d in diagnosed.values())
    raws = {fid: json.loads(d["raw"]) for fid, d in diagnosed.items()}
    assert {r["diagnostician"] for r in raws.values()} == {"heuristic"}
    assert [raws[f]["rule"] for f in ("f0", "f1", "f2", "f3")] == [
        "sign",
        "off_by_factor",
        "no_final_answer",
        "final_answer_agrees",
    ]
    assert diagnosed["f3"]["error_cause"] is None and diagnosed["f3"]["matched_cause"] is None


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


NO_FINAL_ANSWER = ExtractionInput("f9", "q9", "What is 3+3?", "6", "3+3 = 9", "3+3 = 6, so \\boxed{6}")


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
    recurrence = asyncio.run(dx.extract(dataclasses.replace(NO_FINAL_ANSWER, known=(stored,)))).value
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
