"""The steps as functions of (store, run, round).

Each builds a Round, so each reads the config and M_{t-1} afresh; a trainer that takes several
steps of one round keeps a :class:`~diagevo.rounds.Round` instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from diagevo.catalog import (
    Event,
)
from diagevo.log import Recorder
from diagevo.results import Json
from diagevo.results.rounds import Committed, Promotion
from diagevo.rounds.failures import FailureRecord
from diagevo.rounds.questions import Candidate, Recorded, Request
from diagevo.rounds.round import Round


def requests(
    store: Recorder, run: str, t: int, n: int, *, purpose: str = "curriculum", seed: int | None = None
) -> list[Request]:
    """:meth:`Round.requests` of round ``t``."""
    return Round(store, run, t).requests(n, purpose=purpose, seed=seed)


def record(store: Recorder, run: str, t: int, candidates: Sequence[Candidate]) -> Recorded:
    """:meth:`Round.record` of round ``t``."""
    return Round(store, run, t).record(candidates)


def promote(store: Recorder, run: str, t: int, *, allow_empty: bool = False) -> list[Promotion]:
    """:meth:`Round.promote` of round ``t``."""
    return Round(store, run, t).promote(allow_empty=allow_empty)


def record_failures(store: Recorder, run: str, t: int, failures: Sequence[FailureRecord | Mapping[str, object]]) -> int:
    """:meth:`Round.record_failures` of round ``t``."""
    return Round(store, run, t).record_failures(failures)


def note(store: Recorder, run: str, t: int, key: str, event: Event) -> None:
    """:meth:`Round.note` of round ``t``."""
    Round(store, run, t).note(key, event)


def commit(
    store: Recorder,
    run: str,
    t: int,
    metrics: Mapping[str, float] | None = None,
    *,
    summary: Mapping[str, Json] | None = None,
    allow_undiagnosed: bool = False,
    allow_failed: bool = False,
) -> Committed:
    """:meth:`Round.commit` of round ``t``."""
    return Round(store, run, t).commit(
        metrics, summary=summary, allow_undiagnosed=allow_undiagnosed, allow_failed=allow_failed
    )
