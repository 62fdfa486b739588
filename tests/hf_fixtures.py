"""The tiny local model pair, built once and kept in pytest's cache while its builder is unchanged."""

from __future__ import annotations

import hashlib
import inspect
import shutil
from pathlib import Path

import pytest

from diagevo.train.hf import tiny

TEST_SPEC = tiny.TinySpec(steps=200)


def tiny_pair(config: pytest.Config) -> Path:
    key = hashlib.sha256((inspect.getsource(tiny) + repr(TEST_SPEC)).encode()).hexdigest()[:12]
    cache = getattr(config, "cache", None)  # absent under pytest -p no:cacheprovider
    if cache is None:  # then build it in a fresh directory
        import tempfile

        out = Path(tempfile.mkdtemp(prefix="diagevo-tiny-"))
    else:
        out = Path(cache.mkdir(f"diagevo-tiny-{key}"))
    import fcntl

    with open(out.parent / f"{out.name}.lock", "w") as lock:  # two test processes (pytest -n) build it once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "tiny.json").is_file():
            shutil.rmtree(out, ignore_errors=True)  # empty, or what an interrupted older build left
            tiny.build_tiny(out, TEST_SPEC)
    return out


def smollm2_model(warm_steps: int = 24) -> Path:
    """SmolLM2-135M-Instruct as ``diagevo models smollm2 --warmup-steps N`` builds it, kept between
    test runs under ``$DIAGEVO_MODEL_CACHE`` (default ``~/.cache/diagevo/models``, outside the
    repository) while the builder and its warm-up corpus are unchanged. A half-built directory
    (no provenance) is built again."""
    import fcntl
    import os
    import shutil

    from diagevo.train.hf import pretrained

    source = inspect.getsource(pretrained) + inspect.getsource(tiny)
    key = hashlib.sha256(f"{source}{warm_steps}".encode()).hexdigest()[:12]
    root = Path(os.environ.get("DIAGEVO_MODEL_CACHE") or Path.home() / ".cache" / "diagevo" / "models")
    out = root / f"smollm2-w{warm_steps}-{key}"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{out.name}.lock", "w") as lock:  # two test processes (pytest -n) build it once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / pretrained.PROVENANCE).is_file():
            if out.exists():
                shutil.rmtree(out)
            pretrained.build(out, warm=pretrained.FormatWarmUp(steps=warm_steps))
    return out
