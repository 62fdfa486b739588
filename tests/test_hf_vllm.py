"""The hf backend's vLLM path on a CPU, against the stand-in ``vllm`` package (tests/standins).

Two real rounds of the loop on the tiny pair with ``hf.use_vllm = true``, TRL's GRPO rollouts and
the loop's sampling both through vLLM's API, in a subprocess that imports the stand-in as
``vllm``. The stand-in records every engine, sleep, wake-up, weight push and generation with a
fingerprint of the weights it sampled, and refuses what vLLM refuses (generating while asleep or
after a level-2 sleep before weights are pushed again). Colocate: one engine per process for the
whole run, the loop's samples from exactly the policies its checkpoints hold. Server: no engine
in the process; the loop samples over HTTP from a loopback stand-in of a vLLM server in the same
process, weights pushed through TRL's ``VLLMClient`` (only the NCCL rendezvous, which needs CUDA,
is replaced by an in-memory hand-over).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from tests.hf_fixtures import tiny_pair  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STANDINS = ROOT / "tests" / "standins"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def tiny_dir(request: pytest.FixtureRequest) -> Path:
    return tiny_pair(request.config)


def fingerprint_of(path: Path) -> str:
    """The stand-in's fingerprint of a saved model (run where the stand-in imports as ``vllm``)."""
    code = (
        "import sys, torch; from transformers import AutoModelForCausalLM; import vllm; "
        "print(vllm.fingerprint(AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=_env(None), timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _env(log: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STANDINS), str(ROOT)]), "HF_HUB_OFFLINE": "1"}
    if log is not None:
        env["VLLM_STANDIN_LOG"] = str(log)
    return env


def train(
    tmp: Path, tiny_dir: Path, *sets: str, runner: list[str] | None = None
) -> tuple[list[dict], dict[tuple[int, str], Path]]:
    log = tmp / "vllm.jsonl"
    db = tmp / "x.db"
    args = [
        "train",
        "--config",
        str(ROOT / "configs" / "tiny-hf.toml"),
        "--db",
        f"sqlite:///{db}",
        "--rounds",
        "2",
        "--run",
        "v",
        "--quiet",
        "--set",
        f"solver.model={json.dumps(str(tiny_dir / 'solver'))}",
        "--set",
        f"challenger.model={json.dumps(str(tiny_dir / 'challenger'))}",
        "--set",
        "hf.use_vllm=true",
        *[x for s in sets for x in ("--set", s)],
    ]
    cmd = [sys.executable, *(runner or ["-m", "diagevo.cli.app"]), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_env(log), timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    from diagevo.catalog import CheckpointWritten
    from diagevo.log import open_log
    from diagevo.views.checkpoints import checkpoint_path

    store = open_log(f"sqlite:///{db}")
    try:
        ckpts = {
            (e.round, e.event.phase): checkpoint_path(store, "v", e.event.path)
            for e in store.read("v", types=(CheckpointWritten,))
        }
    finally:
        store.close()
    return events, ckpts


def test_colocate_one_engine_per_process_sampling_the_checkpointed_policies(tiny_dir: Path, tmp_path: Path) -> None:
    events, ckpts = train(tmp_path, tiny_dir)
    engines = [e for e in events if e["event"] == "engine"]
    assert len(engines) == 1, engines  # one engine for 2 rounds x 2 GRPO phases and every sampling
    assert engines[0]["kwargs"]["distributed_executor_backend"] == "external_launcher"
    assert engines[0]["kwargs"]["enable_sleep_mode"] == "True"
    rollouts = [e for e in events if e["event"] == "generate"]  # TRL's GRPO rollouts (token ids)
    assert len(rollouts) >= 4  # challenger and solver steps of both rounds
    # the loop's own samples: votes, Q^cur, held-out accuracy, always from a saved policy
    s0 = fingerprint_of(tiny_dir / "solver")
    c = {t: fingerprint_of(ckpts[(t, "challenger")] / "challenger") for t in (1, 2)}
    s = {t: fingerprint_of(ckpts[(t, "solver")] / "solver") for t in (1, 2)}
    assert fingerprint_of(ckpts[(1, "challenger")] / "solver") == s0  # the challenger phase leaves the solver
    sampled = [e["weights"] for e in events if e["event"] == "chat"]
    assert set(sampled) <= {s0, c[1], s[1], c[2], s[2]}, "a sample from weights no checkpoint holds"
    assert c[1] in sampled and c[2] in sampled  # Q^cur from each round's updated challenger
    assert sampled[-1] == s[2]  # the last held-out evaluation: the solver this round trained
    assert s[1] in sampled and s[1] != s0 != s[2]
    # weights are pushed in memory, never an engine rebuilt from disk
    assert sum(e["event"] == "load_weights" for e in events) >= 6


SERVER_RUNNER = r"""
import sys, threading
import vllm
from tests.standins.vllm_server import StandinServer
from trl.generation import vllm_client

server = StandinServer(sys.argv[1])
def init_communicator(self, device=0):  # the NCCL rendezvous needs CUDA: hand tensors over in memory
    self.get_server_info(); self.get_world_size()
    self.communicator = server
vllm_client.VLLMClient.init_communicator = init_communicator
sys.argv = [sys.argv[0], *sys.argv[2:], "--set", f'hf.vllm_server_url="{server.url}"']
from diagevo.cli.app import main
try:
    main()
finally:
    server.close()
"""


def test_server_mode_builds_no_engine_and_pushes_each_policy_before_sampling(tiny_dir: Path, tmp_path: Path) -> None:
    runner = tmp_path / "runner.py"
    runner.write_text(SERVER_RUNNER)
    events, ckpts = train(tmp_path, tiny_dir, 'hf.vllm_mode="server"', runner=[str(runner), str(tiny_dir / "solver")])
    assert not [e for e in events if e["event"] == "engine"]  # no engine in the training process
    served = [e for e in events if e["event"] == "served"]
    assert {e["route"] for e in served} == {"/v1/completions", "/v1/chat/completions"}  # TRL's and the loop's
    s2 = fingerprint_of(ckpts[(2, "solver")] / "solver")
    c2 = fingerprint_of(ckpts[(2, "challenger")] / "challenger")
    chats = [e["weights"] for e in served if e["route"] == "/v1/chat/completions"]
    assert c2 in chats and chats[-1] == s2
    assert sum(e["event"] == "weights_received" for e in events) >= 6
