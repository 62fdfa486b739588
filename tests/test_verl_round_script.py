"""Issue 83: the round script (``examples/verl_round.sh``) takes no server but its own as the
round's frozen solver. A server already answering on its port was taken for it (its answers then
rewarded the challenger): the script now refuses that port before it writes anything, serves the
solver under a name of this round alone, and names that model to the challenger's reward.

Issue 93: every wait of the script is bounded and says what it waits for: the port check waited
forever, without a word, on a process that takes the connection and never answers."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from tests.llm_server import LLMServer

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "verl_round.sh"


def round_env(tmp_path: Path, port: int, **more: str) -> dict[str, str]:
    """The script's environment for round 1 of run ``r`` in ``tmp_path``, diagevo's environment first on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {
        **os.environ,
        "PATH": path,
        "RUN": "r",
        "SOLVER": "solver-0",
        "CHALLENGER": "challenger-0",
        "ROUND": str(tmp_path / "round"),
        "PORT": str(port),
        "DB": f"sqlite:///{tmp_path / 'x.db'}",
        **more,
    }


def test_a_port_another_server_answers_on_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with LLMServer() as srv:
        port = urlsplit(srv.url).port
        assert port is not None
        env = round_env(tmp_path, port)
        done = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and f"port {port} answers already" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no database, no round folder


def test_a_port_held_by_a_process_that_never_answers_is_refused_in_time(tmp_path: Path) -> None:
    """A listener that takes the connection and never answers (a wedged server): the check gives
    up after PORT_CHECK_S and refuses the port, naming the wait (it waited forever, silently)."""
    with socket.create_server(("127.0.0.1", 0)) as wedged:
        port = wedged.getsockname()[1]
        env = round_env(tmp_path, port, PORT_CHECK_S="1")
        done = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30)
        wedged.settimeout(5)
        held, _ = wedged.accept()  # the connection the check made, taken and never answered
        held.close()
    assert done.returncode == 1, done.stderr
    assert f"port {port} is taken" in done.stderr and "did not answer within 1 s (PORT_CHECK_S" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no database, no round folder


def test_the_wait_for_the_solver_server_is_bounded_and_said(tmp_path: Path) -> None:
    """A ``vllm serve`` that never serves the solver (here one that only sleeps): the script says
    what it waits for, and stops after SERVE_WAIT_S naming it (it waited as long as the process lived)."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "vllm").write_text("#!/bin/sh\nexec sleep 60\n")
    (stubs / "vllm").chmod(0o755)
    with socket.create_server(("127.0.0.1", 0)) as probe:  # a port nothing listens on once closed
        port = probe.getsockname()[1]
    env = round_env(tmp_path, port, SERVE_WAIT_S="3")
    env["PATH"] = f"{stubs}{os.pathsep}{env['PATH']}"
    done = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"waiting for vllm serve to serve solver-0 on port {port}" in done.stderr, done.stderr
    assert f"did not serve solver-0 on port {port} within 3 s (SERVE_WAIT_S)" in done.stderr, done.stderr


def test_the_challengers_reward_is_told_the_model_this_round_serves() -> None:
    """The served name is the round's own, and the challenger's reward asks the server for it (a
    server of another model answers its requests with HTTP 404, naming what it serves)."""
    text = SCRIPT.read_text(encoding="utf-8")
    serve = next(line for line in text.splitlines() if line.startswith("vllm serve"))
    assert shlex.split(serve)[shlex.split(serve).index("--served-model-name") + 1] == "$SERVED"
    assert 'reward.custom_reward_function.reward_kwargs.solver_model="$SERVED"' in text
    assert 'grep -q "\\"$SERVED\\""' in text  # waited for until the server lists it
