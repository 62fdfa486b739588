"""Hints a newcomer meets first, each run as printed (it must work), and the report's memory
chart, whose round labels must stay clear of its title."""

from __future__ import annotations

import _thread
import json
import re
import shlex
import signal
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from diagevo.log import open_log
from diagevo.report import figures
from diagevo.report.svg import NOTE
from diagevo.results.stats import LifecycleRow
from tests.llm_server import LLMServer
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_diagnosis_pipeline import D1, L1, NEW, NEW_LABEL, RUN, j, seed
from tests.test_train_outage import deduplicate


def test_lifecycle_round_labels_stay_clear_of_the_chart_title() -> None:
    rounds = [LifecycleRow(t, a, m, n, 0.0, 1.0) for t, a, m, n in ((1, 4, 0, 2), (2, 3, 1, 3), (3, 2, 2, 3))]
    svg = ElementTree.fromstring(figures.lifecycle(rounds))
    ns = "{http://www.w3.org/2000/svg}"
    area = svg.find(f".//{ns}rect[@class='area']")
    assert area is not None
    top = float(area.get("y", "nan"))
    texts = [(t.text or "", float(t.get("y", "nan"))) for t in svg.iter(f"{ns}text")]
    labels = [(text, y) for text, y in texts if "+" in text]
    assert [text for text, _ in labels] == ["4+0", "3+1", "2+2"]
    for text, baseline in labels:
        assert baseline - NOTE >= top, text  # the whole label inside the plot, under the title
    assert next(y for text, y in texts if text == "Memory lifecycle") < top  # the title above the plot


def test_a_sqlite_url_with_one_slash_suggests_a_url_that_works(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "round", "start", "--run", "r", "--db", "sqlite:/diagevo.db")
    assert_one_line_error(code, err, "invalid database URL 'sqlite:/diagevo.db'")
    hinted = re.search(r"a SQLite file is (\S+),", err)
    assert hinted is not None and hinted.group(1) == "sqlite:///diagevo.db", err  # not sqlite:///sqlite:/...
    code, _, err = run_cli(capsys, "round", "start", "--run", "r", "--db", hinted.group(1))
    assert code == 0, err
    code, out, err = run_cli(capsys, "runs", "--db", hinted.group(1), "--json")
    assert code == 0 and "r" in [r["run"] for r in json.loads(out)["runs"]], out
    assert (tmp_path / "diagevo.db").is_file()


def test_tagging_an_unknown_run_says_did_you_mean_and_the_hint_lists_the_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 't.db'}"
    assert run_cli(capsys, "round", "start", "--run", "demo", "--db", db)[0] == 0
    for command in (("runs", "tag", "deno", "x"), ("runs", "note", "deno", "hello")):
        code, _, err = run_cli(capsys, *command, "--db", db)
        assert_one_line_error(code, err, "no run 'deno'", "(did you mean 'demo'?)")
        assert "start it first" not in err
        listed = re.search(r"`([^`]+)`", err)
        assert listed is not None, err
        words = shlex.split(listed.group(1))
        assert words[1:] == ["runs", "--db", db], words  # the hint, run as printed
        code, out, _ = run_cli(capsys, *words[1:])
        assert code == 0 and "demo" in out
    assert run_cli(capsys, "runs", "tag", "demo", "x", "--db", db)[0] == 0


def test_doctor_on_a_mistyped_model_directory_advises_no_removal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "tiny").mkdir(parents=True)  # there, but incomplete: a rebuild is right
    code, out, _ = run_cli(capsys, "doctor", "--model", "models/tin", "--json")
    assert code == 1
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    typo = checks["model models/tin"]
    assert "no such directory (did you mean 'models/tiny'?)" in typo["detail"]
    assert "rm -rf" not in (typo["fix"] or "") and typo["fix"].endswith("--out models/tin")
    assert checks["model models/tiny"]["fix"].startswith("rm -rf models/tiny && ")


def test_ctrl_c_of_diagnose_prints_the_command_that_continues_and_it_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Python's own SIGINT handler, as at a terminal (a background shell starts tests with it ignored,
    # and interrupt_main then does nothing)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_and_continue(capsys, tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_and_continue(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'd.db'}"
    with open_log(db) as store:
        seed(store, {"N1": (L1, [("C1", D1)])})
    interrupted = {"done": False}

    def extract(body: dict[str, Any]) -> str:
        if not interrupted["done"]:  # the first request: Ctrl-C in the command's main thread
            interrupted["done"] = True
            _thread.interrupt_main()
        return j(matched_cause_id=None, error_cause=NEW)

    failures = tmp_path / "failures.jsonl"
    row = {
        "question_id": "q",
        "question": "Solve sqrt(x + 3) = x - 3 over the reals.",
        "pseudo_label": "6",
        "response": "x = 1 or x = 6, answer 1",
        "reference": "x = 6 (x = 1 fails the check)",
        "known_causes": [],
    }
    failures.write_text("".join(json.dumps({**row, "failure_id": f"f{i}"}) + "\n" for i in range(3)))
    with LLMServer() as srv:
        srv.default("extract", extract)
        srv.default("assign_node", j(create_new_node=True, new_node_label=NEW_LABEL, assigned_node=None))
        srv.default("deduplicate", deduplicate)  # the same cause again: a duplicate of the first
        args = ["diagnose", str(failures), "--run", RUN, "--round", "2", "--llm-url", srv.url, "--model", "m"]
        args += ["--embedder", srv.url, "--embed-model", "e", "--index", str(tmp_path / "i.lance"), "--db", db]
        code, _, err = run_cli(capsys, *args)
        assert code == 130, err
        # (the loopback server's thread may log the connection the interrupted client dropped)
        said = re.search(r"^interrupted: continue with `(.+)`$", err, flags=re.M)
        assert said is not None, err
        words = shlex.split(said.group(1))
        assert words[1:] == args
        code, out, err = run_cli(capsys, *words[1:], "--json")  # the command as printed goes on
    assert code == 0, err
    assert json.loads(out)["failures"] == 3
