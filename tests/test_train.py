"""``diagevo train`` end to end on the simulator: CLI, replay/why/verify on its log, determinism,
and a SIGKILL in the middle of round 2's diagnosis followed by ``--resume``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from diagevo.catalog import CauseCreated, FailureAttributed, FailureDiagnosed, RoundCommitted
from diagevo.log import open_log
from tests.test_cli_memory import run_cli

pytestmark = pytest.mark.slow

SMALL = [
    "--set",
    "train.challenger_questions=16",
    "--set",
    "train.curriculum_questions=48",
]
ROOT = Path(__file__).resolve().parent.parent


def small_args(db: str, run: str, rounds: int, tmp: Path) -> list[str]:
    return [
        "train",
        "--db",
        db,
        "--run",
        run,
        "--rounds",
        str(rounds),
        "--quiet",
        "--set",
        f'train.out_dir="{tmp / "ckpt"}"',
        *SMALL,
    ]


def comparable(db: str, run: str) -> list[tuple[str, str, str]]:
    """The log without wall-clock fields and the diagevo version that wrote each event (another
    process may run another diagevo), ordered by event id. The target round (``train.rounds``,
    what ``--rounds`` asked for) is where a process stopped, not how a round ran: a
    ``run.configured`` that only moved it is left out, so a run trained to round 1 and resumed
    to 3 compares equal to one trained to 3."""
    out = []
    in_force: dict | None = None
    with open_log(db) as s:
        for e in s.read(run, texts=True):
            data = {
                k: v
                for k, v in e.event.model_dump().items()
                if k not in ("seconds", "timing", "latency_s", "path", "diagevo")
            }
            if e.type in ("run.started", "run.configured"):
                data.pop("trainer", None)  # who drives the run: the one field that tells them apart
                data["config"]["train"].pop("out_dir")
                data["config"]["train"].pop("rounds")
                if e.type == "run.configured" and data["config"] == in_force:
                    continue
                in_force = data["config"]
            out.append((e.event_id, e.type, json.dumps(data, sort_keys=True)))
    return sorted(out)


def test_train_cli_then_replay_why_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'train.db'}"
    code, out, err = run_cli(capsys, *small_args(db, "t1", 3, tmp_path))
    assert code == 0, err
    assert "diagevo memory replay --round 3" in out
    stats = json.loads(run_cli(capsys, "memory", "stats", "--db", db, "--json")[1])["rounds"]
    assert [r["round"] for r in stats] == [1, 2, 3]
    assert stats[0]["epsilon_next"] <= 1.0 and stats[0]["new_causes"] > 0
    m = json.loads(run_cli(capsys, "memory", "replay", "--round", "2", "--db", db, "--json")[1])
    assert m["round"] == 2 and m["causes"]
    cause = m["causes"][0]["id"]
    why = json.loads(run_cli(capsys, "memory", "why", cause, "--db", db, "--json")[1])
    assert why["timeline"][0]["kind"] == "created" and why["timeline"][0]["failure"]["question"]["text"]
    code, out, _ = run_cli(capsys, "memory", "verify", "--db", db)
    assert code == 0, out
    # a second run with the same seed and config writes the same log
    db2 = f"sqlite:///{tmp_path / 'again.db'}"
    assert run_cli(capsys, *small_args(db2, "t1", 3, tmp_path / "again"))[0] == 0
    assert comparable(db, "t1") == comparable(db2, "t1")


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from diagevo.train.config import load_config
    from diagevo.log import open_log
    from diagevo.train.run import TrainOptions, train

    db, run, out_dir = sys.argv[1:4]
    overrides = [a for a in sys.argv[4:]]
    cfg = load_config("configs/sim.toml", overrides + [f'train.out_dir="{out_dir}"', f'train.run="{run}"', "train.rounds=3"])
    state = {"round": 0}

    def progress(phase, done, total):
        if phase == "rounds":
            state["round"] = done + 1
        if phase == "maintain" and state["round"] == 2 and done >= 3:
            os.kill(os.getpid(), signal.SIGKILL)  # die in the middle of round 2's diagnosis

    with open_log(db) as store:
        train(cfg, store, TrainOptions(progress=progress))
    """  # noqa: E501
)


def test_sigkill_during_diagnosis_then_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    overrides = [a for a in SMALL if a != "--set"]
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, db, "c1", str(tmp_path / "ckpt"), *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    with open_log(db) as s:
        rounds_committed = [e.round for e in s.read("c1", types=(RoundCommitted,))]
        diagnosed_r2 = [
            e for e in s.read("c1", types=(FailureDiagnosed, CauseCreated, FailureAttributed)) if e.round == 2
        ]
    assert rounds_committed == [1] and diagnosed_r2, "the kill must land inside round 2's diagnosis"

    code, _, err = run_cli(capsys, *small_args(db, "c1", 3, tmp_path), "--resume")
    assert code == 0, err
    ref_db = f"sqlite:///{tmp_path / 'ref.db'}"
    assert run_cli(capsys, *small_args(ref_db, "c1", 3, tmp_path / "ref"))[0] == 0
    for t in (1, 2, 3):
        a = json.loads(run_cli(capsys, "memory", "replay", "--round", str(t), "--db", db, "--json")[1])
        b = json.loads(run_cli(capsys, "memory", "replay", "--round", str(t), "--db", ref_db, "--json")[1])
        assert a == b
    with open_log(db) as s:
        ids = Counter(e.event_id for e in s.read("c1"))
    assert max(ids.values()) == 1
    assert {i for i, _, _ in comparable(db, "c1")} == {i for i, _, _ in comparable(ref_db, "c1")}
    assert run_cli(capsys, "memory", "verify", "--db", db)[0] == 0


def test_default_config_run_has_promotions_reactivations_and_merges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `make train` runs (configs/sim.toml, 5 rounds), in its own database."""
    db = f"sqlite:///{tmp_path / 'default.db'}"
    code, out, err = run_cli(
        capsys, "train", "--db", db, "--run", "d", "--quiet", "--set", f'train.out_dir="{tmp_path / "ck"}"'
    )
    assert code == 0, err
    rounds = json.loads(run_cli(capsys, "memory", "stats", "--db", db, "--json")[1])["rounds"]
    assert len(rounds) == 5
    assert sum(r["promotions"] for r in rounds) > 0
    assert sum(r["reactivations"] for r in rounds) >= 1
    assert sum(r["merges"] for r in rounds) >= 1
    assert "diagevo memory why C" in out


def test_ablate_runs_variants_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        capsys,
        "ablate",
        "--seeds",
        "1",
        "--rounds",
        "1",
        "--variant",
        "full",
        "--variant",
        "pure free",
        "--world",
        "all on",
        "--out",
        str(tmp_path / "ab.db"),
        "--json",
        *SMALL,
    )
    assert code == 0, err
    result = json.loads(out)
    rows = result["all on"]
    assert [r["variant"] for r in rows] == ["full", "pure free"]
    assert all(0.0 <= r["selected_mean"] <= r["oracle_mean"] <= 1.0 and r["best_round"] == 1 for r in rows)
    assert all(r["selected_rounds"] == [1] and len(r["val_curve"]) == 1 for r in rows)
    code, _, err = run_cli(capsys, "ablate", "--variant", "nonsense", "--out", str(tmp_path / "ab.db"))
    assert code == 1 and "unknown variant" in err


def test_ablate_jobs_train_the_cells_in_processes_to_the_same_results(tmp_path: Path) -> None:
    """``--jobs 2``: the cells train in two processes against one log, then are read as one at a
    time reads them: the same runs, the same events, the same results."""
    from diagevo.train.ablate import run_ablation

    args = (["full", "pure free"], ["all on"], lambda *_: None)
    overrides = [s for s in SMALL if s != "--set"]
    one = run_ablation(None, overrides, f"sqlite:///{tmp_path / 'one.db'}", range(2), 1, *args)
    two = run_ablation(None, overrides, f"sqlite:///{tmp_path / 'two.db'}", range(2), 1, *args, jobs=2)
    assert one == two
    logs = [_logged(f"sqlite:///{tmp_path / name}.db") for name in ("one", "two")]
    assert logs[0] == logs[1] and len(logs[0]) == 4


def _logged(db: str) -> dict[str, list[tuple[str, str]]]:
    """Each run of the log at ``db`` (a database URL): its events' types and ids, in order."""
    from diagevo.log import open_log

    with open_log(db) as store:
        return {run: [(e.type, e.event_id) for e in store.read(run)] for run in sorted(store.runs())}


def test_an_ablation_run_in_parts_is_the_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--seed 1`` then ``--seed 0`` into one log trains the cells ``--seeds 2`` trains, to the same
    events (a part per session or machine), and each part reports its own seeds alone."""

    def ablate(db: Path, *seeds: str, json: bool = True) -> str:
        cell = ("--rounds", "1", "--world", "all on", "--variant", "full", "--out", str(db), *SMALL)
        code, out, err = run_cli(capsys, "ablate", *seeds, *cell, *(["--json"] if json else []))
        assert code == 0, err
        return out

    ablate(tmp_path / "whole.db", "--seeds", "2")
    ablate(tmp_path / "parts.db", "--seed", "1")
    ablate(tmp_path / "parts.db", "--seed", "0")
    whole, parts = (_logged(f"sqlite:///{tmp_path / name}.db") for name in ("whole", "parts"))
    assert whole == parts and sorted(whole) == ["ablate/all on/full/s0", "ablate/all on/full/s1"]
    out = ablate(tmp_path / "parts.db", "--seed", "1", json=False)
    assert "(seeds 1, 1 round)" in " ".join(out.split())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_stopped_ablate_leaves_no_cell_training(tmp_path: Path) -> None:
    """``ablate --jobs 2`` stopped (SIGTERM to the command alone, as ``kill`` sends it): its cell
    processes end with it rather than train on, unseen, holding their runs' leases."""
    import time

    def cells(parent: int) -> list[int]:
        out = []
        for proc in Path("/proc").iterdir():
            try:
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                cmd = (proc / "cmdline").read_bytes()
            except (OSError, IndexError):
                continue
            if int(stat[1]) == parent and b"spawn_main" in cmd:
                out.append(int(proc.name))
        return out

    args = ["ablate", "--seeds", "2", "--rounds", "400", "--variant", "full", "--world", "all on", "--jobs", "2"]
    command = subprocess.Popen(
        [sys.executable, "-m", "diagevo.cli.app", *args, "--out", str(tmp_path / "a.db"), *SMALL],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(2400):  # a hang guard, not a bound on speed: the cells start
            started = cells(command.pid)
            if len(started) == 2:
                break
            time.sleep(0.5)
        assert len(started) == 2
    finally:
        command.send_signal(signal.SIGTERM)
        command.wait()
    for _ in range(600):
        alive = [pid for pid in started if Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)]
        if not alive:
            break
        time.sleep(0.5)
    assert alive == []


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_ablate_selects_the_round_on_validation_not_on_held_out() -> None:
    from diagevo.train.ablate import _summary

    heldout = [[0.70, 0.80, 0.75], [0.60, 0.65, 0.90]]
    val = [[0.72, 0.70, 0.78], [0.66, 0.66, 0.61]]  # seed 0 picks round 3, seed 1 round 1 (earliest tie)
    s = _summary("v", heldout, val)
    assert s["selected_rounds"] == [3, 1]
    assert s["selected_mean"] == pytest.approx((0.75 + 0.60) / 2)
    assert s["final_mean"] == pytest.approx((0.75 + 0.90) / 2)
    assert s["oracle_mean"] == pytest.approx((0.80 + 0.90) / 2)
    assert s["best_round"] == 3  # of the mean validation curve: 0.69, 0.68, 0.695
