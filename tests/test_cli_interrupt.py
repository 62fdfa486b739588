"""Ctrl-C takes effect at once in every phase of ``diagevo train`` (simulator).

``train`` runs piped, so its progress comes as plain lines on stderr; when a line shows that a
phase has begun, the test sends SIGINT and counts the CPU time the process spends from then until
it has printed the one-line ``interrupted in round N: continue with ...`` and exited. CPU time,
not wall-clock time: on a loaded machine the wall clock says nothing about the process, while
work done after Ctrl-C is CPU time whatever the load. Before diagevo ran its coroutines with
:func:`diagevo.runtime.aio.run`, ``asyncio.run`` deferred Ctrl-C to the next ``await``: 6-14 s of loading
and running the embedder in the diagnosis, and Python's teardown then took 1-4 s more."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from diagevo.text.words import times
from tests.test_train import SMALL

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
    "COLUMNS": "80",
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
}  # this tree's diagevo
CLI = [sys.executable, "-c", "import sys; from diagevo.cli.app import main; sys.argv[0] = 'diagevo'; main()"]
CPU_WITHIN_S = 3.0  # CPU seconds after Ctrl-C (teardown included); the deferred Ctrl-C spent 6-14 s

# (a line that says the phase has begun, which of those lines, the round it is in)
PHASES = [
    (r"\] challenger GRPO 0/", 1, 1),
    (r"\] votes & filter 0/", 1, 1),
    (r"\] diagnosis: extraction (\d+)/\1\b", 1, 1),  # extraction done: the embedder loads next
    (r"\] diagnosis: memory 1/", 1, 1),
    (r"\] challenger GRPO 0/", 2, 2),  # round 2 begins
]


def default_sigint() -> None:
    """In the child, before exec: SIGINT handled as at a terminal. A test run in the background of
    a non-interactive shell inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _lines(stream: object, out: queue.Queue[str | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        out.put(line.rstrip("\n"))
    out.put(None)  # the end of stderr


@pytest.mark.parametrize(("begins", "nth", "round_"), PHASES, ids=[f"{p.split('] ')[1]}-{n}" for p, n, _ in PHASES])
def test_ctrl_c_stops_train_at_once(tmp_path: Path, begins: str, nth: int, round_: int) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    proc = subprocess.Popen(
        [*CLI, "train", "--db", db, "--run", "r", "--rounds", "2", *SMALL],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    seen: list[str] = []
    matches = 0
    try:
        sent = None
        while True:
            got = lines.get(timeout=300)
            assert got is not None, f"train ended before {begins!r} was seen {times(nth)}: {seen[-5:]}"
            line = got
            seen.append(line)
            matches += sent is None and re.search(begins, line) is not None
            if sent is None and matches == nth:
                sent = _cpu_seconds(proc.pid)
                proc.send_signal(signal.SIGINT)
            elif sent is not None and line.startswith("interrupted"):
                break
        _, status, usage = os.wait4(proc.pid, 0)  # the CPU time of the whole process, teardown included
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.returncode == 130
        spent = usage.ru_utime + usage.ru_stime - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert spent < CPU_WITHIN_S, f"Ctrl-C after {seen[-2]!r} let the process work {spent:.1f} CPU s more"
    assert re.fullmatch(
        rf"interrupted in round {round_}: continue with `diagevo train --resume --run r --db \S+`", line
    ), line
