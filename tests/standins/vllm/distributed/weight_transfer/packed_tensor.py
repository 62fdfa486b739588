"""``packed_nccl_broadcast_producer`` of the stand-in: hands the tensors to ``group.receive`` (the
in-process server of a test) instead of an NCCL broadcast."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


def packed_nccl_broadcast_producer(
    iterator: Iterator[Any], group: Any, src: int = 0, post_iter_func: Callable[[Any], Any] | None = None
) -> None:
    group.receive(list(iterator))
