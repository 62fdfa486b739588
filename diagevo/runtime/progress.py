"""The progress callback shared by long-running library code.

Nothing below ``cli/`` prints: training, diagnosis, generation and evaluation report
``(phase, done, total)`` through this callback and the CLI renders it with ``rich.progress``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

ProgressFn = Callable[[str, int, int | None], None]


def no_progress(phase: str, done: int, total: int | None) -> None:
    """The default progress callback: report nothing."""


def quiet_libraries() -> None:
    """Turn off transformers' own tqdm bars (loading weights, writing shards): progress belongs
    to the callback the CLI renders, and those bars would interleave with it on stderr."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def library_logger(name: str) -> logging.Logger:
    """The logger ``name`` (under ``diagevo``) of a module that logs; without a handler of the
    application's, nothing shows."""
    top = logging.getLogger("diagevo")
    if not any(isinstance(h, logging.NullHandler) for h in top.handlers):
        top.addHandler(logging.NullHandler())
    return logging.getLogger(name)
