"""``memory events --follow`` and ``memory stats --follow`` tail a run that another process is
writing, on SQLite and PostgreSQL: the follower sees every event once, in order, and stops at
--until-round or on Ctrl-C (exit 0, nothing on stderr but its own notes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from diagevo.log import open_log
from diagevo.views.stats import round_stats

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    **os.environ,
    "PYTHONUNBUFFERED": "1",
    "COLUMNS": "120",
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
}
CLI = [sys.executable, "-c", "import sys; from diagevo.cli.app import main; sys.argv[0] = 'diagevo'; main()"]
ROUNDS = 4

# a writer in its own process: the run round by round, a pause between rounds
WRITER = """
import sys, time
from diagevo.log import open_log
from tests.logs import Log
url, rounds, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
log = Log("live")
log.node("N1", "roots").cause("C1", "N1", "keeps a root")
for t in range(1, rounds + 1):
    log.question(f"q{t}", 0.5, active="C1").attribute("C1", f"f{t}")
    log.add("eval.recorded", acc=0.5 + t / 100)
    log.commit()
events = log.events()
with open_log(url) as store:
    start = 0
    for i, e in enumerate(events):
        if e.type == "round.committed":
            store.append(events[start : i + 1])
            start = i + 1
            time.sleep(pause)
"""


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as at a terminal, even under a background shell


def writer(url: str, pause: float = 0.3) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, url, str(ROUNDS), str(pause)], cwd=ROOT, env=ENV, text=True)


def follower(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )


@pytest.fixture()
def url(db_url: str) -> str:  # SQLite and PostgreSQL (tests/conftest.py): migrated, empty
    open_log(db_url).close()
    return db_url


def test_events_follow_a_run_written_by_another_process(url: str) -> None:
    f = follower("memory", "events", "--db", url, "--run", "live", "--follow", "--jsonl", "--until-round", str(ROUNDS))
    assert f.stderr is not None
    waiting = f.stderr.readline()  # started before the writer: it waits for the run
    w = writer(url)
    out, err = f.communicate(timeout=300)
    assert w.wait(timeout=300) == 0
    assert f.returncode == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    with open_log(url, readonly=True) as store:
        stored = list(store.read("live"))
    assert [e["seq"] for e in got] == [e.seq for e in stored]  # every event once, in order
    assert [e["type"] for e in got] == [e.type for e in stored] and got[-1]["type"] == "round.committed"
    assert "waiting for run live" in waiting and "Traceback" not in err


def test_stats_follow_prints_a_row_per_committed_round(url: str) -> None:
    w = writer(url)
    f = follower("memory", "stats", "--db", url, "--run", "live", "--follow", "--json", "--until-round", str(ROUNDS))
    out, err = f.communicate(timeout=300)
    assert w.wait(timeout=300) == 0
    assert f.returncode == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    with open_log(url, readonly=True) as store:
        rows = round_stats(store, "live")
    assert [r["round"] for r in got] == list(range(1, ROUNDS + 1))
    assert [{k: v for k, v in r.items() if k != "run"} for r in got] == [r.to_json() for r in rows]
    assert [r["acc"] for r in got] == [0.5 + t / 100 for t in range(1, ROUNDS + 1)]


def test_stats_follow_as_lines(url: str) -> None:
    w = writer(url, pause=0.0)
    assert w.wait(timeout=300) == 0
    f = follower("memory", "stats", "--db", url, "--follow", "--until-round", "2")
    out, err = f.communicate(timeout=300)
    assert f.returncode == 0, err
    lines = out.splitlines()
    assert "following run live" in lines[0]
    assert lines[1].startswith("t=1 ") and "acc=0.510" in lines[1] and lines[2].startswith("t=2 ") and len(lines) == 3


def test_ctrl_c_stops_a_follow_cleanly(url: str) -> None:
    w = writer(url, pause=1.0)
    f = follower("memory", "events", "--db", url, "--run", "live", "--follow")
    assert f.stdout is not None
    first = f.stdout.readline()  # the follower is reading
    second = f.stdout.readline()
    f.send_signal(signal.SIGINT)
    out, err = f.communicate(timeout=120)
    w.wait(timeout=300)
    assert "following run live" in first and second.split()[0] == "1"
    assert f.returncode == 0, err
    assert "Traceback" not in err and "interrupted" not in err


def test_until_round_needs_follow(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_cli_memory import assert_one_line_error, run_cli

    code, _, err = run_cli(capsys, "memory", "events", "--db", url, "--until-round", "2")
    assert_one_line_error(code, err, "--until-round goes with --follow")
