"""Resume reproduces the uninterrupted run across processes: rounds 1-3 in one process, the same
rounds one process each, and a Ctrl-C (SIGINT) in the middle of round 2's diagnosis followed by
``--resume``, all give the same log apart from wall-clock fields and checkpoint paths. On the way,
the commands printed after a run are pasted into a shell as they are."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from diagevo.catalog import CauseCreated, FailureAttributed, RoundCommitted
from diagevo.log import open_log
from tests.test_cli_memory import run_cli
from tests.test_train import SMALL, comparable

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
CLI = [sys.executable, "-c", "import sys; from diagevo.cli.app import main; sys.argv[0] = 'diagevo'; main()"]

# the CLI, with a Ctrl-C sent to itself once round 2's diagnosis has decided thirty failures (and
# stored the first 16 with their events)
CTRL_C_IN_ROUND_2 = textwrap.dedent(
    """
    import os, signal, sys
    from diagevo.train import loop

    # as at a terminal, even when the test runs in the background of a shell (SIGINT inherited ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    init = loop.Trainer.__init__

    def hooked_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        progress, state = self.progress, {"round": 0, "sent": False}

        def hooked(phase, done, total):
            if phase == "rounds":
                state["round"] = done + 1
            if phase == "maintain" and state["round"] == 2 and done >= 30 and not state["sent"]:
                state["sent"] = True
                os.kill(os.getpid(), signal.SIGINT)
            progress(phase, done, total)

        self.progress = hooked

    loop.Trainer.__init__ = hooked_init
    from diagevo.cli.app import main

    sys.argv[0] = "diagevo"
    main()
    """
)


def train_args(db: str, run: str, *extra: str) -> list[str]:
    return ["train", "--db", db, "--run", run, "--quiet", *SMALL, *extra]


def cli(args: list[str], cwd: Path = ROOT, prefix: list[str] = CLI) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, *args], cwd=cwd, capture_output=True, text=True, env=ENV, timeout=600)


RUN = "run 1"  # a space: every command printed for the user must quote it


def test_resume_across_processes_and_after_ctrl_c_reproduces_the_uninterrupted_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = f"sqlite:///{tmp_path / 'ref.db'}"
    code, _, err = run_cli(capsys, *train_args(ref, RUN, "--rounds", "3"))
    assert code == 0, err
    want = comparable(ref, RUN)

    # one fresh process per round; the first through the installed entry point, from a directory
    # where `diagevo` is not on PATH: the commands it prints name that entry point and run as printed
    chain = f"sqlite:///{tmp_path / 'chain.db'}"
    entry = Path(sys.executable).parent / "diagevo"
    assert entry.is_file(), "the diagevo entry point is installed next to this Python"
    bare_path = {**ENV, "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [str(entry), *train_args(chain, RUN, "--rounds", "1")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=bare_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr == ""  # nothing but the program's own output (no LanceDB warning)
    hints = proc.stdout.split("try:\n", 1)[1].strip().splitlines()
    assert len(hints) == 3 and all(h.strip().startswith(f"{entry} memory ") for h in hints), hints
    for hint in hints:
        ran = subprocess.run(
            ["bash", "-c", hint], cwd=tmp_path, capture_output=True, text=True, env=bare_path, timeout=300
        )
        assert ran.returncode == 0, (hint, ran.stderr)
    assert (tmp_path / "chain.diagevo" / "runs").is_dir()  # in the database's folder
    assert not (tmp_path / "chain.diagevo" / "index.lance").exists()  # the static vectors stay in memory
    for t in (2, 3):
        proc = cli(train_args(chain, RUN, "--rounds", str(t), "--resume"))
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stderr == ""
    assert comparable(chain, RUN) == want

    # Ctrl-C in the middle of round 2's diagnosis: one line saying where and how to go on
    sigint = f"sqlite:///{tmp_path / 'sigint.db'}"
    proc = cli(train_args(sigint, RUN, "--rounds", "3"), prefix=[sys.executable, "-c", CTRL_C_IN_ROUND_2])
    assert proc.returncode == 130, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    m = re.fullmatch(r"interrupted in round 2: continue with `(.*)`", lines[0])
    assert m is not None, lines[0]
    again = shlex.split(m.group(1))
    assert again[1:] == ["train", "--resume", "--run", RUN, "--db", sigint]
    with open_log(sigint, create=False) as s:
        assert [e.round for e in s.read(RUN, types=(RoundCommitted,))] == [1]
        assert any(e.round == 2 for e in s.read(RUN, types=(FailureAttributed, CauseCreated)))
    proc = cli([*again[1:], "--rounds", "3", "--quiet"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert comparable(sigint, RUN) == want
    with open_log(sigint, create=False) as s:
        assert max(Counter(e.event_id for e in s.read(RUN)).values()) == 1
    assert run_cli(capsys, "memory", "verify", "--db", sigint, "--run", RUN)[0] == 0
