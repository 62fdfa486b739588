"""Runs as things: ids that cannot collide, one decision to create a run, one writer of a run at
a time (a lease that dies with its process), ``diagevo runs`` with each run's status, origin,
config, tags and notes, and ``memory verify --all``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diagevo import rounds
from diagevo.catalog import RunStarted
from diagevo.fork import fork_run
from diagevo.log import Recorder, open_log
from diagevo.train.config import Config
from diagevo.train.run import default_run_id
from tests.test_cli_memory import run_cli
from tests.test_rounds import promote_on_a_question

ROOT = Path(__file__).resolve().parent.parent


def committed(store: Recorder, run: str, n: int) -> None:
    for _ in range(n):
        rnd = rounds.Round.open(store, run)
        promote_on_a_question(rnd)
        rnd.commit({"acc": 0.5})


def test_run_ids_made_in_one_second_differ() -> None:
    config = Config()
    ids = {default_run_id(config) for _ in range(200)}
    assert len(ids) == 200


def test_creating_a_run_is_one_decision(store: Recorder) -> None:
    assert rounds.start_run(store, "r", {"k": 0.5}, resume="never")
    with pytest.raises(rounds.RunExists, match="run 'r' already exists"):
        rounds.start_run(store, "r", {"k": 2.0}, resume="never")
    assert not rounds.start_run(store, "r", {"k": 2.0}, resume="allow")  # continued as it is: nothing stored
    assert [e.event.config["k"] for e in store.read("r", types=(RunStarted,))] == [0.5]


_HOLD = """
import sys, time
from diagevo.log import open_log
with open_log(sys.argv[1]) as log, log.lease(sys.argv[2], "train (pid 1 on elsewhere, since noon)"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_second_writer_is_refused_naming_the_first_and_a_crash_frees_the_run(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_log(db_url) as store:
        rounds.start_run(store, "r", Config().redacted() | {"train": {"rounds": 1}}, trainer=rounds.OUR_TRAINER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, db_url, "r"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, _, err = run_cli(
            capsys,
            "train",
            "--db",
            db_url,
            "--run",
            "r",
            "--resume",
            "--quiet",
            "--set",
            f'train.out_dir="{tmp_path / "ckpt"}"',
        )
        assert code == 1 and err.count("\n") == 1
        assert "run 'r' is being written by train (pid 1 on elsewhere, since noon)" in " ".join(err.split())
        code, out, _ = run_cli(capsys, "runs", "--db", db_url, "--json")
        (summary,) = json.loads(out)["runs"]
        assert summary["status"] == "in progress" and "pid 1 on elsewhere" in summary["writer"]
    finally:
        holder.send_signal(signal.SIGKILL)  # a crash: the lease goes with the process
        holder.wait()
    with open_log(db_url) as store:
        while store.lease_holder("r") is not None:  # until the server notices the dead session
            time.sleep(0.2)
        with store.lease("r", "me"):
            assert store.lease_holder("r") == "me"


def test_runs_lists_each_runs_status_origin_config_tags_and_notes(
    db_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    two = Config().redacted()
    two["train"]["rounds"] = 2
    two["memory"]["k"] = 2.0
    with open_log(db_url) as store:
        rounds.start_run(store, "base", two)
        committed(store, "base", 2)
        fork_run(store, "base", 1, "fork-a")
        fork_run(store, "base", 2, "fork-b")
        rounds.start_run(store, "cut", two, trainer=rounds.OUR_TRAINER)  # train's: resumable
        committed(store, "cut", 1)
        rounds.open_round(store, "cut")  # round 2 open: interrupted in it
        rounds.tag_run(store, "base", ["paper", "k2"])
        rounds.tag_run(store, "base", ["k2"], removed=True)
        rounds.note_run(store, "base", "the reference run [b]not markup[/b]")
    code, out, err = run_cli(capsys, "runs", "--db", db_url, "--json")
    assert code == 0, err
    got = {r["run"]: r for r in json.loads(out)["runs"]}
    assert list(got) == ["base", "fork-a", "fork-b", "cut"]
    assert [(r["status"], r["committed"], r["target"]) for r in got.values()] == [
        ("complete", 2, None),  # another trainer's run: no total of its own (train.rounds is diagevo train's)
        ("forked", 1, None),  # not continued
        ("forked", 2, None),
        ("interrupted", 1, 2),
    ]
    assert [r["trainer"] for r in got.values()] == [*["external trainer"] * 3, "diagevo train"]
    assert got["fork-a"]["forked_from"] == {"run": "base", "round": 1} and got["base"]["forked_from"] is None
    assert got["cut"]["open_round"] == 2
    assert got["base"]["changed"] == {"memory.k": 2.0, "train.rounds": 2}
    assert got["base"]["tags"] == ["paper"] and got["base"]["notes"] == ["the reference run [b]not markup[/b]"]
    code, out, _ = run_cli(capsys, "runs", "--db", db_url)
    assert code == 0 and "[b]not markup" not in out
    # at 80 columns: under each run's id, a line each for its origin, tags and config changes
    lines = [" ".join(line.split()) for line in out.splitlines()]
    at = {line.split()[0]: i for i, line in enumerate(lines) if line.split() and line.split()[0] in got}
    assert lines[at["base"] + 1 : at["base"] + 6] == [
        "tags: paper",
        "note: the reference run […",  # cut to the column, which leaves the others theirs; --json has it whole
        "train.rounds=2",
        "memory.k=2.0",
        "trainer: external trainer",
    ]
    assert lines[at["fork-a"] + 1] == "forked from base @ round 1"
    assert lines[at["cut"]].startswith("cut interrupted 1/2") and "round 2 open" in lines[at["cut"] + 1]
    assert max(len(line) for line in out.splitlines()) <= 80
    assert all(re.search(r" \d{4}-\d\d-\d\d \d\d:\d\d$", lines[at[r]]) for r in got)  # created: never cut
    report = tmp_path / "base.html"
    code, _, err = run_cli(capsys, "report", "--db", db_url, "--run", "base", "-o", str(report))
    header = report.read_text().split("<header>")[1].split("</header>")[0]
    assert code == 0, err
    assert "tags: <code>paper</code>" in header and "note: the reference run [b]not markup[/b]</p>" in header
    code, out, _ = run_cli(capsys, "memory", "verify", "--all", "--db", db_url, "--json")
    assert code == 0 and [r["run"] for r in json.loads(out)["runs"]] == list(got)
    assert all(r["ok"] for r in json.loads(out)["runs"])


def test_a_tag_or_note_on_a_run_that_is_not_there_is_one_line(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    open_log(db_url).close()
    code, _, err = run_cli(capsys, "runs", "tag", "ghost", "x", "--db", db_url)
    assert code == 1 and "no run 'ghost'" in err and err.count("\n") == 1


@pytest.mark.slow
def test_two_trains_started_in_the_same_second_are_two_runs_each_with_its_config(tmp_path: Path) -> None:
    """The issue's case: one default ``train`` beside one with k = 2 and no filter, started at
    once: two runs, each with the config it was started with."""
    db = f"sqlite:///{tmp_path / 'two.db'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    small = ["--set", "train.challenger_questions=16", "--set", "train.curriculum_questions=32"]
    base = [
        sys.executable,
        "-m",
        "diagevo.cli.app",
        "train",
        "--rounds",
        "1",
        "--quiet",
        "--db",
        db,
        *small,
        "--set",
        f'train.out_dir="{tmp_path / "ckpt"}"',
    ]
    procs = [
        subprocess.Popen(base, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        subprocess.Popen(
            [*base, "--set", "memory.k=2.0", "--set", "filter.mode=none"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
    ]
    outs = [(p.wait(timeout=900), p.communicate()) for p in procs]
    assert [code for code, _ in outs] == [0, 0], outs
    with open_log(db, create=False) as store:
        configs = {run: rounds.run_config(store, run) for run in store.runs()}
    assert len(configs) == 2
    assert sorted((c.memory.k, c.filter.mode) for c in configs.values()) == [(0.5, "double"), (2.0, "none")]
