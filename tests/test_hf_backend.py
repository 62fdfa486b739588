"""The hf backend on a tiny local model pair: a real round of the loop on the CPU (TRL GRPO,
local engine, offline heuristic or loopback-endpoint diagnostician), checkpoints and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from diagevo.catalog import (
    CauseCreated,
    CheckpointWritten,
    EvalRecorded,
    PhaseCompleted,
    QuestionScored,
    RoundCommitted,
    of_type,
)
from diagevo.curriculum.prompts import solver_messages  # noqa: E402
from diagevo.diagnosis.heuristic import MODEL as HEURISTIC  # noqa: E402
from diagevo.errors import NotFound
from diagevo.generation import Sampling, make_engine  # noqa: E402
from diagevo.log import open_log
from diagevo.train.config import load_config  # noqa: E402
from diagevo.train.hf.backend import HFBackend  # noqa: E402
from diagevo.train.run import TrainOptions, train  # noqa: E402
from diagevo.views.checkpoints import checkpoint_path
from tests.hf_fixtures import tiny_pair  # noqa: E402
from tests.llm_server import LLMServer  # noqa: E402
from tests.logs import phase_figures  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def tiny_dir(request: pytest.FixtureRequest) -> Path:
    return tiny_pair(request.config)


def tiny_config(tiny_dir: Path, tmp: Path, *extra: str):  # noqa: ANN201
    return load_config(
        ROOT / "configs" / "tiny-hf.toml",
        [
            f"solver.model={json.dumps(str(tiny_dir / 'solver'))}",
            f"challenger.model={json.dumps(str(tiny_dir / 'challenger'))}",
            f"train.out_dir={json.dumps(str(tmp / 'ckpt'))}",
            'train.run="r"',
            *extra,
        ],
    )


@pytest.fixture(scope="module")
def tiny_round(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    tmp = tmp_path_factory.mktemp("hf-round")
    cfg = tiny_config(tiny_dir, tmp)
    url = f"sqlite:///{tmp / 'x.db'}"
    store = open_log(url, create=True)
    backend = HFBackend(cfg)
    run, reports = train(cfg, store, TrainOptions(backend=backend))
    yield cfg, store, run, reports, backend, tmp
    store.close()


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


def test_local_engine_is_seeded_and_batched(tiny_dir: Path) -> None:
    engine = make_engine("local", str(tiny_dir / "solver"), batch_size=2)
    prompts = [solver_messages(f"What is {a} + 7?") for a in (3, 12, 25)]
    s = Sampling(n=3, temperature=1.0, max_new_tokens=24, seed=5)
    first = engine.generate(prompts, s)
    assert [len(o) for o in first] == [3, 3, 3]
    assert engine.generate(prompts, s) == first
    assert engine.generate(prompts, Sampling(n=3, temperature=1.0, max_new_tokens=24, seed=6)) != first
    greedy = engine.generate(prompts[:1], Sampling(n=1, temperature=0.0, max_new_tokens=24))
    assert "\\boxed{" in greedy[0][0] or "Step" in greedy[0][0]


def test_a_hub_id_is_one_line_no_network() -> None:
    with pytest.raises(ValueError, match="no network: pass a local model directory"):
        make_engine("local", "Qwen/Qwen3-4B-Base")


def test_a_tiny_round_runs_the_whole_loop(tiny_round) -> None:  # noqa: ANN001
    cfg, store, run, reports, backend, tmp = tiny_round
    (report,) = reports
    events = list(store.read(run, texts=True))
    phases = {p.phase: phase_figures(p) for p in of_type(PhaseCompleted, events)}
    assert set(phases) == {"challenger", "construct", "solver", "diagnose"}
    for phase in ("challenger", "solver"):
        for key in ("loss", "kl", "reward", "completion_length"):
            assert key in phases[phase], (phase, key)
        assert phases[phase]["steps"] >= 1
    assert report.stats.questions > 0 and report.stats.retained > 0
    assert report.stats.failures > 0
    diagnosed = [e for e in events if e.type == "failure.diagnosed"]
    assert diagnosed and all((e.event.model or HEURISTIC) == HEURISTIC for e in diagnosed)
    assert any(e.type == "cause.created" for e in events)
    assert "heldout_acc" in report.metrics


def test_a_labelled_probe_gives_real_models_the_paper_s_label_measure(
    tiny_round, tiny_dir: Path, tmp_path: Path
) -> None:  # noqa: ANN001
    """``hf.label_probe``: a round of real models whose world knows no answers records Figure
    3(c)'s ``pseudo_label_acc`` on the probe (the solver's majority of 12 against its answers),
    shown by ``memory stats``; without one the figure is absent, not zero."""
    cfg, store, run, reports, backend, tmp = tiny_round
    assert "pseudo_label_acc" not in reports[0].metrics
    assert all(r.pseudo_label_acc is None for r in store_commits(store, run))
    probe = tmp_path / "probe.jsonl"
    probe.write_text(
        "".join(json.dumps({"question": f"What is {a} + 7?", "answer": str(a + 7)}) + "\n" for a in range(5))
    )
    cfg = tiny_config(tiny_dir, tmp_path, f"hf.label_probe={json.dumps(str(probe))}")
    with open_log(f"sqlite:///{tmp_path / 'p.db'}", create=True) as probed:
        run, (report,) = train(cfg, probed, TrainOptions(backend=HFBackend(cfg)))
        (commit,) = store_commits(probed, run)
    assert 0.0 <= report.metrics["pseudo_label_acc"] <= 1.0
    assert commit.pseudo_label_acc == report.metrics["pseudo_label_acc"]
    missing = tiny_config(tiny_dir, tmp_path, f"hf.label_probe={json.dumps(str(tmp_path / 'none.jsonl'))}")
    with pytest.raises(NotFound, match="no label probe at .*none.jsonl"):
        HFBackend(missing)


def store_commits(store, run: str) -> list:  # noqa: ANN001
    return [e.event for e in store.read(run, types=(RoundCommitted,))]


def test_the_solver_phase_changes_the_weights(tiny_round, tiny_dir: Path) -> None:  # noqa: ANN001
    cfg, store, run, reports, backend, tmp = tiny_round
    ckpts = {
        e.event.phase: checkpoint_path(store, run, e.event.path, cfg.train.out_dir)
        for e in store.read(run, types=(CheckpointWritten,))
    }
    base = weights(tiny_dir / "solver")
    after = weights(ckpts["solver"] / "solver")
    changed = [k for k in base if not torch.equal(base[k], after[k])]
    assert len(changed) >= len(base) // 2
    assert (ckpts["solver"] / "challenger" / "config.json").is_file()
    assert (ckpts["solver"] / "solver" / "tokenizer.json").is_file()


def test_load_reloads_a_checkpoint(tiny_round, tiny_dir: Path) -> None:  # noqa: ANN001
    cfg, store, run, reports, backend, tmp = tiny_round
    ckpts = {
        e.event.phase: checkpoint_path(store, run, e.event.path, cfg.train.out_dir)
        for e in store.read(run, types=(CheckpointWritten,))
    }
    fresh = HFBackend(cfg)
    fresh.load(ckpts["solver"])
    saved = weights(ckpts["solver"] / "solver")
    loaded = dict(fresh.model("solver").state_dict())
    assert all(torch.equal(loaded[k], v) for k, v in saved.items() if k in loaded)
    with pytest.raises(ValueError, match="not an hf checkpoint"):
        fresh.load(tmp)


def test_a_resumed_round_with_the_endpoint_diagnostician(tiny_dir: Path, tmp_path: Path) -> None:
    cause = "Adds the two numbers correctly but then writes a different value in the final box"
    label = "Keeping intermediate arithmetic results consistent through to the final boxed answer"
    with LLMServer(models=("Qwen/Qwen3-4B-Instruct-2507",)) as server:  # the model tiny-hf.toml names
        server.default("extract", json.dumps({"matched_cause_id": None, "error_cause": cause}))
        server.default("deduplicate", json.dumps({"duplicate": False, "matched_cause_id": None}))
        server.default(
            "assign_node", json.dumps({"create_new_node": True, "new_node_label": label, "assigned_node": None})
        )
        server.default("consolidate", json.dumps({"merge": False, "merged_label": None}))
        cfg = tiny_config(
            tiny_dir,
            tmp_path,
            f"diagnosis.llm_url={json.dumps(server.url)}",
            "memory.challenger_updates=false",
            "train.curriculum_questions=4",
        )
        store = open_log(f"sqlite:///{tmp_path / 'y.db'}", create=True)
        try:
            # cut the round short in the solver phase; the resumed process reloads the checkpoint
            crashing = HFBackend(cfg)

            def crash(*_a: object, **_k: object) -> None:
                raise KeyboardInterrupt

            crashing.train_solver = crash  # type: ignore[method-assign]
            with pytest.raises(KeyboardInterrupt):
                train(cfg, store, TrainOptions(backend=crashing))
            written = store.read("r", types=(CheckpointWritten,))
            (ckpt,) = [checkpoint_path(store, "r", e.event.path, cfg.train.out_dir) for e in written]
            resumed = HFBackend(cfg)
            run, (report,) = train(cfg, store, TrainOptions(resume=True, backend=resumed))
            assert resumed.sources["solver"] == ckpt / "solver"
            assert resumed.sources["challenger"] == ckpt / "challenger"
            texts = [e.event.description for e in store.read(run, texts=True, types=(CauseCreated,))]
        finally:
            store.close()
        assert server.calls("extract"), "no failure reached the endpoint"
    assert report.stats.failures > 0
    assert cause in texts


def test_eval_run_scores_each_rounds_solver(tiny_round, tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """``diagevo eval --run`` finds the solver this round saved, and the base model as round 0."""
    from tests.test_cli_memory import run_cli
    from tests.test_eval_local import MATH500

    cfg, store, run, reports, backend, tmp = tiny_round
    (solver_ckpt,) = [
        checkpoint_path(store, run, e.event.path, cfg.train.out_dir)
        for e in store.read(run, types=(CheckpointWritten,))
        if e.event.phase == "solver"
    ]
    code, out, err = run_cli(
        capsys,
        "eval",
        "--db",
        store.url,
        "--run",
        run,
        "--bench",
        f"math500={MATH500}",
        "--limit",
        "3",
        "--max-new-tokens",
        "32",
        "--out",
        str(tmp / "eval"),
        "--out-dir",  # where the run's checkpoints lie: the folder its trainer was given
        str(cfg.train.out_dir),
        "--json",
    )
    assert code == 0, err
    results = json.loads(out)["results"]
    assert [(r["round"], r["model"], r["n"]) for r in results] == [
        (0, str(tiny_dir / "solver"), 3),
        (1, str(solver_ckpt / "solver"), 3),
    ]
    evals = [
        e for e in store.read(run, types=(EvalRecorded,)) if e.event.benchmark is not None
    ]  # not the loop's held-out metrics
    assert [(e.round, e.event.benchmark, e.event.model) for e in evals] == [
        (r["round"], "math500", r["model"]) for r in results
    ]


def test_on_real_models_the_challenger_writes_the_rewordings_of_a_round(tiny_dir: Path, tmp_path: Path) -> None:
    """A round of the tiny pair with the shared-error check: the challenger's [reword] samples,
    parsed as its questions are, give the check its evidence, and every labelled question's verdict
    is in ``question.scored`` (a rewording the tiny challenger could not write leaves the check
    abstaining on its question)."""
    import random

    cfg = tiny_config(tiny_dir, tmp_path, 'filter.shared_error_check="variants"', "filter.check_variants=2")
    backend = HFBackend(cfg)
    asked = ["What is 3 + 7?", "A train travels 60 km in 1.5 hours. What is its speed?"]
    got = backend.rewordings(asked, 2, random.Random(0))
    assert len(got) == 2 and all(len(r) <= 2 for r in got)
    assert all(isinstance(t, str) and t.strip() and t.strip() != q for q, r in zip(asked, got) for t in r)
    assert got == HFBackend(cfg).rewordings(asked, 2, random.Random(0))  # seeded as every sample
    with open_log(f"sqlite:///{tmp_path / 'c.db'}", create=True) as store:
        run, _ = train(cfg, store, TrainOptions(backend=backend, rounds=1))
        scored = [e.event for e in store.read(run, types=(QuestionScored,))]
    assert scored
    checked = [s for s in scored if s.check_score is not None]
    assert all(s.variant_labels is not None and 1 <= len(s.variant_labels) <= 2 for s in checked)
