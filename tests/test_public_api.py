"""The public API is enough for a whole round: ``import diagevo`` alone, from the store to the
commit, diagnosis included (from names: the heuristic, or an LLM endpoint on loopback), and a
fork that takes config changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import diagevo
from diagevo.catalog import FailureDiagnosed
from tests.llm_server import LLMServer
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_diagnosis_pipeline import j

LABELS = ["12", "30", "8"]


def _round(store: diagevo.EventStore, run: str, t: int) -> tuple[diagevo.Round, list[dict[str, str]]]:
    """Round ``t`` of ``run`` through the public API up to its failures: requests (with the
    challenger prompt), candidates with construction responses, promotions, the solver's failed
    responses by ``diagevo.solver_rewards``. Returns the round and its failures."""
    rnd = diagevo.Round.open(store, run)
    assert rnd.t == t
    reqs = rnd.requests(len(LABELS))
    assert all(q.messages()[0]["role"] == "system" for q in reqs)
    candidates = [
        diagevo.Candidate(
            q.question_id,
            q.mode,
            f"question {t}.{i}: what is {label}?",
            q.active_cause,
            q.mastered_cause,
            q.node,
            responses=tuple([f"so it is \\boxed{{{label}}}"] * 9 + ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}"]),
        )
        for i, (q, label) in enumerate(zip(reqs, LABELS, strict=True))
    ]
    scored = rnd.record(candidates)
    assert isinstance(scored, diagevo.Recorded) and scored.new == len(LABELS)
    rnd.promote()
    failures = []
    for s in scored:
        responses = [f"so it is \\boxed{{-{s.pseudo_label}}}", f"\\boxed{{{s.pseudo_label}}}"]
        for k, (resp, reward) in enumerate(zip(responses, diagevo.solver_rewards(responses, s.pseudo_label))):
            if reward < 0:
                failures.append(
                    {"failure_id": f"f{t}-{s.question_id}-{k}", "question_id": s.question_id, "response": resp}
                    | {"reference": s.reference}
                )
    assert len(failures) == len(LABELS)
    assert rnd.record_failures(failures) == len(LABELS)
    return rnd, failures


def test_a_whole_round_with_the_heuristic_from_import_diagevo_alone(tmp_path: Path) -> None:
    with diagevo.open_store(f"sqlite:///{tmp_path / 'p.db'}") as store:
        diagevo.start_run(store, "p", diagevo.Config(), trainer="my trainer")
        rnd, _ = _round(store, "p", 1)
        summary = diagevo.diagnose(rnd, diagnostician="heuristic")  # the local embedder by default
        assert summary.failures == len(LABELS) and summary.new_causes >= 1 and summary.failed == 0
        done = rnd.commit({"acc": 0.5})
        assert done["failures"] == len(LABELS)
        assert diagevo.stats(store, "p")["rounds"][0]["failures"] == len(LABELS)
        cause = next(iter(diagevo.load_memory(store, "p").causes))
        assert diagevo.why(store, cause, "p")["timeline"][0]["kind"] == "created"
        assert diagevo.recent_story(store, "p", cause)["timeline"][0]["kind"] == "created"
        [summary_row] = diagevo.runs(store)
        assert summary_row.run == "p"
        assert diagevo.run_trainer(store, "p") == "my trainer"
        assert diagevo.verify_run(store, "p") == []


def test_diagnose_with_an_llm_endpoint_from_names(tmp_path: Path) -> None:
    """``diagevo.diagnose(rnd, llm_url=..., model=...)``: the paper's diagnostician on a real
    HTTP server on loopback; the model name is the one given."""
    with LLMServer() as srv, diagevo.open_store(f"sqlite:///{tmp_path / 'l.db'}") as store:
        srv.default("extract", j(matched_cause_id=None, error_cause="flips the sign of the final answer at the end"))
        srv.default(
            "assign_node",
            j(
                create_new_node=True,
                new_node_label="keeping track of signs when solving equations and simplifying algebraic expressions "
                "step by step",
                assigned_node=None,
            ),
        )
        diagevo.start_run(store, "l", {"k": 1.0})
        rnd, failures = _round(store, "l", 1)
        summary = diagevo.diagnose(rnd, llm_url=srv.url, model="served-model", embedder=srv.url)
        assert summary.failures == len(failures) and summary.new_causes == 1 and summary.duplicates == 0
        models = {e.data["model"] for e in store.read("l", types=(FailureDiagnosed,))}
        assert models == {"served-model"}
        rnd.commit({"acc": 0.25})


def test_diagnose_needs_an_endpoint_or_the_heuristic(tmp_path: Path) -> None:
    with diagevo.open_store(f"sqlite:///{tmp_path / 'n.db'}") as store:
        diagevo.start_run(store, "n", {"k": 1.0})
        rnd, _ = _round(store, "n", 1)
        n = len(list(store.read("n")))
        with pytest.raises(diagevo.BadInput, match="no diagnostician endpoint: give llm_url"):
            diagevo.diagnose(rnd)
        with pytest.raises(diagevo.BadInput, match="diagnostician 'oracle': use 'llm'"):
            diagevo.diagnose(rnd, diagnostician="oracle")
        assert len(list(store.read("n"))) == n


def test_the_constructors_build_what_diagnose_takes(tmp_path: Path) -> None:
    embedder = diagevo.make_embedder()
    dx = diagevo.heuristic_diagnostician(embedder)
    with diagevo.open_store(f"sqlite:///{tmp_path / 'c.db'}") as store:
        diagevo.start_run(store, "c", {"k": 1.0})
        rnd, _ = _round(store, "c", 1)
        index = diagevo.vector_index(store, "c", embedder)
        assert index.path == tmp_path / "c.diagevo" / "index.lance"
        summary = diagevo.diagnose(rnd, diagnostician=dx, embedder=embedder, index=index)
        assert summary.failures == len(LABELS)
    with pytest.raises(diagevo.BadInput, match="no diagnostician endpoint"):
        diagevo.llm_diagnostician()
    assert diagevo.llm_diagnostician(llm_url="http://127.0.0.1:9/v1", model="m").model_name == "m"


def test_every_name_the_reference_mentions_is_exported() -> None:
    for name in ("open_log", "Recorded", "RunExists", "MemoryMoved", "StoredEvent", "Round", "diagnose"):
        assert name in diagevo.__all__ and getattr(diagevo, name) is not None
    for name in ("extract_answer", "agrees", "votes", "solver_rewards", "challenger_rewards", "solver_messages"):
        assert callable(getattr(diagevo, name))
    assert diagevo.Round(None, "r", 3).t == 3  # type: ignore[arg-type]


# --- forks take config changes -------------------------------------------------------------------


def _external_run(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Run ``toy`` of an external trainer, round 1 committed with the heuristic (CLI alone)."""
    common = ("--run", "toy", "--db", db)
    code, _, err = run_cli(capsys, "round", "start", *common, "--set", "memory.k=1.0", "--trainer", "toy stack")
    assert code == 0, err
    assert run_cli(capsys, "round", "promote", *common)[0] == 0
    code, _, err = run_cli(capsys, "round", "commit", *common, "--metric", "acc=0.5")
    assert code == 0, err


def test_a_fork_of_an_external_run_takes_config_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'f.db'}"
    _external_run(db, capsys)
    code, out, err = run_cli(capsys, "memory", "fork", "--run", "toy", "--round", "1", "--to", "toy-k2", "--db", db)
    assert code == 0, err
    said = " ".join(out.split())
    assert "its trainer (toy stack), through the round protocol" in said and "round start --run toy-k2" in said
    assert "train" not in said.split("continue with:")[1].split()[:2]
    code, _, err = run_cli(capsys, "round", "start", "--run", "toy-k2", "--db", db, "--set", "memory.k=2.0")
    assert code == 0, err  # before its first round of its own
    with diagevo.open_store(db) as store:
        assert diagevo.run_config(store, "toy-k2").memory.k == 2.0
        assert diagevo.run_config(store, "toy").memory.k == 1.0
        assert diagevo.Round.current(store, "toy-k2").base.k == 2.0
    code, _, err = run_cli(capsys, "round", "start", "--run", "toy-k2", "--db", db, "--set", "memory.k=3.0")
    assert_one_line_error(code, err, "run 'toy-k2' has rounds of its own: its config is fixed")
    code, _, err = run_cli(capsys, "round", "start", "--run", "toy", "--db", db, "--set", "memory.k=3.0")
    assert_one_line_error(code, err, "run 'toy' exists: its config is fixed")
    code, out, err = run_cli(
        capsys, "memory", "fork", "--run", "toy", "--round", "1", "--to", "k3", "--set", "memory.k=3.0", "--db", db
    )
    assert code == 0, err
    code, _, err = run_cli(capsys, "train", "--run", "k3", "--resume", "--db", db, "--quiet")
    assert_one_line_error(code, err, "run 'k3' is driven by 'toy stack', not by diagevo train", "round start --run k3")
    with diagevo.open_store(db) as store:
        assert diagevo.run_config(store, "k3").memory.k == 3.0
        fork: Any = diagevo.fork_run(store, "toy", 1, "k4", ["memory.k=4.0"])
        assert fork["configured"] and diagevo.run_config(store, "k4").memory.k == 4.0
        with pytest.raises(diagevo.BadInput, match="memory.k"):
            diagevo.fork_run(store, "toy", 1, "bad", ["memory.k=-1"])
        assert "bad" not in store.runs()
    assert json.loads(run_cli(capsys, "memory", "verify", "--run", "k4", "--db", db, "--json")[1])


def test_runs_tell_apart_complete_open_interrupted_and_forked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    with diagevo.open_store(db) as store:
        for run, trainer, target in (("ours", diagevo.OUR_TRAINER, 3), ("done", diagevo.OUR_TRAINER, 1)):
            diagevo.start_run(store, run, {"k": 1.0, "train": {"rounds": target}}, trainer=trainer)
            rnd = diagevo.Round.open(store, run)
            rnd.promote()
            rnd.commit()
        diagevo.start_run(store, "ext", {"k": 1.0, "train": {"rounds": 1}}, trainer="verl script")
        rnd = diagevo.Round.open(store, "ext")
        rnd.promote()
        rnd.commit()
        diagevo.Round.open(store, "ext")  # round 2 open: waiting for its trainer
        diagevo.fork_run(store, "done", 1, "what-if")
        diagevo.fork_run(store, "done", 1, "went-on", ["train.rounds=2"])
        rnd = diagevo.Round.open(store, "went-on")
        rnd.promote()
        rnd.commit()
        got = {r.run: (r.status, r.trainer) for r in diagevo.runs(store)}
    assert got == {
        "ours": ("interrupted", "diagevo train"),
        "done": ("complete", "diagevo train"),
        "ext": ("open round 2", "verl script"),
        "what-if": ("forked", "diagevo train"),
        "went-on": ("complete", "diagevo train"),
    }
    code, out, err = run_cli(capsys, "runs", "--db", db)
    assert code == 0, err
    assert "verl script" in out and "open round 2" in out and "forked" in out
