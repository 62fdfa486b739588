"""Issue 83: the round script (``examples/verl_round.sh``) takes no server but its own as the
round's frozen solver. A server already answering on its port was taken for it (its answers then
rewarded the challenger): the script now refuses that port before it writes anything, serves the
solver under a name of this round alone, and names that model to the challenger's reward."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from tests.llm_server import LLMServer

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "verl_round.sh"


def test_a_port_another_server_answers_on_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with LLMServer() as srv:
        port = urlsplit(srv.url).port
        env = {
            **os.environ,
            "RUN": "r",
            "SOLVER": "solver-0",
            "CHALLENGER": "challenger-0",
            "ROUND": str(tmp_path / "round"),
            "PORT": str(port),
            "DB": f"sqlite:///{tmp_path / 'x.db'}",
        }
        done = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and f"port {port} answers already" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no database, no round folder


def test_the_challengers_reward_is_told_the_model_this_round_serves() -> None:
    """The served name is the round's own, and the challenger's reward asks the server for it (a
    server of another model answers its requests with HTTP 404, naming what it serves)."""
    text = SCRIPT.read_text(encoding="utf-8")
    serve = next(line for line in text.splitlines() if line.startswith("vllm serve"))
    assert shlex.split(serve)[shlex.split(serve).index("--served-model-name") + 1] == "$SERVED"
    assert 'reward.custom_reward_function.reward_kwargs.solver_model="$SERVED"' in text
    assert 'grep -q "\\"$SERVED\\""' in text  # waited for until the server lists it
