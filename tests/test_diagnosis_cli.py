"""``diagevo diagnose`` and ``diagevo memory reindex`` end to end, against the loopback server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagevo.log import open_log
from diagevo.views.index import VIEW as CHECKPOINT
from tests.llm_server import LLMServer
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_diagnosis_pipeline import D1, L1, NEW, NEW_LABEL, RUN, j, seed


@pytest.fixture
def srv() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with open_log(url) as store:
        seed(store, {"N1": (L1, [("C1", D1)])})
    return url


def line(fid: str, **kw: Any) -> str:
    base = {
        "failure_id": fid,
        "question_id": "q-" + fid,
        "question": "Solve sqrt(x + 3) = x - 3 over the reals.",
        "pseudo_label": "6",
        "response": "x = 1 or x = 6, answer 1",
        "reference": "x = 6 (x = 1 fails the check)",
        "known_causes": [],
    }
    return json.dumps({**base, **kw})


def write(tmp_path: Path, *lines: str) -> Path:
    p = tmp_path / "failures.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def cli(capsys: pytest.CaptureFixture[str], srv: LLMServer, db: str, path: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(
        capsys,
        "diagnose",
        str(path),
        "--run",
        RUN,
        "--round",
        "2",
        "--llm-url",
        srv.url,
        "--model",
        "test-model",
        "--embedder",
        srv.url,
        "--embed-model",
        "test-embed",
        "--db",
        db,
        *extra,
    )


def test_diagnose_appends_decisions_and_why_shows_them(
    capsys: pytest.CaptureFixture[str], srv: LLMServer, db: str, tmp_path: Path
) -> None:
    def extract(body: dict[str, Any]) -> str:
        if "Known Causes" in body["messages"][1]["content"]:
            return j(matched_cause_id="C1", error_cause=None)
        return j(matched_cause_id=None, error_cause=NEW)

    srv.default("extract", extract)
    srv.script("assign_node", j(create_new_node=True, new_node_label=NEW_LABEL, assigned_node=None))
    path = write(tmp_path, line("f1", known_causes=["C1"]), "", line("f2"))
    code, out, err = cli(capsys, srv, db, path, "--json", "--index", str(tmp_path / "idx.lance"))
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["failures"], summary["recurrences"], summary["new_causes"], summary["new_nodes"]) == (2, 1, 1, 1)
    assert summary["theta_dup"] == 0.5  # an API embedder keeps the paper's threshold

    code, out, _ = run_cli(capsys, "memory", "why", "C2", "--db", db, "--run", RUN, "--json")
    assert code == 0
    story = json.loads(out)
    assert story["description"] == NEW and story["node"] == "N2"
    assert story["timeline"][0]["kind"] == "created" and story["timeline"][0]["failure"]["failure_id"] == "f2"
    assert story["timeline"][0]["failure"]["diagnosis"]["model"] == "test-model"
    code, out, _ = run_cli(capsys, "memory", "why", "C1", "--db", db, "--run", RUN, "--json")
    assert [e["kind"] for e in json.loads(out)["timeline"]] == ["created", "attributed"]

    # the rich summary of a rerun: everything already decided
    code, out, _ = cli(capsys, srv, db, path, "--index", str(tmp_path / "idx.lance"))
    assert code == 0 and "already decided (resumed)" in out

    code, out, err = run_cli(
        capsys,
        "memory",
        "reindex",
        "--db",
        db,
        "--run",
        RUN,
        "--embedder",
        srv.url,
        "--embed-model",
        "test-embed",
        "--index",
        str(tmp_path / "idx2.lance"),
        "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["rows"] == 4 and result["model"] == "test-embed"
    with open_log(db) as store:
        assert result["checkpoint"] == store.view_states(CHECKPOINT, RUN)[0].seq > 0


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        (["{not json"], "line 1: malformed JSON"),
        ([line("f1"), "[1, 2]"], "line 2: expected a JSON object"),
        ([line("f1", question=None)], "line 1: question"),
        ([json.dumps({"failure_id": "f1"})], "line 1: question_id is missing"),
        (
            [json.dumps({k: v for k, v in json.loads(line("f1")).items() if k != "pseudo_label"})],
            "pseudo_label is missing",
        ),
        ([line("f1", extra="x")], "line 1: extra is not a known field"),
        ([line("f1"), line("f1")], "line 2: failure_id 'f1' already appears on line 1"),
        ([line("f1"), "", line("f2", known_causes=["C7"])], "line 3: known_causes names 'C7'"),
    ],
)
def test_bad_lines_are_one_line_errors_and_nothing_is_stored(
    capsys: pytest.CaptureFixture[str], srv: LLMServer, db: str, tmp_path: Path, lines: list[str], needle: str
) -> None:
    with open_log(db) as store:
        before = store.last_seq(RUN)
    code, _, err = cli(capsys, srv, db, write(tmp_path, *lines))
    assert_one_line_error(code, err, needle)
    with open_log(db) as store:
        assert store.last_seq(RUN) == before
    assert not srv.calls()


def test_wrong_run_or_round_is_refused(
    capsys: pytest.CaptureFixture[str], srv: LLMServer, db: str, tmp_path: Path
) -> None:
    path = write(tmp_path, line("f1"))
    code, _, err = run_cli(
        capsys, "diagnose", str(path), "--run", "nope", "--round", "2", "--llm-url", srv.url, "--db", db
    )
    assert_one_line_error(code, err, "no run 'nope'")
    code, _, err = run_cli(
        capsys, "diagnose", str(path), "--run", RUN, "--round", "5", "--llm-url", srv.url, "--db", db
    )
    assert_one_line_error(code, err, "round 5 is not open")
    code, _, err = run_cli(
        capsys,
        "diagnose",
        str(tmp_path / "missing.jsonl"),
        "--run",
        RUN,
        "--round",
        "2",
        "--llm-url",
        srv.url,
        "--db",
        db,
    )
    assert_one_line_error(code, err, "no such file")
