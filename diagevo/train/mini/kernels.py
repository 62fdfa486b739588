"""Which vector kernels the mini pair's warm-up runs on, so that the same seed builds the same
pair on any x86 machine.

Torch picks its CPU kernels by the processor (AVX-512 where it has it, else AVX2) and MKL picks
its own code path; each sums a matrix product in its own order, so the same warm-up built on two
processors gave two pairs (up to 0.12 apart in a skill). Pinned to the AVX2 kernels and MKL's
AVX2 branch (``ATEN_CPU_CAPABILITY``, ``MKL_CBWR``; one thread), an AMD EPYC with AVX-512 built the
pair byte for byte as an AMD EPYC without it did natively (docs/how-to/mini-world.md). Both are
read at torch's and MKL's first operation in a process, so they are set here, before the build's
first operation, and a process whose torch already chose other kernels is refused.
"""

from __future__ import annotations

import os
from types import ModuleType

from diagevo.errors import BadInput

KERNELS = ("avx2", "native")
"""``avx2``: the same kernels on every x86 processor that has AVX2; ``native``: the processor's own."""
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}


def pin_kernels(torch: ModuleType, kernels: str) -> str:
    """Run this process's ``torch`` (the build's, imported by it where it runs) on ``kernels`` (one
    of :data:`KERNELS`); the kernels it runs, as torch names them (``AVX2``, ``AVX512``), which the
    build records."""
    if kernels == "native":
        return str(torch.backends.cpu.get_cpu_capability())
    before = {k: os.environ.get(k) for k in PINNED}
    os.environ.update(PINNED)  # read once, at torch's and MKL's first use in the process
    try:
        running = str(torch.backends.cpu.get_cpu_capability())
        torch.ones(2, 2) @ torch.ones(2, 2)  # MKL's first call: its branch is read now, while set
    finally:
        for k, v in before.items():  # not handed on to the processes this one starts
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if running != "AVX2":
        raise BadInput(
            f"kernels 'avx2': this process runs torch's {running} kernels (chosen at its first operation, "
            "or the processor has no AVX2): build in a process that has run no torch operation yet, "
            "or with kernels 'native'"
        )
    return running
