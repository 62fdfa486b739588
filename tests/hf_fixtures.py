"""The tiny local model pair, built once and kept in pytest's cache while its builder is unchanged."""

from __future__ import annotations

import hashlib
import inspect
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
    if not (out / "tiny.json").is_file():
        tiny.build_tiny(out, TEST_SPEC)
    return out
