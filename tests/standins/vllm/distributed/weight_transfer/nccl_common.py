"""The trainer's end of vLLM's NCCL weight transfer (stand-in: a CUDA-only rendezvous has no CPU
form; a test that needs one hands the tensors over in memory, see ``packed_tensor``)."""

from __future__ import annotations

from typing import Any


def trainer_init(init_info: dict[str, Any]) -> Any:
    raise RuntimeError("the NCCL weight-transfer rendezvous needs CUDA")
