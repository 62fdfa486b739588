"""Resume is exact from every kill point: a simulator run killed (SIGKILL, nothing after it runs)
at each phase boundary and inside each long phase of round 2, then resumed in a fresh process,
gives the log of the uninterrupted run (wall-clock fields and checkpoint paths aside), or the
resume refuses in one line saying what to do. The slow tier kills a real round (the mini world,
TRL's steps) where it differs: tests/test_mini_loop.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_train import SMALL, comparable

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
RUN = "crash"

# the CLI, killed (SIGKILL) once round KILL_ROUND's phase KILL_PHASE has reported KILL_DONE done
KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from diagevo.train import loop

    phase_at, done_at, round_at = sys.argv.pop(1), int(sys.argv.pop(1)), int(sys.argv.pop(1))
    init = loop.Trainer.__init__

    def hooked_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        progress, state = self.progress, {"round": 0}

        def hooked(phase, done, total):
            if phase == "rounds":
                state["round"] = done + 1
            progress(phase, done, total)
            last = done_at < 0 and total is not None and done >= total  # -1: the phase's last report
            if phase == phase_at and state["round"] == round_at and (last or 0 <= done_at <= done):
                os.kill(os.getpid(), signal.SIGKILL)

        self.progress = hooked

    loop.Trainer.__init__ = hooked_init
    from diagevo.cli.app import main

    sys.argv[0] = "diagevo"
    main()
    """
)

KILL_POINTS = [
    ("challenger", 0),  # before the challenger's GRPO
    ("generate", 0),  # the challenger checkpointed, Q^cur not yet written
    ("construct", 0),  # generated, no vote recorded
    ("construct", -1),  # votes recorded, the phase not closed (its last report)
    ("solver", 0),  # promotions decided, the solver not trained: the registry of the round's questions
    ("solver", 1),  # inside the solver's GRPO
    ("extract", 1),  # inside the diagnosis
    ("maintain", 5),  # some failures' memory changes stored
    ("maintain", -1),  # every failure's changes stored, the merges and the commit not yet
]


def train(db: str, *args: str, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    head = prefix or [sys.executable, "-c", "import sys; from diagevo.cli.app import main; main()"]
    cmd = [*head, "train", "--db", db, "--run", RUN, "--quiet", "--rounds", "2", *SMALL, *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV, timeout=600)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, str]]:
    db = f"sqlite:///{tmp_path_factory.mktemp('ref') / 'ref.db'}"
    proc = train(db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return comparable(db, RUN)


@pytest.mark.parametrize(("phase", "done"), KILL_POINTS, ids=[f"{p}-{d}" for p, d in KILL_POINTS])
def test_a_round_killed_anywhere_resumes_to_the_uninterrupted_round(
    phase: str, done: int, tmp_path: Path, uninterrupted: list[tuple[str, str, str]]
) -> None:
    db = f"sqlite:///{tmp_path / 'killed.db'}"
    killed = train(db, prefix=[sys.executable, "-c", KILLED, phase, str(done), "2"])
    assert killed.returncode == -9, (phase, done, killed.returncode, killed.stderr[-2000:])
    resumed = train(db, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert comparable(db, RUN) == uninterrupted
