"""``diagevo eval`` with the local engine on the tiny solver (the hf backend's model pair, built on
this machine): MATH-500 as it is, the paper's solver prompt in the model's chat template, per-
question outputs and resuming."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from diagevo.catalog import CheckpointSelected, EvalRecorded
from diagevo.curriculum.prompts import SOLVER_SYSTEM  # noqa: E402
from diagevo.log import open_log
from tests.hf_fixtures import tiny_pair  # noqa: E402
from tests.logs import wire_event
from tests.test_cli_memory import run_cli  # noqa: E402
from tests.test_eval import SHARED  # noqa: E402

pytestmark = pytest.mark.slow
MATH500 = SHARED / "math500.jsonl"


@pytest.fixture(scope="session")
def tiny_dir(request: pytest.FixtureRequest) -> Path:
    return tiny_pair(request.config)


def test_the_tiny_solver_on_20_math500_questions(
    tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    solver = str(tiny_dir / "solver")
    args = [
        "eval",
        "--model",
        solver,
        "--bench",
        f"math500={MATH500}",
        "--limit",
        "20",
        "--out",
        str(tmp_path / "o"),
        "--json",
    ]
    started = time.perf_counter()
    code, out, err = run_cli(capsys, *args)
    wall = time.perf_counter() - started
    assert code == 0, err
    report = json.loads(out)
    assert report["engine"] == "local"
    (result,) = report["results"]
    assert (result["benchmark"], result["n"], result["resumed"]) == ("math500", 20, 0)
    assert 0 <= result["correct"] <= 20 and result["accuracy"] == result["correct"] / 20
    rows = [json.loads(line) for line in Path(result["outputs"]).read_text(encoding="utf-8").splitlines()]
    assert [r["index"] for r in rows] == list(range(20))
    problems = [json.loads(line)["problem"] for line in MATH500.read_text(encoding="utf-8").splitlines()[:20]]
    assert [r["question"] for r in rows] == problems
    assert sum(bool(r["correct"]) for r in rows) == result["correct"]
    assert sum(r["answer"] is None for r in rows) == result["unparsed"]
    # the paper's solver prompt, rendered with the tiny model's ChatML template
    for r in rows:
        assert r["prompt"] == (
            f"<|im_start|>system\n{SOLVER_SYSTEM}<|im_end|>\n<|im_start|>user\n{r['question']}<|im_end|>\n<|im_start|>assistant\n"
        )
    with capsys.disabled():
        print(f"\n20 MATH-500 questions, tiny solver, local engine: {wall:.1f} s, accuracy {result['accuracy']:.3f}")

    # a second run generates nothing: every question is read back from the outputs file
    lines = Path(result["outputs"]).read_text(encoding="utf-8")
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    (again,) = json.loads(out)["results"]
    assert again["resumed"] == 20 and again["correct"] == result["correct"]
    assert Path(result["outputs"]).read_text(encoding="utf-8") == lines

    # an interrupted run (the last 5 lines lost) generates those 5 only, greedily the same
    kept = lines.splitlines(keepends=True)
    Path(result["outputs"]).write_text("".join(kept[:15]), encoding="utf-8")
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    (resumed,) = json.loads(out)["results"]
    assert resumed["resumed"] == 15
    again_rows = [json.loads(line) for line in Path(result["outputs"]).read_text(encoding="utf-8").splitlines()]
    assert [r["response"] for r in again_rows] == [r["response"] for r in rows]


# --- a run of the hf backend ------------------------------------------------------------------


def hf_checkpoint_run(tiny_dir: Path, tmp: Path) -> tuple[str, Path]:
    """A two-round run of the hf backend, its log and checkpoints written as a training round
    writes them (``HFBackend.save`` under the loop's checkpoint directory, one
    ``checkpoint.written`` of phase ``solver`` per round), without the minutes of GRPO: the base
    solver is the tiny solver with every weight zeroed, round 1 keeps it, and round 2 holds the
    warmed-up tiny solver."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from diagevo.log.paths import run_dir
    from diagevo.rounds import start_run
    from diagevo.train.hf.backend import HFBackend
    from tests.test_hf_backend import tiny_config

    base = tmp / "zero-solver"
    model = AutoModelForCausalLM.from_pretrained(tiny_dir / "solver")
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    model.save_pretrained(base)
    AutoTokenizer.from_pretrained(tiny_dir / "solver").save_pretrained(base)

    db = f"sqlite:///{tmp / 'r.db'}"
    cfg = tiny_config(tiny_dir, tmp, f"solver.model={json.dumps(str(base))}")
    trained = AutoModelForCausalLM.from_pretrained(tiny_dir / "solver").state_dict()
    backend = HFBackend(cfg)
    with open_log(db, create=True) as store:
        run = "r"
        start_run(store, run, cfg)
        ckpt_dir = run_dir(Path(cfg.train.out_dir), run).resolve()  # where its trainer was told to write
        for t in (1, 2):
            if t == 2:
                backend.model("solver").load_state_dict(trained)
            path = ckpt_dir / f"round{t:03d}-solver"
            backend.save(path)
            store.append(
                [
                    wire_event("round.started", run, t, f"{run}/{t}/round.started"),
                    wire_event(
                        "checkpoint.written", run, t, f"{run}/{t}/checkpoint/solver", path=path.name, phase="solver"
                    ),
                    wire_event("round.committed", run, t, f"{run}/{t}/round.committed"),
                ]
            )
    return db, ckpt_dir


def test_eval_run_on_hf_checkpoints_and_select(
    tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from diagevo.train.hf import tiny

    db, ckpt_dir = hf_checkpoint_run(tiny_dir, tmp_path)
    base = ["eval", "--db", db, "--run", "r", "--out", str(tmp_path / "o"), "--max-new-tokens", "48", "--json"]
    base += ["--out-dir", str(ckpt_dir.parent)]  # the folder its trainer was given (train.out_dir)
    bench = ["--bench", f"math500={MATH500}", "--limit", "4"]
    code, out, err = run_cli(capsys, *base, *bench, "--rounds", "all")
    assert code == 0, err
    report = json.loads(out)
    models = [(r["round"], r["model"]) for r in report["results"]]
    assert models == [
        (0, str(tmp_path / "zero-solver")),
        (1, str(ckpt_dir / "round001-solver" / "solver")),
        (2, str(ckpt_dir / "round002-solver" / "solver")),
    ]
    with open_log(db) as store:
        evals = list(store.read("r", types=(EvalRecorded,)))
    assert [(e.round, e.event.benchmark, e.event.n, e.event.engine) for e in evals] == [
        (t, "math500", 4, "local") for t in (0, 1, 2)
    ]

    # validation: remainders (answers 0-8, the family a weak tiny solver gets right most often)
    # of the tiny solver's warm-up corpus
    pairs, _ = tiny.corpus(400, tiny_pair_seed(tiny_dir))
    val = tmp_path / "val.jsonl"
    rows = [
        {"question": p[-1]["content"], "answer": c.rsplit("\\boxed{", 1)[1].split("}")[0]}
        for p, c in pairs
        if p[0]["content"] == SOLVER_SYSTEM and "remainder" in p[-1]["content"]
    ]
    val.write_text("".join(json.dumps(q) + "\n" for q in rows[:24]), encoding="utf-8")
    code, out, err = run_cli(capsys, *base, "--bench", f"math500={MATH500}", "--limit", "24", "--select", str(val))
    assert code == 0, err
    report = json.loads(out)
    scores = {int(t): v["accuracy"] for t, v in report["validation"].items()}
    assert scores[0] == scores[1] == 0.0 < scores[2]  # a zeroed model answers nothing
    assert report["selected"] == 2 and [(r["round"], r["benchmark"]) for r in report["results"]] == [(2, "math500")]
    assert report["results"][0]["resumed"] == 4  # the first 4 were scored above already
    assert report["validation"]["2"]["n"] == 24
    with open_log(db) as store:
        (sel,) = store.read("r", types=(CheckpointSelected,))
        evals = list(store.read("r", types=(EvalRecorded,)))
    assert sel.round == 2 and sel.event.model == str(ckpt_dir / "round002-solver" / "solver")
    assert sel.event.scores == {str(t): s for t, s in scores.items()}
    assert sorted((e.round, e.event.benchmark, e.event.n) for e in evals) == [
        (0, "math500", 4),
        (0, "validation", 24),
        (1, "math500", 4),
        (1, "validation", 24),
        (2, "math500", 4),
        (2, "math500", 24),
        (2, "validation", 24),
    ]


def tiny_pair_seed(tiny_dir: Path) -> int:
    return int(json.loads((tiny_dir / "tiny.json").read_text(encoding="utf-8"))["seed"])
