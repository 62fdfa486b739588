"""``vllm.platforms`` of the stand-in: it plays vLLM on a CUDA platform (sleep mode available),
which is what it stands in for; the real CPU build is exercised by the vLLM test tier."""

from __future__ import annotations


class _Platform:
    device_type = "cuda"

    def is_rocm(self) -> bool:
        return False

    def is_sleep_mode_available(self) -> bool:
        return True


current_platform = _Platform()
