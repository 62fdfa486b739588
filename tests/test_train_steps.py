"""Each GRPO step of the hf backend in the log (``train.step``), on a real tiny-model run with TRL:
TRL's per-step row as TRL names it, numbered over the rounds per role, shown by ``memory stats
--steps`` and the report, kept by an export and ingest of the log, and mirrored to TensorBoard
(``--report-to tensorboard``), read back with TensorBoard's own event accumulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagevo.catalog import PhaseCompleted

pytest.importorskip("trl")

from tests.hf_fixtures import tiny_pair  # noqa: E402
from tests.test_cli_memory import run_cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    tiny = tiny_pair(request.config)
    tmp = tmp_path_factory.mktemp("steps")
    db = f"sqlite:///{tmp / 's.db'}"
    args = [
        "train",
        "--config",
        str(ROOT / "configs" / "tiny-hf.toml"),
        "--db",
        db,
        "--run",
        "s",
        "--rounds",
        "2",
        "--quiet",
        "--report-to",
        "tensorboard",
        "--set",
        f"challenger.model={json.dumps(str(tiny / 'challenger'))}",
        "--set",
        f"solver.model={json.dumps(str(tiny / 'solver'))}",
    ]
    import sys

    old = sys.argv
    sys.argv = ["diagevo", *args]
    try:
        from diagevo.cli.app import main

        with pytest.raises(SystemExit) as done:
            main()
    finally:
        sys.argv = old
    assert done.value.code in (0, None)
    return db, tmp


def test_each_grpo_step_is_logged_with_trls_row(tiny_run: tuple[str, Path], capsys: pytest.CaptureFixture) -> None:
    db, _ = tiny_run
    capsys.readouterr()
    code, out, err = run_cli(capsys, "memory", "stats", "--steps", "--json", "--db", db, "--run", "s")
    assert code == 0, err
    data = json.loads(out)
    rows = data["steps"]
    # configs/tiny-hf.toml: challenger 1 step, solver 2 steps a round; 2 rounds
    by_role = {r: [x for x in rows if x["role"] == r] for r in ("challenger", "solver")}
    assert [(x["round"], x["step"], x["global_step"]) for x in by_role["challenger"]] == [(1, 1, 1), (2, 1, 2)]
    assert [(x["round"], x["step"], x["global_step"]) for x in by_role["solver"]] == [
        (1, 1, 1),
        (1, 2, 2),
        (2, 1, 3),
        (2, 2, 4),
    ]
    for field in ("reward", "reward_std", "kl", "entropy", "completions/mean_length", "learning_rate", "grad_norm"):
        assert all(isinstance(x.get(field), float) for x in rows), field
    assert data["fields"][:2] == ["reward", "reward_std"]
    # the learning rate TRL logged is the configured one (tiny-hf: 1e-4, held constant)
    assert {x["learning_rate"] for x in rows} == {1e-4}
    # the solver's reward is the loop's +-1: a step's mean lies in [-1, 1]
    assert all(-1.0 <= x["reward"] <= 1.0 for x in by_role["solver"])
    # the phase's mean in phase.completed is the mean of its steps' rows
    from diagevo.log import open_log

    store = open_log(db)
    try:
        phase = [e for e in store.read("s", types=(PhaseCompleted,)) if e.event.phase == "solver"]
    finally:
        store.close()
    for e in phase:
        mine = [x["reward"] for x in by_role["solver"] if x["round"] == e.round]
        assert e.event.stats["reward"] == pytest.approx(sum(mine) / len(mine))
    code, out, err = run_cli(capsys, "memory", "stats", "--steps", "--db", db, "--run", "s")
    assert code == 0 and "GRPO steps" in out and "challenger" in out and "reward" in out, err


def test_the_report_draws_the_steps_and_an_ingested_copy_keeps_them(
    tiny_run: tuple[str, Path], capsys: pytest.CaptureFixture
) -> None:
    db, tmp = tiny_run
    capsys.readouterr()
    code, _, err = run_cli(capsys, "report", "--db", db, "--run", "s", "-o", str(tmp / "r.html"))
    assert code == 0, err
    html = (tmp / "r.html").read_text(encoding="utf-8")
    assert 'data-chart="steps"' in html and "grad_norm" in html
    code, _, err = run_cli(capsys, "memory", "export", "--db", db, "--run", "s", "-o", str(tmp / "s.jsonl"))
    assert code == 0, err
    copy = f"sqlite:///{tmp / 'copy.db'}"
    code, _, err = run_cli(capsys, "memory", "ingest", str(tmp / "s.jsonl"), "--db", copy)
    assert code == 0, err
    _, a, _ = run_cli(capsys, "memory", "stats", "--steps", "--json", "--db", db, "--run", "s")
    _, b, _ = run_cli(capsys, "memory", "stats", "--steps", "--json", "--db", copy, "--run", "s")
    assert json.loads(a)["steps"] == json.loads(b)["steps"] and json.loads(a)["steps"]


def test_tensorboard_holds_the_step_and_round_series(tiny_run: tuple[str, Path], capsys: pytest.CaptureFixture) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    db, tmp = tiny_run
    capsys.readouterr()
    steps = json.loads(run_cli(capsys, "memory", "stats", "--steps", "--json", "--db", db, "--run", "s")[1])["steps"]
    rounds = json.loads(run_cli(capsys, "memory", "stats", "--json", "--db", db, "--run", "s")[1])["rounds"]
    board = EventAccumulator(str(tmp / "s.diagevo" / "tb" / "s"))  # in the database's folder, a folder per run
    board.Reload()
    tags = set(board.Tags()["scalars"])
    for role in ("challenger", "solver"):
        for field in ("reward", "reward_std", "kl", "entropy", "completions/mean_length", "grad_norm"):
            series = [(e.step, e.value) for e in board.Scalars(f"{role}/{field}")]
            logged = [(x["global_step"], x[field]) for x in steps if x["role"] == role]
            assert [s for s, _ in series] == [s for s, _ in logged], (role, field)
            assert [v for _, v in series] == pytest.approx([v for _, v in logged], rel=1e-6)
    for name in ("active", "mastered", "F", "epsilon_next", "retained", "heldout_acc"):
        assert f"round/{name}" in tags, name
        series = [(e.step, e.value) for e in board.Scalars(f"round/{name}")]
        assert series == [(r["round"], pytest.approx(r[name], rel=1e-6)) for r in rounds], name
    # TRL's own rows of each phase, under TRL's names, in a folder of their own
    trl = EventAccumulator(str(tmp / "s.diagevo" / "tb" / "s" / "trl" / "round002-solver"))
    trl.Reload()
    mine = [x for x in steps if x["role"] == "solver" and x["round"] == 2]
    assert [e.value for e in trl.Scalars("train/reward")] == pytest.approx([x["reward"] for x in mine], rel=1e-6)
