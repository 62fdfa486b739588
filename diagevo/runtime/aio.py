"""Running a coroutine from synchronous code so that Ctrl-C takes effect at once.

``asyncio.run`` replaces Python's SIGINT handler with one that only *cancels* the main task, at
its next ``await``: a coroutine busy in synchronous work (loading the embedding model, folding
the memory) ignored Ctrl-C until that work was done. :func:`run` keeps Python's own handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` with Ctrl-C raised at once (see the module docstring)."""
    loop = asyncio.new_event_loop()
    finished = False
    try:
        asyncio.set_event_loop(loop)
        result = loop.run_until_complete(coro)
        finished = True
        return result
    finally:
        try:
            _cancel_pending(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            if finished:  # after Ctrl-C, do not wait for executor threads to finish their work
                loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
            if not finished:
                coro.close()  # a coroutine never started (interrupted before its first step)


def _cancel_pending(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not pending:
        return
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
