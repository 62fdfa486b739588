"""Nothing fails silently in diagnosis (issue 46, item 1; issue 47, item 5).

A dead endpoint raises before any failure is marked failed; a round whose failed diagnoses
exceed ``diagnosis.max_failed_share`` (or where every one failed) stops with the count and the
reasons, and the commit refuses it unless told; diagnosing again asks only for the failed ones;
a hostile reply costs its own failure, never the round. Against a real loopback HTTP server
(:mod:`tests.llm_server`) and SQLite."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import diagevo
from diagevo.catalog import RoundCommitted
from diagevo.errors import DiagnosesFailed, EndpointUnreachable
from diagevo.log import Recorder, open_log, payload
from diagevo.rounds import ProtocolError
from tests.llm_server import LLMServer, Raw
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_diagnosis_cli import cli, line, write
from tests.test_diagnosis_pipeline import (
    D1,
    D2,
    L1,
    L2,
    events,
    failure,
    j,
    run_round,
    seed,
)
from tests.test_public_api import LABELS, _round

CAUSE = "flips the sign of the final answer at the very end of an otherwise correct solution"
LABEL = "keeping track of signs when solving equations and simplifying algebraic expressions step by step"
SHORT = j(matched_cause_id=None, error_cause="sign error")  # a wrong reply shape: 2 words, not 10-20


@pytest.fixture
def srv() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Recorder]:
    s = open_log(f"sqlite:///{tmp_path / 'diag.db'}")
    yield s
    s.close()


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with open_log(url) as s:
        seed(s, {"N1": (L1, [("C1", D1)])})
    return url


def good(srv: LLMServer) -> None:
    """A working server: each failure a new cause of a new node (texts apart: no merges)."""
    causes, labels = itertools.count(), itertools.count()
    srv.default("extract", lambda _body: j(matched_cause_id=None, error_cause=f"{CAUSE} case {next(causes)}"))
    srv.default(
        "assign_node",
        lambda _body: j(create_new_node=True, new_node_label=f"{LABEL} case {next(labels)}", assigned_node=None),
    )


def commits(store: Any, run: str) -> list[dict[str, Any]]:
    return [payload(e) for e in store.read(run, types=(RoundCommitted,))]  # as stored


def test_a_dead_endpoint_raises_from_python_before_anything_is_marked_failed(tmp_path: Path) -> None:
    with LLMServer() as gone:
        dead = gone.url
    with LLMServer() as srv, diagevo.open_store(f"sqlite:///{tmp_path / 'd.db'}") as store:
        diagevo.start_run(store, "d", {"k": 1.0})
        rnd, _ = _round(store, "d", 1)
        before = store.last_seq("d")
        with pytest.raises(EndpointUnreachable, match=f"cannot reach the diagnostician at {dead}: connection refused"):
            diagevo.diagnose(rnd, llm_url=dead, model="m", embedder=srv.url)
        assert store.last_seq("d") == before  # no diagnosis.failed, no llm.called
        with pytest.raises(ProtocolError, match="not diagnosed"):
            rnd.commit({"acc": 0.5})


def test_every_reply_failing_stops_the_round_and_a_rerun_asks_only_for_them(tmp_path: Path) -> None:
    with LLMServer() as srv, diagevo.open_store(f"sqlite:///{tmp_path / 'w.db'}") as store:
        diagevo.start_run(store, "w", {"k": 1.0})
        rnd, failures = _round(store, "w", 1)
        srv.default("extract", SHORT)
        with pytest.raises(DiagnosesFailed) as caught:
            diagevo.diagnose(rnd, llm_url=srv.url, model="m", embedder=srv.url)
        err = caught.value
        assert (err.failed, err.total) == (len(LABELS), len(LABELS))
        reason = "extract: invalid reply after a re-ask: error_cause must be a 10-20 word phrase, got 2 words"
        assert err.reasons == ((reason, len(LABELS)),)
        assert str(err) == (
            f"round 1 of run 'w': 3 of 3 failures failed to diagnose (diagnosis.max_failed_share 0.5 allows 1): "
            f"3 x {reason}; they stay undiagnosed, and diagnosing the round again asks only for them"
        )
        with pytest.raises(ProtocolError, match=r"3 of 3 failures failed to diagnose.*allow_failed=True"):
            rnd.commit({"acc": 0.5})

        good(srv)
        asked = len(srv.calls("extract"))
        summary = diagevo.diagnose(rnd, llm_url=srv.url, model="m", embedder=srv.url)
        assert (summary.retried, summary.failed, summary.resumed, summary.new_causes) == (3, 0, 0, 3)
        assert len(srv.calls("extract")) - asked == len(failures)  # once each, no re-ask
        again = diagevo.diagnose(rnd, llm_url=srv.url, model="m", embedder=srv.url)
        assert (again.resumed, again.retried, again.llm_calls) == (3, 0, 0)
        rnd.commit({"acc": 0.5})
        assert "failed_diagnoses_allowed" not in commits(store, "w")[0]  # the stored format, as before
        assert diagevo.verify_run(store, "w") == []
        assert len(diagevo.load_memory(store, "w").causes) == 3


def test_a_sporadic_bad_reply_is_recorded_and_the_round_goes_on(tmp_path: Path) -> None:
    with LLMServer() as srv, diagevo.open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        diagevo.start_run(store, "s", {"k": 1.0})
        rnd, _ = _round(store, "s", 1)
        good(srv)
        fine = srv.defaults["extract"]
        assert callable(fine)
        # one invented cause id among the failures: of the question whose label is LABELS[0]
        invented = j(matched_cause_id="C9", error_cause=None)
        srv.default("extract", lambda body: invented if f"what is {LABELS[0]}?" in str(body) else fine(body))
        summary = diagevo.diagnose(rnd, llm_url=srv.url, model="m", embedder=srv.url)
        assert (summary.failed, summary.failures) == (1, 3)
        assert list(summary.failure_reasons.values()) == [1]
        done = rnd.commit({"acc": 0.5})  # 1 of 3 is within the default share of 0.5
        assert done.failed_diagnoses_allowed is None


def test_commit_allow_failed_is_recorded_in_the_commit(tmp_path: Path) -> None:
    with LLMServer() as srv, diagevo.open_store(f"sqlite:///{tmp_path / 'a.db'}") as store:
        diagevo.start_run(store, "a", {"k": 1.0})
        rnd, _ = _round(store, "a", 1)
        srv.default("extract", SHORT)
        with pytest.raises(DiagnosesFailed):
            diagevo.diagnose(rnd, llm_url=srv.url, model="m", embedder=srv.url)
        done = rnd.commit({"acc": 0.5}, allow_failed=True)
        assert done.failed_diagnoses_allowed == 3
        assert commits(store, "a")[0]["failed_diagnoses_allowed"] == 3
        assert diagevo.verify_run(store, "a") == []


def test_a_share_of_one_still_stops_a_round_where_every_diagnosis_failed(tmp_path: Path) -> None:
    with LLMServer() as srv, diagevo.open_store(f"sqlite:///{tmp_path / 'o.db'}") as store:
        diagevo.start_run(store, "o", {"k": 1.0, "diagnosis": {"max_failed_share": 1.0}})
        rnd, _ = _round(store, "o", 1)
        srv.default("extract", SHORT)
        with pytest.raises(DiagnosesFailed, match="3 of 3 failures failed"):
            diagevo.diagnose(rnd, llm_url=srv.url, model="m", embedder=srv.url)
        with pytest.raises(ProtocolError, match="3 of 3 failures failed"):
            rnd.commit({"acc": 0.5})


# --- the CLI ------------------------------------------------------------------------------------


def test_cli_diagnose_with_a_wrong_reply_shape_exits_non_zero_naming_the_reason(
    capsys: pytest.CaptureFixture[str],
    srv: LLMServer,
    db: str,
    tmp_path: Path,
) -> None:
    srv.default("extract", SHORT)
    path = write(tmp_path, line("f1"), line("f2"))
    code, _out, err = cli(capsys, srv, db, path)
    assert_one_line_error(
        code,
        err,
        "2 of 2 failures failed to diagnose",
        "2 x extract: invalid reply after a re-ask: error_cause must be a 10-20 word phrase, got 2 words",
    )
    srv.default("extract", j(matched_cause_id=None, error_cause=None))  # the server fixed: non-skill slips
    code, out, err = cli(capsys, srv, db, path, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["retried"], summary["failed"], summary["non_skill"]) == (2, 0, 2)


def test_cli_round_commit_allow_failed_diagnoses(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with LLMServer() as srv, diagevo.open_store(url) as store:
        diagevo.start_run(store, "c", {"k": 1.0})
        rnd, _ = _round(store, "c", 1)
        srv.default("extract", SHORT)
        with pytest.raises(DiagnosesFailed):
            diagevo.diagnose(rnd, llm_url=srv.url, model="m", embedder=srv.url)
    code, _out, err = run_cli(capsys, "round", "commit", "--run", "c", "--round", "1", "--db", url)
    assert_one_line_error(code, err, "cannot commit round 1: 3 of 3 failures failed to diagnose")
    code, out, err = run_cli(
        capsys, "round", "commit", "--run", "c", "--round", "1", "--db", url, "--allow-failed-diagnoses"
    )
    assert code == 0, err
    assert "failed diagnoses allowed 3" in " ".join(out.split())


# --- hostile replies (issue 47, item 5) -----------------------------------------------------------


def _hostile_round(srv: LLMServer, store: Any, bad: Any) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    """Three failures, one of which (``evil``) gets ``bad`` for every request; returns the
    summary, its ``diagnosis.failed`` and its ``llm.called``."""
    rnd = seed(store, {"N1": (L1, [("C1", D1)])})

    def reply(body: dict[str, Any]) -> Any:
        return bad if "evil" in body["messages"][1]["content"] else j(matched_cause_id="C1", error_cause=None)

    srv.default("extract", reply)
    fs = [failure("f0", ("C1",), question="evil question"), failure("f1", ("C1",)), failure("f2", ("C1",))]
    s = run_round(srv, store, fs, rnd)
    ((_, failed),) = events(store, "diagnosis.failed")
    calls = [d for _, d in events(store, "llm.called") if d["failure_id"] == "f0"]
    assert (s.failed, s.recurrences, failed["failure_id"]) == (1, 2, "f0")  # the rest of the round diagnosed
    return s, failed, calls


def with_usage(content: str, usage: dict[str, Any]) -> Raw:
    """A chat completion of ``content`` whose ``usage`` is ``usage``, as the bytes sent."""
    body = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
    }
    return Raw(json.dumps({**body, "usage": usage}).encode())


def test_a_nul_in_a_reply_costs_that_failure_and_the_reply_is_kept(srv: LLMServer, store: Any) -> None:
    _s, failed, calls = _hostile_round(srv, store, j(matched_cause_id="C1", error_cause=None) + "\x00")
    assert failed["reason"] == "invalid reply after a re-ask: the reply contains a NUL character (U+0000)"
    assert calls[0]["raw"].endswith("}\ufffd") and calls[0]["violation"].startswith("the reply contains a NUL")


def test_an_escaped_nul_inside_the_json_costs_that_failure(srv: LLMServer, store: Any) -> None:
    bad = '{"matched_cause_id": null, "error_cause": "' + "word " * 11 + '\\u0000"}'
    _s, failed, calls = _hostile_round(srv, store, bad)
    assert "contains a NUL character" in failed["reason"] and calls[0]["raw"] == bad


def test_a_5000_digit_integer_costs_that_failure_with_a_reask(srv: LLMServer, store: Any) -> None:
    bad = 'the cause is {"matched_cause_id": ' + "7" * 5000 + ', "error_cause": null}'
    _s, failed, calls = _hostile_round(srv, store, bad)
    assert failed["reason"].startswith("invalid reply after a re-ask: the reply: Exceeds the limit (4300 digits)")
    assert len(calls) == 2 and calls[0]["raw"] == bad


@pytest.mark.parametrize(
    ("usage", "why"),
    [
        ({"prompt_tokens": 10**30}, "usage.prompt_tokens: not a whole number of tokens below 2**53: 1e+30"),
        ({"prompt_tokens": "12"}, "usage.prompt_tokens: not a whole number of tokens below 2**53: '12'"),
        ({"completion_tokens": -1}, "usage.completion_tokens: not a whole number of tokens below 2**53: -1"),
    ],
    ids=["giant", "string", "negative"],
)
def test_a_mistyped_usage_count_costs_that_failure_and_the_reply_is_kept(
    srv: LLMServer,
    store: Any,
    usage: dict[str, Any],
    why: str,
) -> None:
    content = j(matched_cause_id="C1", error_cause=None)
    _s, failed, calls = _hostile_round(srv, store, with_usage(content, usage))
    assert failed["reason"] == f"invalid reply after a re-ask: {why}"
    assert calls[0]["raw"] == content and calls[0]["prompt_tokens"] is None


def test_a_failed_merge_is_counted_apart_from_failed_diagnoses(srv: LLMServer, store: Any) -> None:
    """Issue 46, item 6: Prompt 4's bad reply is a merge failure, not a failure left undiagnosed."""
    rnd = seed(store, {"N1": (L1, [("C1", D1)]), "N2": (L2, [("C2", D2)])})
    srv.similar(L2, like=L1, cosine=0.6)
    srv.default("consolidate", "no JSON here")
    srv.default("extract", j(matched_cause_id="C1", error_cause=None))
    s = run_round(srv, store, [failure("f1", ("C1",))], rnd)
    assert (s.failed, s.merge_failed, s.recurrences, s.failure_reasons) == (0, 1, 1, {})
    ((_, failed),) = events(store, "diagnosis.failed")
    assert failed["failure_id"] is None and failed["stage"] == "consolidate"
