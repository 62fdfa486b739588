"""The public API is enough for a whole round: ``import diagevo`` alone, from the store to the
commit, diagnosis included (from names: the heuristic, or an LLM endpoint on loopback), and a
fork that takes config changes."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import diagevo
from diagevo.catalog import FailureDiagnosed
from diagevo.rounds import OUR_TRAINER, run_config, run_trainer
from diagevo.views import queries
from tests.llm_server import LLMServer
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_diagnosis_pipeline import j
from tests.test_rounds import candidate, promote_on_a_question
from tests.test_train_outage import deduplicate

LABELS = ["12", "30", "8"]


def _round(store: diagevo.Recorder, run: str, t: int) -> tuple[diagevo.Round, list[dict[str, str]]]:
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
        assert done.failures == len(LABELS) and isinstance(done, diagevo.Committed)  # the round.committed event
        assert diagevo.stats(store, "p").rounds[0].failures == len(LABELS)
        cause = next(iter(diagevo.load_memory(store, "p").causes))
        story = diagevo.why(store, cause, "p")
        assert story.cause_id == cause and story.timeline[0].kind == "created" and story.more_attributions == 0
        assert diagevo.why(store, cause, "p", recent=1).timeline[0].kind == "created"
        [summary_row] = diagevo.runs(store)
        assert summary_row.run == "p"
        assert run_trainer(store, "p") == "my trainer"
        assert diagevo.verify_run(store, "p") == []


def test_diagnose_with_an_llm_endpoint_from_names(tmp_path: Path) -> None:
    """``diagevo.diagnose(rnd, llm_url=..., model=...)``: the paper's diagnostician on a real
    HTTP server on loopback serving it; the model name is the one given."""
    with LLMServer(models=("served-model",)) as srv, diagevo.open_store(f"sqlite:///{tmp_path / 'l.db'}") as store:
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
        srv.default("deduplicate", deduplicate)  # the same cause again: a duplicate of the first
        diagevo.start_run(store, "l", {"k": 1.0})
        rnd, failures = _round(store, "l", 1)
        summary = diagevo.diagnose(rnd, llm_url=srv.url, model="served-model", embedder=srv.url)
        assert summary.failures == len(failures) and summary.new_causes == 1
        assert (summary.duplicates, summary.failed) == (len(failures) - 1, 0)
        models = {e.event.model for e in store.read("l", types=(FailureDiagnosed,))}
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
    embedder = diagevo.make_embedder()  # the static vectors: computed again, never kept on disk
    dx = diagevo.heuristic_diagnostician(embedder)
    with diagevo.open_store(f"sqlite:///{tmp_path / 'c.db'}") as store:
        diagevo.start_run(store, "c", {"k": 1.0})
        rnd, _ = _round(store, "c", 1)
        assert diagevo.vector_index(store, "c", diagevo.make_embedder("local")).path == (
            tmp_path / "c.diagevo" / "index.lance"
        )
        index = diagevo.vector_index(store, "c", embedder)
        assert index.path is None
        summary = diagevo.diagnose(rnd, diagnostician=dx, embedder=embedder, index=index)
        assert summary.failures == len(LABELS)
    with pytest.raises(diagevo.BadInput, match="no diagnostician endpoint"):
        diagevo.llm_diagnostician()
    assert diagevo.llm_diagnostician(llm_url="http://127.0.0.1:9/v1", model="m").model_name == "m"


def test_the_public_api_is_small_and_every_name_is_used_by_an_example_or_a_guide() -> None:
    """At most 45 names besides the error classes a caller catches (each a DiagevoError), one way
    to open a store, no alias; each name is shown by an example (``examples/``) or a page of the
    guides as ``diagevo.NAME`` (the reference documents them all: ``docs/hooks.py`` renders one
    block per name)."""
    names = [n for n in diagevo.__all__ if not n.startswith("__")]
    errors = [n for n in names if isinstance(getattr(diagevo, n), type) and issubclass(getattr(diagevo, n), Exception)]
    assert all(issubclass(getattr(diagevo, n), diagevo.DiagevoError) for n in errors), errors
    assert len(names) - len(errors) <= 45, len(names) - len(errors)
    for gone in ("open_log", "EventStore", "open_round", "round_state", "RoundState", "recent_story", "memory_view"):
        assert gone not in names, gone
    root = Path(__file__).resolve().parent.parent
    texts = [p.read_text(encoding="utf-8") for p in (*(root / "examples").glob("*.py"), *(root / "docs").rglob("*.md"))]
    unused = [n for n in names if not any(f"diagevo.{n}" in t for t in texts)]
    assert unused == [], unused
    assert diagevo.Round(None, "r", 3).t == 3  # type: ignore[arg-type]


def test_the_names_a_type_checker_sees_are_the_names_diagevo_exports() -> None:
    """``diagevo/__init__.py`` holds its exports twice, as TRL's does: the table ``diagevo.NAME``
    loads from, and the imports a type checker reads. Both name each export from its module."""
    source = Path(diagevo.__file__).read_text(encoding="utf-8")
    [block] = [node for node in ast.parse(source).body if isinstance(node, ast.If)]
    imported = {a.name: node.module for node in block.body if isinstance(node, ast.ImportFrom) for a in node.names}
    assert imported == diagevo._EXPORTS
    assert "import ast" not in source  # the exports are a literal table, not read from the source
    assert diagevo.__all__ == sorted([*diagevo._EXPORTS, "__version__"])


# --- forks take config changes -------------------------------------------------------------------


def _external_run(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Run ``toy`` of an external trainer, round 1 committed with the heuristic (CLI alone)."""
    common = ("--run", "toy", "--db", db)
    code, _, err = run_cli(capsys, "round", "start", *common, "--set", "memory.k=1.0", "--trainer", "toy stack")
    assert code == 0, err
    with diagevo.open_store(db) as store:  # a question, for the promotions
        diagevo.Round(store, "toy", 1).record([candidate("own-1")])
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
        assert run_config(store, "toy-k2").memory.k == 2.0
        assert run_config(store, "toy").memory.k == 1.0
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
    assert_one_line_error(
        code, err, "run 'k3' is driven by 'toy stack', not by diagevo's own trainer", "round start --run k3"
    )
    with diagevo.open_store(db) as store:
        assert run_config(store, "k3").memory.k == 3.0
        fork = diagevo.fork_run(store, "toy", 1, "k4", ["memory.k=4.0"])
        assert (
            fork.configured and fork.run == "k4" and fork.source_round == 1 and run_config(store, "k4").memory.k == 4.0
        )
        with pytest.raises(diagevo.BadInput, match="memory.k"):
            diagevo.fork_run(store, "toy", 1, "bad", ["memory.k=-1"])
        assert "bad" not in store.runs()
    assert json.loads(run_cli(capsys, "memory", "verify", "--run", "k4", "--db", db, "--json")[1])


def test_runs_tell_apart_complete_open_interrupted_and_forked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    with diagevo.open_store(db) as store:
        for run, trainer, target in (("ours", OUR_TRAINER, 3), ("done", OUR_TRAINER, 1)):
            diagevo.start_run(store, run, {"k": 1.0, "train": {"rounds": target}}, trainer=trainer)
            rnd = diagevo.Round.open(store, run)
            promote_on_a_question(rnd)
            rnd.commit()
        diagevo.start_run(store, "ext", {"k": 1.0, "train": {"rounds": 1}}, trainer="verl script")
        rnd = diagevo.Round.open(store, "ext")
        promote_on_a_question(rnd)
        rnd.commit()
        diagevo.Round.open(store, "ext")  # round 2 open: waiting for its trainer
        diagevo.fork_run(store, "done", 1, "what-if")
        diagevo.fork_run(store, "done", 1, "went-on", ["train.rounds=2"])
        rnd = diagevo.Round.open(store, "went-on")
        promote_on_a_question(rnd)
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


def test_a_failures_jsonl_line_is_a_failure_for_record_failures(tmp_path: Path) -> None:
    """One failure format: the line `diagevo diagnose` reads (with ``question``, ``pseudo_label``,
    ``known_causes``) is taken by ``Round.record_failures`` as it is; its extra keys are checked
    for their type, and any other key is refused by name."""
    with diagevo.open_store(f"sqlite:///{tmp_path / 'f.db'}") as store:
        diagevo.start_run(store, "f", diagevo.Config())
        rnd, failures = _round(store, "f", 1)
        first = failures[0]
        line = {**first, "question": "what is 12?", "pseudo_label": "12", "known_causes": []}
        assert rnd.record_failures([json.loads(json.dumps(line))]) == 0  # recorded by _round: a retry
        with pytest.raises(diagevo.BadInput, match="unknown field 'known_cause'"):
            rnd.record_failures([{**first, "known_cause": ["C1"]}])
        with pytest.raises(diagevo.BadInput, match="known_causes must be a list of cause ids"):
            rnd.record_failures([{**first, "known_causes": "C1"}])
        with pytest.raises(diagevo.BadInput, match="pseudo_label must be a string"):
            rnd.record_failures([{**first, "pseudo_label": 12}])


def test_a_candidate_from_json_refuses_an_id_that_is_not_a_string() -> None:
    line = {"question_id": "q1", "mode": "targeted", "text": "what is 2 + 2?", "answers": ["4"]}
    assert diagevo.Candidate.from_json(line).active_cause is None
    with pytest.raises(diagevo.BadInput, match="active_cause must be a string or null"):
        diagevo.Candidate.from_json({**line, "active_cause": 3})


def test_typed_results_print_what_the_json_commands_print(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Attributes for Python; ``to_dict()`` is, key for key, the command's ``--json``."""
    db = f"sqlite:///{tmp_path / 't.db'}"
    with diagevo.open_store(db) as store:
        diagevo.start_run(store, "t", diagevo.Config())
        rnd, _ = _round(store, "t", 1)
        diagevo.diagnose(rnd, diagnostician="heuristic")
        done = rnd.commit({"acc": 0.5})
        stats, shown, plot = diagevo.stats(store, "t"), diagevo.show(store, "t"), queries.lifecycle(store, "t")
        m1 = queries.memory_at(store, 1, "t")
    assert (done.questions, done.failures) == (len(LABELS), len(LABELS))
    assert stats.run == "t" and stats.metrics == ["acc"] and stats.rounds[0].figures["acc"] == 0.5
    assert shown.open_round is None and m1.t == 1 and [c.cause_id for c in m1.causes] == ["C1"]
    assert m1.causes[0].node == m1.nodes[0].node_id and m1.nodes[0].causes == ("C1",)
    for result, command in (
        (stats, ("memory", "stats")),
        (shown, ("memory", "show")),
        (plot, ("memory", "plot")),
        (m1, ("memory", "replay", "--round", "1")),
    ):
        code, out, err = run_cli(capsys, *command, "--run", "t", "--db", db, "--json")
        assert code == 0, err
        assert json.loads(out) == json.loads(json.dumps(result.to_dict())), command
    with diagevo.open_store(db) as store:
        story = diagevo.why(store, "C1", "t")
    code, out, _ = run_cli(capsys, "memory", "why", "C1", "--run", "t", "--db", db, "--json")
    assert json.loads(out) == json.loads(json.dumps(story.to_dict()))
    assert story.attributions == len(LABELS) - 1  # three sign flips: the first creates C1, two recur on it


def test_a_round_row_has_the_statistics_fixed_columns_as_fields() -> None:
    """``RoundRow``'s fields are the statistics view's fixed columns, in their order: its JSON is
    the view's row, key for key."""
    from dataclasses import fields

    from diagevo.results.stats import RoundRow
    from diagevo.views.stats import COLUMNS

    assert tuple(f.name for f in fields(RoundRow))[:-1] == COLUMNS
    row = {**dict.fromkeys(COLUMNS, 1), "acc": 0.5, "ckpt_mb": 2.0}
    assert list(RoundRow.from_row(row).to_json().items()) == list(row.items())
