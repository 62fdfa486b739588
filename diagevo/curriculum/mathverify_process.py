"""One math-verify child process as :class:`~diagevo.curriculum.equivalence.EquivalenceChecker`
talks to it (started in a session of its own, read with a deadline, killed with its group), and
the bounded memo the checker keeps of texts and verdicts. Apart from the checker's rules (what is
checked, under which limits and budgets) so that each says one thing: how a child is driven here,
what is asked of it there."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any


class Memo:
    """The last ``size`` keys remembered, each with a value: bounded, the oldest forgotten first.
    Texts that passed a limit (with the limits they passed), and the verdicts of pairs."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._keys: OrderedDict[Any, Any] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def get(self, key: Any, default: Any = None) -> Any:
        return self._keys.get(key, default)

    def add(self, key: Any, value: Any = None) -> bool:
        """Remember ``key`` (with ``value``); whether it is new."""
        new = key not in self._keys
        self._keys[key] = value
        self._keys.move_to_end(key)
        while len(self._keys) > self.size:
            self._keys.popitem(last=False)
        return new


class WorkerGone(Exception):
    """The child ended (its output closed) while a reply was awaited."""


@dataclass(eq=False)
class Worker:
    """One math-verify child process, the answers parsed in it, and its unread replies."""

    proc: subprocess.Popen[bytes] | None = None
    pid: int = 0  # the process that started it (a forked child must not use it)
    ready: bool = False
    busy: bool = False  # a check holds it
    fresh: bool = True  # its child (or the next, when none runs) has served nothing: see _fresh_verify
    buf: bytes = b""
    parse_ids: dict[str, tuple[int, bool]] = field(default_factory=dict)  # text -> (id, parsed ok)

    def start(self, command: list[str]) -> bool:
        self.ready = False
        self.fresh = True
        self.buf = b""
        self.parse_ids.clear()
        self.pid = os.getpid()
        try:
            self.proc = subprocess.Popen(  # its own group: the forked child goes with it
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
                start_new_session=True,
            )
        except OSError:
            self.proc = None
            return False
        return True

    def usable(self) -> bool:
        return self.proc is not None and self.pid == os.getpid() and self.proc.poll() is None

    def close(self) -> bool:
        """Kill the process; whether it had ended itself over its CPU-time limit."""
        proc, self.proc = self.proc, None
        self.ready = False
        self.parse_ids.clear()
        if proc is None or self.pid != os.getpid():
            return False
        over_limit = proc.poll() == -signal.SIGVTALRM
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        return over_limit or proc.returncode == -signal.SIGVTALRM

    def readline(self, deadline: float) -> dict[str, Any] | None:
        """The next reply, or None at the deadline. Raises WorkerGone on EOF."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise WorkerGone
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)
