"""Progress of long commands, in and out of a terminal.

On a terminal: Rich bars, one per phase. Into a pipe or a log file: plain lines on stderr,
at most one every ``every`` seconds per phase (and one when a phase completes), each with the
phase, the count, the rate and an ETA, so a long ``models tiny`` or ``train`` is never silent.
Both take the library's ``(phase, done, total)`` callbacks.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from diagevo.cli.safe import plain
from diagevo.runtime.progress import ProgressFn


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class PlainProgress:
    """Rate-limited plain lines: ``[  1m05s] solver GRPO 30/64 (2.4/s, ETA 14s)``; a phase slower than one
    step a second gives its seconds a step (``22s/step``)."""

    def __init__(
        self,
        out: TextIO,
        names: Mapping[str, str] | None = None,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out, self.names, self.every, self.clock = out, dict(names or {}), every, clock
        self.started = clock()
        self.phases: dict[str, tuple[float, int]] = {}  # phase -> (started, done at start)
        self.last: dict[str, float] = {}
        self.done: dict[str, int] = {}

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        now = self.clock()
        if phase not in self.phases or done < self.done.get(phase, 0):  # a phase (re)starts: the next round's
            self.phases[phase] = (now, done)
            self.last.pop(phase, None)
            self.last.pop(phase + "/done", None)
        self.done[phase] = done
        finished = total is not None and done >= total
        last = self.last.get(phase)
        if not finished and last is not None and now - last < self.every:
            return
        if finished and last is not None and self.last.get(phase + "/done") == done:
            return  # said already
        self.last[phase] = now
        if finished:
            self.last[phase + "/done"] = done
        began, at = self.phases[phase]
        rate = (done - at) / (now - began) if now > began and done > at else None
        count = f"{done}/{total}" if total is not None else str(done)
        extra = []
        if rate:
            extra.append(f"{rate:.1f}/s" if rate >= 1 else f"{_duration(1 / rate)}/step")  # slow phases: not 0.0/s
            if total is not None and not finished:
                extra.append(f"ETA {_duration((total - done) / rate)}")
        elif finished:
            extra.append("done")
        tail = f" ({', '.join(extra)})" if extra else ""
        self.out.write(
            f"[{_duration(now - self.started):>6}] {plain(self.names.get(phase, phase), limit=80)} {count}{tail}\n"
        )
        self.out.flush()


class RichBars:
    """One Rich bar per phase; ``reset_on`` names the phase whose advance starts the others over."""

    def __init__(self, progress: Progress, names: Mapping[str, str], reset_on: str | None) -> None:
        self.progress, self.names, self.reset_on = progress, names, reset_on
        self.tasks: dict[str, Any] = {}

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if phase not in self.tasks:
            self.tasks[phase] = self.progress.add_task(plain(self.names.get(phase, phase), limit=80), total=total)
        self.progress.update(self.tasks[phase], completed=done, total=total)
        if phase == self.reset_on and done and total and done < total:
            for name, other in list(self.tasks.items()):  # a new round: phase bars start over
                if name != phase:
                    self.progress.remove_task(other)
                    del self.tasks[name]


@contextmanager
def progress_for(
    console: Console,
    *,
    names: Mapping[str, str] | None = None,
    enabled: bool = True,
    reset_on: str | None = None,
    transient: bool = False,
    ignore: tuple[str, ...] = ("load",),
    width: int | None = 24,
    rate: bool = False,
) -> Iterator[ProgressFn]:
    """A progress callback for ``console``: Rich bars on a terminal, plain rate-limited lines on
    stderr otherwise, nothing when not ``enabled``. A bar's phase name is padded to ``width``;
    ``rate`` adds the items per second."""
    names = dict(names or {})
    if not enabled:
        yield lambda _phase, _done, _total: None
        return
    if not console.is_terminal:
        plain = PlainProgress(sys.stderr, names)
        yield lambda phase, done, total: None if phase in ignore else plain(phase, done, total)
        return

    cols = bar_columns(width, rate=rate)
    with Progress(*cols, console=console, transient=transient) as progress:
        bars = RichBars(progress, names, reset_on)
        yield lambda phase, done, total: None if phase in ignore else bars(phase, done, total)


def bar_columns(width: int | None = 24, *, rate: bool = False) -> tuple[ProgressColumn, ...]:
    """The columns of a phase bar: its name padded to ``width``, the bar, done/total, with
    ``rate`` the items per second, the time spent and the time left."""
    return (
        TextColumn("{task.description}" if width is None else f"{{task.description:<{width}}}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        *((RateColumn(),) if rate else ()),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )


class RateColumn(ProgressColumn):
    """The items per second of a phase bar."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.speed:7.1f}/s" if task.speed else " " * 9, style="progress.data.speed")
