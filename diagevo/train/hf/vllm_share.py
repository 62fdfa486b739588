"""The process's one vLLM engine (colocate) or one vLLM-server client (server), handed to TRL.

TRL's ``GRPOTrainer`` builds a ``VLLMGeneration`` in its constructor, and in colocate mode that
builds a new ``vllm.LLM`` — for a loop that builds a trainer per phase, a new engine every phase
beside the one the loop samples with (two engines per GPU, minutes of start-up per phase for an 8B
model). :func:`shared_with_trl` makes the trainer built inside it take the process's own engine
or client instead. In colocate mode TRL's weight sync goes the engine's own way, vLLM's in-place
``reload_weights`` (:meth:`~diagevo.generation.vllm_engine.TrackedLLM.load_weights`), instead of
TRL's write through the model runner's ``load_weights``, which the CPU build cannot take (it
prepacks its linear layers); the parameters are still TRL's (``_iter_named_params``: ZeRO-3
gathers, PEFT merges). Everything else (sleep and wake-up around rollouts, the NCCL push to a
server, the rollouts themselves) is TRL's, unchanged.

After TRL has synced its training weights, the engine or client holds :data:`TRAINER`: the loop's
next sampling call pushes the weights of the policy it samples before it generates.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from diagevo.errors import BadInput, Unavailable
from diagevo.generation.vllm_engine import VLLMEngine

TRAINER = "trainer"  # held after TRL's own weight sync: a GRPO step's weights, not a saved policy


class ServerClient:
    """The process's one client of a vLLM server (TRL's ``VLLMClient``, weight transfer over NCCL):
    the loop samples from the server over HTTP, and pushes a policy before sampling it."""

    def __init__(self, url: str, device: Any, timeout_s: float = 240.0) -> None:
        try:
            from trl.generation.vllm_client import VLLMClient
        except ImportError as exc:
            raise Unavailable(f'vllm_mode = "server" needs trl and vllm: {exc}') from None
        self.url = url.rstrip("/")
        self.client = VLLMClient(base_url=self.url, connection_timeout=timeout_s)
        self.client.init_communicator(device=device)
        self.holding: Hashable | None = None

    @property
    def model(self) -> str:
        return str(self.client.model)

    def push(self, key: Hashable, model: Any) -> None:
        self.client.update_model_params(model)
        self.client.reset_prefix_cache()
        self.holding = key


@contextmanager
def shared_with_trl(engine: VLLMEngine | None = None, server: ServerClient | None = None) -> Iterator[None]:
    """Within this block, a ``GRPOTrainer`` built with ``use_vllm`` takes ``engine`` (colocate) or
    ``server`` (server mode) instead of building its own."""
    import trl.trainer.grpo_trainer as grpo
    from trl.generation.vllm_generation import VLLMGeneration

    class SharedGeneration(VLLMGeneration):  # type: ignore[misc]
        def _init_vllm(self) -> None:
            if self.mode == "colocate":
                if engine is None:
                    raise BadInput('vllm_mode = "colocate" without the process\'s engine')
                if self.tensor_parallel_size != 1:
                    raise BadInput("a shared colocated engine runs with tensor_parallel_size = 1")
                self.llm = engine.llm
                if self.enable_sleep_mode:
                    self.llm.sleep(level=2)
                self._llm_weights_sleeping = self.enable_sleep_mode
            elif self.mode == "server":
                if self.accelerator.is_main_process:
                    if server is None:
                        raise BadInput('vllm_mode = "server" without the process\'s client')
                    self.vllm_client = server.client
            else:
                raise BadInput(f"vllm_mode must be colocate or server, not {self.mode!r}")
            self.accelerator.wait_for_everyone()

        def sync_weights(self) -> None:
            if self.mode != "colocate":
                super().sync_weights()
                if server is not None:
                    server.holding = TRAINER
                return
            if self.enable_sleep_mode:
                self._llm_weights_sleeping = False
            # every process iterates (a ZeRO-3 gather is collective); each pushes into its own engine
            self.llm.load_weights(TRAINER, self._iter_named_params())

    saved = grpo.VLLMGeneration
    grpo.VLLMGeneration = SharedGeneration  # type: ignore[misc]  # patched for the phase, restored below
    try:
        yield
    finally:
        grpo.VLLMGeneration = saved  # type: ignore[misc]
