"""A new user's first hour (issue 53): the round tells the truth about its next step, the
documented order holds, the errors a trainer catches are exported and grouped by what to do,
and a typo cannot ask for the impossible. Against SQLite, the real CLI and a loopback HTTP
server (:mod:`tests.llm_server`); the resume recipe itself runs as docs/how-to/own-trainer.md's
block (tests/test_docs_examples.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import diagevo
import diagevo.catalog
from diagevo.config.sections import DiagnosisConfig
from diagevo.errors import DiagnosticianBroken, DiagnosticianDown
from diagevo.generation.openai_client import ModelNotServed, unanswered
from diagevo.log import RunBusy
from diagevo.rounds import ProtocolError
from docs.render import PACKAGE, _error_classes, error_classes
from tests.llm_server import Fail, LLMServer
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_public_api import LABELS, _round
from tests.test_rounds import promote_on_a_question

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"diagevo": PACKAGE, "diagevo.cli": ROOT / "cli"}
NO_RETRY = DiagnosisConfig(max_retries=0, embedder="local")
SHORT = json.dumps({"matched_cause_id": None, "error_cause": "sign error"})  # 2 words, not 10-20


def _store(tmp_path: Path, name: str = "h") -> Any:
    return diagevo.open_store(f"sqlite:///{tmp_path / f'{name}.db'}")


def _committed_run(store: diagevo.Recorder, run: str, rounds: int = 1) -> None:
    """An external trainer's run of ``rounds`` committed rounds, each on one question of its own."""
    diagevo.start_run(store, run, {"k": 1.0}, trainer="a trainer")
    for _ in range(rounds):
        rnd = diagevo.Round.open(store, run)
        promote_on_a_question(rnd)
        rnd.commit()


# --- 1. next_step is true at every point a round can stop ----------------------------------------


def status(capsys: pytest.CaptureFixture[str], db: str, run: str = "n") -> tuple[int, str]:
    """``round status --json``: the round the run stands in and its next step."""
    code, out, err = run_cli(capsys, "round", "status", "--run", run, "--db", db, "--json")
    assert code == 0, err
    said = json.loads(out)
    return said["round"], said["next_step"]


def test_next_step_at_every_point_a_round_can_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``Round.next_step`` at each point, and ``round status`` saying it for the open round (or the
    next one: a run not started, a round committed)."""
    db = f"sqlite:///{tmp_path / 'n.db'}"
    with LLMServer() as srv, diagevo.open_store(db) as store:
        assert status(capsys, db) == (1, "open")  # no run n yet: round start creates it
        diagevo.start_run(store, "n", {"k": 1.0})
        assert diagevo.Round(store, "n", 1).next_step == "open"
        assert status(capsys, db) == (1, "open")
        rnd = diagevo.Round.open(store, "n")
        assert rnd.next_step == "record"
        reqs = rnd.requests(len(LABELS))
        candidates = [
            diagevo.Candidate(
                q.question_id,
                q.mode,
                f"what is {label}?",
                responses=tuple([f"\\boxed{{{label}}}"] * 8 + ["\\boxed{1}"] * 4),
            )
            for q, label in zip(reqs, LABELS, strict=True)
        ]
        rnd.record(candidates)
        assert diagevo.Round.open(store, "n").next_step == "promote"  # a crash here: reopened, the same
        rnd.promote()
        assert rnd.next_step == "record_failures"
        assert status(capsys, db) == (1, "record_failures")
        assert rnd.record(candidates).new == 0  # a resumed trainer's retry of its questions: a no-op
        with pytest.raises(diagevo.OutOfOrder, match="promotions are decided"):
            rnd.record([diagevo.Candidate("new", "free", "what is 2?", answers=("2",))])
        kept = rnd.questions()
        assert [s.question_id for s in kept] == [q.question_id for q in reqs] and all(s.retained for s in kept)
        rnd.record_metrics({"acc": 0.5})
        assert rnd.next_step == "commit"  # metrics in, no failure: a round without failures commits
        failures = [
            {"failure_id": f"f-{s.question_id}", "question_id": s.question_id, "response": "\\boxed{0}"}
            | {"reference": s.reference}
            for s in kept
        ]
        rnd.record_failures(failures)
        assert rnd.next_step == "diagnose"
        srv.default("extract", Fail(503, "overloaded"))  # every request unanswered: retry later
        with pytest.raises(DiagnosticianDown) as down:
            diagevo.diagnose(rnd, llm_url=srv.url, model="m", embedder=srv.url, cfg=NO_RETRY)
        assert isinstance(down.value, diagevo.RetryLater) and isinstance(down.value, diagevo.DiagnosesFailed)
        assert not isinstance(down.value, diagevo.BadServer)
        assert rnd.next_step == "diagnose"  # not "commit": the commit refuses it
        with pytest.raises(diagevo.OutOfOrder, match=r"3 of 3 failures failed.*allow_failed=True"):
            rnd.commit()
    code, _, err = run_cli(capsys, "round", "commit", "--run", "n", "--db", db)
    assert_one_line_error(code, err, "failed to diagnose", "round commit --run n --round 1 --allow-failed-diagnoses")
    with diagevo.open_store(db) as store:
        rnd = diagevo.Round.open(store, "n")
        assert rnd.reopened and rnd.next_step == "diagnose"
        diagevo.diagnose(rnd, diagnostician="heuristic")  # the diagnostician back: only the failed are asked
        assert rnd.next_step == "commit"
        assert rnd.commit().ranks == 1  # the metrics recorded before the outage
        assert diagevo.Round(store, "n", 1).next_step == "committed"
    assert status(capsys, db) == (2, "open")
    code, out, _ = run_cli(capsys, "round", "status", "--run", "n", "--db", db)
    assert code == 0 and out.startswith("run n, round 2: next, open the round: diagevo round start")


def test_a_diagnostician_answering_wrongly_is_a_bad_server(tmp_path: Path) -> None:
    with LLMServer() as srv, _store(tmp_path) as store:
        diagevo.start_run(store, "w", {"k": 1.0})
        rnd, _ = _round(store, "w", 1)
        srv.default("extract", SHORT)
        with pytest.raises(DiagnosticianBroken) as broken:
            diagevo.diagnose(rnd, llm_url=srv.url, model="m", embedder=srv.url, cfg=NO_RETRY)
        assert isinstance(broken.value, diagevo.BadServer) and not isinstance(broken.value, diagevo.RetryLater)
        assert rnd.next_step == "diagnose"


@pytest.mark.parametrize(
    ("line", "down"),
    [
        ("timed out after 60 s (after 4 attempts)", True),
        ("connection refused", True),
        ("HTTP 503: overloaded (after 1 attempts)", True),
        ("HTTP 429: slow down", True),
        ("HTTP 400: the model 'x' does not exist", False),
        ("HTTP 307: a redirect to another origin (http://elsewhere/v1) not followed", False),
        ("not a chat completion: '{}' (after 4 attempts)", False),
        ("reply body over the limit of 1048576 bytes: stopped reading", False),
    ],
)
def test_a_request_unanswered_is_told_from_an_answer(line: str, down: bool) -> None:
    assert unanswered(line) is down


@pytest.mark.slow
def test_two_ranks_stop_together_when_the_diagnostician_is_down_and_go_on_when_run_again(tmp_path: Path) -> None:
    """examples/external_trainer.py --ranks 2: rank 0's diagnose raises RetryLater, it tells the
    other rank, both stop with the round open and every rank's records in it; the same command
    run again goes straight to the diagnosis and commits with both ranks' metrics."""
    from tests.test_train_outage import serve

    srv = LLMServer().start()
    serve(srv)
    srv.stop()  # down before the run starts
    db = f"sqlite:///{tmp_path / 'dp.db'}"
    command = [sys.executable, str(ROOT / "examples" / "external_trainer.py"), "--db", db, "--run", "dp"]
    command += ["--rounds", "2", "--ranks", "2", "--set", "train.curriculum_questions=16"]
    command += ["--set", f'diagnosis.llm_url="{srv.url}"', "--set", 'diagnosis.model="test-model"']
    command += ["--set", "diagnosis.max_retries=0", "--set", f'train.out_dir="{tmp_path / "ckpt"}"']
    try:
        first = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert first.returncode == 1, first.stderr[-3000:]
        assert "round 1 stopped, not committed: cannot reach the diagnostician" in first.stderr
        with diagevo.open_store(db) as store:
            rnd = diagevo.Round.open(store, "dp")
            assert (rnd.t, rnd.reopened, rnd.next_step) == (1, True, "diagnose")
            ranks = [e.event.rank for e in store.read("dp", types=(diagevo.catalog.MetricsRecorded,))]
            assert sorted(ranks) == [0, 1]
        srv.restart()
        second = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert second.returncode == 0, second.stderr[-3000:]
        assert "round 1: kept" in second.stdout and "ranks 2" in second.stdout
    finally:
        srv.stop()
    with diagevo.open_store(db) as store:
        commits = [e.event for e in store.read("dp", types=(diagevo.catalog.RoundCommitted,))]
        assert [c.ranks for c in commits] == [2, 2] and diagevo.verify_run(store, "dp") == []


# --- 3. what the docs forbid, or what would make the log lie, is refused --------------------------


def test_wrong_types_and_the_order_of_the_steps_are_refused(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        for kwargs, said in (
            ({"seed": "0"}, "seed: Input should be a valid integer (got '0', of type str)"),
            ({"seed": True}, "seed: Input should be a valid integer (got True, of type bool)"),
            ({"trainer": None}, "trainer: Input should be a valid string (got None, of type NoneType)"),
        ):
            with pytest.raises(diagevo.BadInput, match=said.replace("(", r"\(").replace(")", r"\)")):
                diagevo.start_run(store, "t", {"k": 1.0}, **kwargs)
        assert store.runs() == []  # nothing stored, "0" never coerced to 0
        diagevo.start_run(store, "t", {"k": 1.0})
        with pytest.raises(diagevo.BadInput, match="t: Input should be a valid integer"):
            diagevo.Round.open(store, "t", "1")  # type: ignore[arg-type]
        rnd = diagevo.Round.open(store, "t")
        [q] = rnd.requests(1)
        rnd.record([diagevo.Candidate(q.question_id, q.mode, "what is 7?", answers=("7",) * 8 + ("1",) * 4)])
        before = store.last_seq("t")
        failure = {"failure_id": "f", "question_id": q.question_id, "response": "\\boxed{1}", "reference": "7"}
        with pytest.raises(diagevo.OutOfOrder, match="before its promotions are decided") as early:
            rnd.record_failures([failure])
        assert not isinstance(early.value, diagevo.Conflict)  # a fix of the call, never retried
        assert store.last_seq("t") == before
        rnd.promote()
        assert rnd.record_failures([failure]) == 1


def test_a_question_the_round_never_handed_out_is_the_trainers_own(tmp_path: Path) -> None:
    """Decided: a trainer may write its own questions (the round keeps no list of its requests);
    what the log could not hold truthfully (a node other than the cause's) is refused."""
    with _store(tmp_path) as store:
        _committed_run(store, "q")
        rnd = diagevo.Round.open(store, "q")
        own = diagevo.Candidate("my-free-1", "free", "What is 12 + 30?", answers=("42",) * 8 + ("41",) * 4)
        assert rnd.record([own]).new == 1
        with pytest.raises(ProtocolError, match="node 'N1' does not fit \\(a free question has none\\)"):
            rnd.record([diagevo.Candidate("my-free-2", "free", "What is 1 + 1?", node="N1", answers=("2",))])
        rnd.promote()
        assert rnd.commit().questions == 1  # counted as any question


def test_a_model_the_server_does_not_list_is_refused_before_the_first_diagnosis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with LLMServer(models=("served-model",)) as srv, _store(tmp_path) as store:
        diagevo.start_run(store, "m", {"k": 1.0})
        rnd, _ = _round(store, "m", 1)
        before = store.last_seq("m")
        with pytest.raises(ModelNotServed, match="does not serve model 'served-modle' \\(did you mean 'served-model'"):
            diagevo.diagnose(rnd, llm_url=srv.url, model="served-modle", embedder=srv.url)
        assert store.last_seq("m") == before  # no llm.called crediting a model that never answered
        code, out, _ = run_cli(capsys, "doctor", "--diagnostician", srv.url, "--diagnostician-model", "served-modle")
        assert code == 1 and "model not listed" in out and "served-model" in out
    db = f"sqlite:///{tmp_path / 'none.db'}"
    with diagevo.open_store(db) as store:
        diagevo.start_run(store, "n", {"k": 1.0})
        rnd, failures = _round(store, "n", 1)
        scored = {s.question_id: s for s in rnd.questions()}
    lines = [
        {**f, "question": scored[f["question_id"]].text, "pseudo_label": scored[f["question_id"]].pseudo_label}
        for f in failures
    ]
    (tmp_path / "f.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with LLMServer(models=()) as srv:  # a server that lists none: said so, the name not checked
        from tests.test_train_outage import serve

        serve(srv)
        code, out, _ = run_cli(capsys, "doctor", "--diagnostician", srv.url, "--diagnostician-model", "m", "--json")
        listed = json.loads(out)["diagnostician"]["listed"]
        assert listed["verdict"] == "lists no models" and listed["ok"], listed
        args = ["--run", "n", "--round", "1", "--llm-url", srv.url, "--model", "m", "--embedder", srv.url]
        code, _, err = run_cli(capsys, "diagnose", str(tmp_path / "f.jsonl"), *args, "--db", db)
        assert code == 0 and "note: the diagnostician's server lists no models: m is not checked" in err, err
        from diagevo.doctor import check_diagnostician
        from diagevo.train.config import load_config

        [check] = check_diagnostician(load_config(None, [f'diagnosis.llm_url="{srv.url}"']).diagnosis)
        assert check.status == "warning" and "lists no models" in check.detail


# --- 4. the errors a trainer catches, by what to do ------------------------------------------------


def test_every_error_class_sits_under_one_meaning_at_most_and_the_caught_ones_are_exported() -> None:
    import importlib

    meanings = (diagevo.RetryLater, diagevo.BadServer, diagevo.BadInput, diagevo.Unavailable)
    for name, module, _bases, _doc in _error_classes(SOURCES):
        cls = getattr(importlib.import_module(module), name)
        under = [m.__name__ for m in meanings if issubclass(cls, m)]
        assert len(under) <= 1, (name, under)
    assert issubclass(diagevo.EndpointUnreachable, diagevo.RetryLater)
    assert issubclass(RunBusy, diagevo.Conflict) and issubclass(diagevo.Conflict, diagevo.RetryLater)
    assert issubclass(diagevo.OutOfOrder, diagevo.BadInput) and not issubclass(ProtocolError, diagevo.Conflict)
    assert issubclass(diagevo.NotFound, diagevo.BadInput)
    for name in ("RetryLater", "EndpointUnreachable", "Conflict", "DiagnosesFailed", "BadServer", "OutOfOrder"):
        assert name in diagevo.__all__ and issubclass(getattr(diagevo, name), diagevo.DiagevoError)


def test_the_errors_page_shows_the_tree() -> None:
    page = error_classes(SOURCES)
    tree = page.split("## The error classes", 1)[1]
    retry = tree.split("- `diagevo.RetryLater`", 1)[1].split("\n    - `diagevo.BadServer`", 1)[0]
    assert "- `diagevo.EndpointUnreachable`" in retry and "- `diagevo.Conflict`" in retry
    assert "- `DiagnosticianDown` (also a `DiagnosesFailed`" in retry
    assert "- `diagevo.OutOfOrder`" in tree.split("- `diagevo.BadInput`", 1)[1]


# --- 5. defaults and names -------------------------------------------------------------------------


def test_no_run_named_means_the_latest_run_and_never_a_whatif(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'd.db'}"
    with diagevo.open_store(db) as store:
        _committed_run(store, "src")
        diagevo.start_run(store, "empty", {"k": 1.0})
        _committed_run(store, "latest")
        assert diagevo.what_if(store, "src", {"memory.k": "2"}).run == "src~k=2"  # written last
    code, out, err = run_cli(capsys, "memory", "stats", "--db", db)
    assert code == 0 and "run latest" in out, err
    code, out, err = run_cli(capsys, "runs", "--db", db, "--json")
    status = {r["run"]: r["status"] for r in json.loads(out)["runs"]}
    assert status == {"src": "complete", "empty": "no round yet", "latest": "complete", "src~k=2": "what-if"}


def test_the_cli_says_where_an_option_goes_and_shows_what_a_run_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    with diagevo.open_store(db) as store:
        _committed_run(store, "a-run-with-a-rather-long-name-for-the-first-column", rounds=2)
    code, _, err = run_cli(capsys, "--db", db, "runs")
    assert_one_line_error(code, err, f"--db is an option of the command, given after it: diagevo runs --db {db}")
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(capsys, "runs", "--db", db)
    assert code == 0, err
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 80 and time.strftime("%Y-%m-%d") in out
    assert all(len(line.split()[-1]) == 5 for line in out.splitlines() if "complete" in line)  # HH:MM whole
    code, out, err = run_cli(capsys, "memory", "stats", "--wide", "--db", db)
    assert code == 0 and "dx fail" in out, err
    report = tmp_path / "r.html"
    code, _, err = run_cli(capsys, "report", "--db", db, "-o", str(report))
    assert code == 0, err
    html = report.read_text(encoding="utf-8")
    assert 'id="memory"' in html and 'id="accuracy"' not in html  # no metric recorded: no empty panel


# --- 6. what a typo can ask for ----------------------------------------------------------------------


def test_a_sweep_is_counted_and_checked_before_any_whatif_is_written(tmp_path: Path) -> None:
    from diagevo.whatif import WhatIfError, _plan, _write, what_if_sweep

    with _store(tmp_path) as store:
        _committed_run(store, "s")
        thousand = ",".join(str(1 + i / 1000) for i in range(1000))
        started = time.process_time()
        with pytest.raises(WhatIfError, match=r"3 x 1,000 values ask for 3,000 what-ifs, more than the 100"):
            what_if_sweep(store, "s", [f"memory.k={thousand}", "memory.theta_up=0.5,0.6,0.7"][::-1])
        assert time.process_time() - started < 60  # counted, not built (a bound far above the count's cost)
        with pytest.raises(diagevo.BadInput, match="memory.k"):
            what_if_sweep(store, "s", ["memory.k=1,2,-1"])  # the last value is bad: the first two not written
        assert store.runs() == ["s"]
        plan = _plan(store, "s", {"memory.k": "2"}, None)  # a second process, planned before the first wrote
        first = diagevo.what_if(store, "s", {"memory.k": "2"})
        second = _write(store, "s", plan)
        assert first.created and not second.created and second.run == first.run  # it says the run exists


def test_requests_are_bounded_by_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    code, _, err = run_cli(capsys, "round", "start", "--run", "r", "--db", db, "--set", "limits.requests=20")
    assert code == 0, err
    started = time.process_time()
    code, _, err = run_cli(capsys, "round", "requests", "--run", "r", "--n", "1000000000", "--db", db)
    assert_one_line_error(code, err, "n 1,000,000,000 is more than limits.requests 20 allows in one call")
    assert time.process_time() - started < 60
    with diagevo.open_store(db) as store:
        rnd = diagevo.Round.current(store, "r")
        assert len(rnd.requests(20)) == 20 and rnd.requests(20)[:5] == rnd.requests(5)


@pytest.mark.parametrize(
    ("args", "sets"),
    [
        (["round", "start", "--run", "x"], True),
        (["train", "--dry-run"], True),
        (["config"], True),
        (["doctor"], True),
        (["diagnose", "f.jsonl", "--run", "x", "--round", "1"], False),
    ],
)
def test_a_number_out_of_range_is_a_config_error(args: list[str], sets: bool, tmp_path: Path, monkeypatch: Any) -> None:
    from tests.input_cases import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.jsonl").write_text("{}\n", encoding="utf-8")
    huge = "9" * 5000
    (tmp_path / "c.toml").write_text(f"[diagnosis]\nconcurrency = {huge}\n", encoding="utf-8")
    (tmp_path / "d.toml").write_text("[diagnosis]\nconcurrency = 99999999999999999999999\n", encoding="utf-8")
    cases = [
        (["--config", "c.toml"], "c.toml: a whole number of more than 4,300 digits"),
        (["--config", "d.toml"], "diagnosis.concurrency: Input should be at most 9,223,372,036,854,775,807"),
    ]
    if sets:
        cases.append((["--set", f"memory.k={huge}"], "config: memory.k: a whole number of more than 4,300 digits"))
    for given, said in cases:
        code, _, err = cli(*args, *given)
        assert_one_line_error(code, err, said)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://bob:Secret9@llm.example/v1", "credentials in the URL are not taken"),
        ("http://[::1/v1", "not a URL"),
        ("http://llm.example:99999/v1", "not a URL (Port out of range"),
        ("llm.example:8000/v1", "not an http:// or https:// URL"),
        ("http://llm.example/v1?" + "a" * 3000, "a URL of 3,022 characters, longer than the 2,048 taken"),
    ],
)
def test_a_diagnostician_url_is_checked_in_train_diagnose_and_doctor(url: str, said: str, tmp_path: Path) -> None:
    from tests.input_cases import cli

    (tmp_path / "f.jsonl").write_text("{}\n", encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'u.db'}"
    for args in (
        ["train", "--dry-run", "--db", db, "--set", f'diagnosis.llm_url="{url}"'],
        ["diagnose", str(tmp_path / "f.jsonl"), "--run", "u", "--round", "1", "--db", db, "--llm-url", url],
        ["doctor", "--diagnostician", url],
    ):
        code, out, err = cli(*args)
        assert_one_line_error(code, err, said)
        assert "Secret9" not in out + err


@pytest.mark.parametrize(
    "args",
    [
        ["report", "-o", "{long}.html"],
        ["memory", "export", "-o", "{long}.jsonl"],
        ["memory", "stats", "-o", "{long}.csv"],
        ["memory", "plot", "-o", "{long}.svg"],
        ["memory", "ingest", "{long}.jsonl"],
        ["round", "record", "{long}.jsonl", "--run", "r"],
        ["diagnose", "{long}.jsonl", "--run", "r", "--round", "2", "--diagnostician", "heuristic"],
    ],
)
def test_a_name_over_the_file_systems_limit_is_a_declared_error(args: list[str], tmp_path: Path) -> None:
    from tests.input_cases import cli

    db = f"sqlite:///{tmp_path / 'l.db'}"
    with diagevo.open_store(db) as store:
        _committed_run(store, "r")
        diagevo.Round.open(store, "r")
    code, _, err = cli(*[a.format(long=tmp_path / ("x" * 300)) for a in args], "--db", db)
    assert_one_line_error(code, err, "a name in it of 30", "longer than the file system takes")
    assert code == 1


def test_the_quick_tier_is_a_subset_of_the_fast_tier_and_the_fast_tier_is_unchanged() -> None:
    """``make test-quick`` runs some of the fast tier's files on SQLite; ``make test`` still runs
    every fast test, spread over pytest-xdist's processes a file to each (the time the quick tier
    takes is measured, never asserted here)."""
    out = subprocess.run(["make", "-n", "test-quick", "test"], cwd=ROOT, capture_output=True, text=True, check=True)
    quick, fast = [line.split("pytest", 1)[1] for line in out.stdout.splitlines() if " -m pytest " in line]
    assert fast.split() == ["-m", '"not', "slow", "and", "not", 'vllm"', "-n", "auto", "--dist", "loadfile"]
    assert quick.startswith(' -m "not slow and not vllm and not postgres" -q tests/')
    files = [w for w in quick.split() if w.startswith("tests/")]
    assert len(files) >= 10 and all((ROOT / f).is_file() for f in files)
    assert "tests/test_rounds.py" in files and "tests/test_train.py" not in files
