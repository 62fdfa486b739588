"""``diagevo.verl`` without verl: the export's layout and its refusals, the two reward functions (the
challenger's against a loopback solver server, batched as verl's reward worker calls it), verl's
rollout dumps read back into failures, ``diagevo export verl`` and ``diagevo diagnose --from-verl``
through a whole round, and the example's simulated round trip. ``make verl-contracts``
(tests/verl_contracts.py) holds the same files and functions against verl itself."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import diagevo
from diagevo.curriculum import SOLVER_SYSTEM, challenger_messages, solver_messages
from diagevo.errors import BadInput, NotFound, Unavailable
from diagevo.generation import GenerationError
from diagevo.verl import challenger_score, compute_score, export_round, rollout_failures
from tests.llm_server import LLMServer
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.verl_contracts import CHALLENGER_OUTPUTS, CHALLENGER_REWARDS, QUESTIONS, solver_answers

ROOT = Path(__file__).resolve().parent.parent
RUN = "v"
SIZES = ["train.challenger_questions=6", "train.curriculum_questions=5", "grpo.construction_responses=4"]


def recorded_round(store: diagevo.Recorder, *, promote: bool = True) -> diagevo.Round:
    """Round 1 of ``v``: three questions retained (one text inside another), one not."""
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES), trainer="verl")
    rnd = diagevo.Round.open(store, RUN)
    reqs = rnd.requests(len(QUESTIONS) + 1)
    texts = [*QUESTIONS.items(), ("What is 1 / 0?", "")]
    candidates = [
        diagevo.Candidate(
            q.question_id,
            q.mode,
            text,
            q.active_cause,
            q.mastered_cause,
            q.node,
            responses=(*[f"\\boxed{{{label}}}"] * 9, "\\boxed{1001}", "\\boxed{1002}", "\\boxed{1003}")
            if label
            else tuple(f"\\boxed{{{k}}}" for k in range(12)),  # no majority: not retained
        )
        for q, (text, label) in zip(reqs, texts, strict=True)
    ]
    rnd.record(candidates)
    if promote:
        rnd.promote()
    return rnd


def retained(store: diagevo.Recorder) -> dict[str, tuple[str, str]]:
    """question id -> (text, pseudo-label) of the round's retained questions, from the log."""
    from diagevo.verl.dumps import retained_questions

    return {q.question_id: (q.text, q.pseudo_label) for q in retained_questions(store, RUN, 1).values()}


def test_the_verl_extra_forces_no_torch_and_pins_nothing() -> None:
    """``pip install "diagevo[verl]"`` takes verl from the version ``make verl-contracts`` checks
    (a lower bound, never an exact pin) and names no torch: verl's dependencies bring theirs."""
    import re
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower(): req for req in extra["verl"]}
    assert "verl" in names and "torch" not in names
    assert all(">=" in req and "==" not in req and "<" not in req for req in names.values()), names
    lowest = names["verl"].split(">=")[1]
    plan = subprocess.run(["make", "-n", "-B", "verl-contracts"], cwd=ROOT, capture_output=True, text=True, check=True)
    installs = [line for line in plan.stdout.splitlines() if "pip install" in line and "torch==" in line]
    assert len(installs) == 2 and f"verl=={lowest} " in installs[1], plan.stdout  # torch first, then held


# --- the export ---------------------------------------------------------------------------------


def test_the_export_is_the_round_in_verls_layout(store: diagevo.Recorder, tmp_path: Path) -> None:
    rnd = recorded_round(store)
    done = export_round(store, RUN, tmp_path / "r1")
    names = [f.name for f in done.files]
    assert done.open and done.round == 1 and names == ["solver.parquet", "challenger.parquet", "curriculum.parquet"]
    solver = pq.read_table(tmp_path / "r1" / "solver.parquet").to_pylist()
    assert [r["extra_info"]["question_id"] for r in solver] == list(retained(store)) and len(solver) == 3
    for i, r in enumerate(solver):
        text, label = retained(store)[r["extra_info"]["question_id"]]
        assert r["prompt"] == solver_messages(text) and r["reward_model"] == {"style": "rule", "ground_truth": label}
        assert r["extra_info"] == {"run": RUN, "round": 1, "question_id": r["extra_info"]["question_id"], "index": i}
        assert r["data_source"] == "diagevo/solver" and r["ability"] == "math"
    challenger = pq.read_table(tmp_path / "r1" / "challenger.parquet").to_pylist()
    reqs = rnd.requests(6, purpose="challenger")
    assert [r["prompt"] for r in challenger] == [challenger_messages(q.generation_request()) for q in reqs]
    info = challenger[0]["extra_info"]
    assert info["question_id"] == reqs[0].question_id and info["mode"] == reqs[0].mode
    assert (info["votes"], info["lam"], info["cluster_distance_threshold"], info["top_p"]) == (4, 1.0, 0.5, 0.99)
    curriculum = pq.read_table(tmp_path / "r1" / "curriculum.parquet").to_pylist()
    assert [r["extra_info"]["question_id"] for r in curriculum] == [q.question_id for q in rnd.requests(5)]
    # committed, the round has no requests to draw: its questions alone
    rnd.commit({})
    again = export_round(store, RUN, tmp_path / "r1")
    assert not again.open and [f.name for f in again.files] == ["solver.parquet"]


def test_before_any_question_only_the_requests_and_no_solver_file(store: diagevo.Recorder, tmp_path: Path) -> None:
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    diagevo.Round.open(store, RUN)
    done = export_round(store, RUN, tmp_path / "r1")
    assert [f.name for f in done.files] == ["challenger.parquet", "curriculum.parquet"]
    assert not (tmp_path / "r1" / "solver.parquet").exists()
    with pytest.raises(BadInput, match="neither committed nor open"):
        export_round(store, RUN, tmp_path / "r2", t=2)
    with pytest.raises(NotFound, match="no run 'w'"):
        export_round(store, "w", tmp_path / "r3")


def test_the_export_replaces_only_its_own_files(store: diagevo.Recorder, tmp_path: Path) -> None:
    recorded_round(store)
    out = tmp_path / "r1"
    out.mkdir()
    precious = out / "solver.parquet"
    precious.write_text("someone else's file\n", encoding="utf-8")
    with pytest.raises(BadInput, match="not written by diagevo's verl export"):
        export_round(store, RUN, out)
    assert precious.read_text(encoding="utf-8") == "someone else's file\n"
    assert sorted(p.name for p in out.iterdir()) == ["solver.parquet"]  # nothing else written either
    precious.unlink()
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"PAR1")
    precious.symlink_to(victim)
    with pytest.raises(BadInput, match="not written by"):
        export_round(store, RUN, out)
    assert victim.read_bytes() == b"PAR1" and precious.is_symlink()
    precious.unlink()
    first = export_round(store, RUN, out)
    assert export_round(store, RUN, out) == first  # its own files: replaced
    diagevo.Round.open(store, RUN).commit({})
    diagevo.Round.open(store, RUN)  # round 2: into round 1's directory, refused
    with pytest.raises(BadInput, match="holds round 1 of run 'v', not round 2"):
        export_round(store, RUN, out)


def test_without_pyarrow_the_export_says_what_to_install(
    store: diagevo.Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded_round(store)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(Unavailable, match="needs pyarrow"):
        export_round(store, RUN, tmp_path / "r1")
    db = f"sqlite:///{tmp_path / 'e.db'}"
    with diagevo.open_store(db) as other:
        recorded_round(other)
    code, _, err = run_cli(capsys, "export", "verl", "--run", RUN, "--db", db, "-o", str(tmp_path / "r1"))
    assert_one_line_error(code, err, "needs pyarrow", "pip install", "[data]")
    assert not (tmp_path / "r1").exists()


# --- the reward functions -----------------------------------------------------------------------


def test_compute_score_is_the_solver_reward_against_the_pseudo_label() -> None:
    info = {"question_id": "q1-00002", "run": RUN}
    assert compute_score("diagevo/solver", "so \\boxed{\\frac{1}{2}}", "0.5", info) == {
        "score": 1.0,
        "acc": 1.0,
        "question_id": "q1-00002",
    }
    assert compute_score("diagevo/solver", "so \\boxed{3}", "0.5", info)["score"] == -1.0
    assert compute_score("diagevo/solver", "no answer at all", "0.5", None) == {
        "score": -1.0,
        "acc": 0.0,
        "question_id": "",
    }


def settings(**kw: Any) -> dict[str, Any]:
    return {"votes": 4, "temperature": 1.0, "top_p": 0.99, "lam": 1.0, "cluster_distance_threshold": 0.5, **kw}


def scores(url: str, outputs: list[str], batch_size: int, **kw: Any) -> list[Any]:
    """The challenger reward of each output, the calls concurrent in one event loop (verl's worker)."""

    async def all_of() -> list[Any]:
        calls = [
            challenger_score(
                "diagevo/challenger",
                out,
                "",
                {**settings(), "question_id": f"c1-{i:05d}"},
                solver_url=url,
                solver_model="solver",
                batch_size=batch_size,
                **kw,
            )
            for i, out in enumerate(outputs)
        ]
        return await asyncio.gather(*calls, return_exceptions=True)

    return asyncio.run(all_of())


def test_the_challenger_reward_of_a_batch_by_hand() -> None:
    """Eq. 8-10 over one batch of B = 5: uncertainty from the served solver's N = 4 answers, the
    repetition penalty |C_k| / B of the BLEU clusters (a question twice), 0 without a question."""
    with LLMServer() as server:
        server.default("other", solver_answers)
        got = scores(server.url, CHALLENGER_OUTPUTS, len(CHALLENGER_OUTPUTS))
        asked = [c["body"] for c in server.calls("other")]
    assert [round(g["score"], 9) for g in got] == [round(x, 9) for x in CHALLENGER_REWARDS]
    assert [g["question_id"] for g in got] == [f"c1-{i:05d}" for i in range(5)]
    assert len(asked) == 4 and {m["content"] for b in asked for m in b["messages"]} >= {SOLVER_SYSTEM}
    assert all((b["n"], b["temperature"], b["top_p"], b["max_tokens"]) == (4, 1.0, 0.99, 1024) for b in asked)


def test_a_short_batch_is_scored_when_the_wait_is_over() -> None:
    """Two of a batch of 5 arrive: scored together after wait_s, B = 2 (a batch's last part)."""
    with LLMServer() as server:
        server.default("other", solver_answers)
        got = scores(server.url, CHALLENGER_OUTPUTS[2:4], 5, wait_s=0.2)
    assert [g["score"] for g in got] == [0.0, 0.0]  # one cluster of both: 1 - 2/2


def test_the_challenger_reward_refuses_what_it_cannot_score() -> None:
    with pytest.raises(BadInput, match="extra_info has no votes"):
        asyncio.run(
            challenger_score("s", "x", "", {}, solver_url="http://127.0.0.1:9/v1", solver_model="m", batch_size=1)
        )
    with pytest.raises(BadInput, match="batch_size must be"):
        asyncio.run(challenger_score("s", "x", "", settings(), solver_url="u", solver_model="m", batch_size=0))
    with LLMServer() as server:  # taken down: every waiting call gets the one-line error
        url = server.url
    got = scores(url, CHALLENGER_OUTPUTS[:2], 2)
    assert all(isinstance(g, GenerationError) and "connection refused" in str(g) for g in got), got


# --- rollout dumps back into failures -----------------------------------------------------------


def chat_text(question: str) -> str:
    """A solver prompt as verl's dump holds it: a ChatML template decoded without special tokens."""
    return "".join(f"{m['role']}\n{m['content']}\n" for m in solver_messages(question)) + "assistant\n"


def write_dump(folder: Path, step: int, lines: list[dict[str, Any]]) -> None:
    """A ``{step}.jsonl`` as verl's ``_write_generations`` writes it (its keys, in its order)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{step}.jsonl", "w") as f:
        for i, x in enumerate(lines):
            f.write(json.dumps({**x, "step": step, "uid": f"u{i}_0_{i}"}, ensure_ascii=False) + "\n")


def dump_lines(store: diagevo.Recorder, *, with_ids: bool = False) -> list[dict[str, Any]]:
    """A right and a wrong response to each retained question (the v1 trainer's lines; the legacy
    trainer's carry the question id compute_score returned)."""
    out = []
    for qid, (text, label) in retained(store).items():
        for response in (f"\\boxed{{{label}}}", f"it is \\boxed{{{label}0}}"):
            scored = compute_score("diagevo/solver", response, label, {"question_id": qid})
            line = {"input": chat_text(text), "output": response, "gts": label, "score": scored["score"]}
            out.append({**line, **({"question_id": qid, "acc": scored["acc"]} if with_ids else {})})
    return out


def test_a_dump_gives_the_wrong_responses_once(store: diagevo.Recorder, tmp_path: Path) -> None:
    rnd = recorded_round(store)
    dump = tmp_path / "rollouts"
    write_dump(dump, 1, dump_lines(store))
    write_dump(dump, 2, dump_lines(store, with_ids=True))
    (dump / "notes.txt").write_text("not a step\n")
    failures = rollout_failures(store, RUN, dump)
    want = [(qid, f"it is \\boxed{{{label}0}}") for qid, (_t, label) in retained(store).items()]
    assert [(f["question_id"], f["response"]) for f in failures] == want * 2
    assert [f["failure_id"] for f in failures[:3]] == [f"{qid}-s1-0" for qid in retained(store)]
    f = failures[0]
    assert (f["question"], f["pseudo_label"]) == retained(store)[f["question_id"]] and f["reference"] == "\\boxed{5}"
    assert rnd.record_failures(failures) == 6
    assert rollout_failures(store, RUN, dump) == failures and rnd.record_failures(failures) == 0


def test_a_dump_of_another_round_or_reward_is_refused_by_line(store: diagevo.Recorder, tmp_path: Path) -> None:
    recorded_round(store)
    lines = dump_lines(store)
    other = tmp_path / "other"
    write_dump(other, 3, [*lines[:2], {**lines[0], "input": chat_text("What is 40 + 2?")}])
    with pytest.raises(BadInput, match=r"3\.jsonl line 3: its prompt asks none of the round's retained questions"):
        rollout_failures(store, RUN, other)
    write_dump(other, 3, [{**lines[1], "score": 1.0}])
    with pytest.raises(BadInput, match="line 1: score 1, but the solver's reward .* is -1"):
        rollout_failures(store, RUN, other)
    write_dump(other, 3, [{**lines[1], "gts": "77"}])
    with pytest.raises(BadInput, match="ground truth '77' is not the pseudo-label"):
        rollout_failures(store, RUN, other)
    write_dump(other, 3, [{**lines[1], "question_id": "q9-00000"}])
    with pytest.raises(BadInput, match="'q9-00000' is not a retained question"):
        rollout_failures(store, RUN, other)
    write_dump(other, 3, [{"input": "x", "output": "y", "step": 3}])
    with pytest.raises(BadInput, match="line 1: score"):
        rollout_failures(store, RUN, other)
    with pytest.raises(NotFound, match="holds no rollout dump"):
        rollout_failures(store, RUN, tmp_path)
    with pytest.raises(NotFound, match="no directory"):
        rollout_failures(store, RUN, tmp_path / "missing")


def test_the_cap_of_failures_per_question_holds(store: diagevo.Recorder, tmp_path: Path) -> None:
    diagevo.start_run(store, RUN, diagevo.load_config(None, [*SIZES, "diagnosis.max_failures_per_question=1"]))
    rnd = diagevo.Round.open(store, RUN)
    [q] = rnd.requests(1)
    rnd.record(
        [diagevo.Candidate(q.question_id, q.mode, "What is 6 * 7?", responses=("\\boxed{42}",) * 3 + ("\\boxed{1}",))]
    )
    lines = [
        {"input": chat_text("What is 6 * 7?"), "output": f"\\boxed{{{k}}}", "gts": "42", "score": -1.0} for k in (1, 2)
    ]
    write_dump(tmp_path / "d", 1, lines)
    assert [f["response"] for f in rollout_failures(store, RUN, tmp_path / "d")] == ["\\boxed{1}"]


# --- the commands, a whole round ----------------------------------------------------------------


def test_export_then_diagnose_from_verl_then_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    with diagevo.open_store(db) as store:
        recorded_round(store)
    common = ("--run", RUN, "--db", db)
    code, out, err = run_cli(capsys, "export", "verl", *common, "-o", str(tmp_path / "r1"), "--json")
    assert code == 0, err
    assert [f["name"] for f in json.loads(out)["files"]] == [
        "solver.parquet",
        "challenger.parquet",
        "curriculum.parquet",
    ]
    with diagevo.open_store(db) as store:
        write_dump(tmp_path / "rollouts", 1, dump_lines(store))
    args = ("diagnose", "--from-verl", str(tmp_path / "rollouts"), *common, "--round", "1")
    code, out, err = run_cli(capsys, *args, "--diagnostician", "heuristic", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["failures"] == summary["recorded"] == 3 and summary["failed"] == 0
    code, out, err = run_cli(capsys, *args, "--diagnostician", "heuristic", "--json")  # the same dump again
    assert code == 0, err
    assert json.loads(out)["recorded"] == 0 and json.loads(out)["already_recorded"] == 3
    code, out, err = run_cli(capsys, "round", "commit", *common, "--json")
    assert code == 0, err
    assert json.loads(out)["failures"] == 3


def test_diagnose_takes_one_source_of_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ("--run", RUN, "--round", "1", "--diagnostician", "heuristic", "--db", f"sqlite:///{tmp_path / 'n.db'}")
    (tmp_path / "f.jsonl").write_text("{}\n")
    for given in ((), (str(tmp_path / "f.jsonl"), "--from-verl", str(tmp_path))):
        code, _, err = run_cli(capsys, "diagnose", *given, *common)
        assert_one_line_error(code, err, "a FAILURES.jsonl file, or verl's rollout dump with --from-verl")


@pytest.mark.slow
def test_the_example_round_trip_runs(tmp_path: Path) -> None:
    """examples/verl_round_trip.py: two rounds, each exported, trained (simulated), dumped, its
    failures read back, diagnosed and committed; the log verifies and names the trainer."""
    db = f"sqlite:///{tmp_path / 'x.db'}"
    args = ["--db", db, "--run", "x", "--out", str(tmp_path / "rounds"), "--rounds", "2"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "verl_round_trip.py"), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("round ") == 2
    assert sorted(p.name for p in (tmp_path / "rounds" / "round2" / "rollouts").iterdir())[:1] == ["1.jsonl"]
    with diagevo.open_store(db) as store:
        stats = diagevo.stats(store, "x").rounds
        assert [r["failures"] > 0 for r in stats] == [True, True]
        assert diagevo.verify_run(store, "x") == []
        [summary] = diagevo.runs(store)
        assert "verl" in summary.trainer
