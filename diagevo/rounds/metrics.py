"""The figures a commit keeps: the ranks' metrics and their weighted mean, a trainer's summary."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from diagevo.catalog import InvalidEvent, MetricsRecorded, RoundCommitted
from diagevo.config.reals import real_number
from diagevo.errors import BadInput
from diagevo.rounds.protocol import ProtocolError
from diagevo.text.parsing import quoted
from diagevo.views.stats import COUNTED_COLUMNS


def rank_metrics(recorded: Sequence[MetricsRecorded]) -> dict[str, float]:
    """The round's metrics from the ranks' ``metrics.recorded``: for each name, the mean over
    the ranks that report it, weighted by their weights. Each weight is divided by the total
    first, so finite values never overflow on the way to their mean; a total weight that is not
    finite is refused (:class:`ProtocolError`), never stored as ``null``."""
    values: dict[str, list[tuple[float, float]]] = {}
    for m in sorted(recorded, key=lambda m: m.rank):  # the same sum in every process
        for name, value in m.metrics.items():
            values.setdefault(name, []).append((float(m.weight), float(value)))
    means: dict[str, float] = {}
    for name, pairs in values.items():
        total = sum(w for w, _ in pairs)  # inf where it overflows (fsum would raise)
        mean = sum(w / total * v for w, v in pairs) if math.isfinite(total) else math.inf
        if not math.isfinite(mean):
            raise ProtocolError(f"metric {name!r}: the ranks' weighted mean is not a finite number (weights too large)")
        means[name] = mean
    return means


COUNTED_HERE = frozenset({*COUNTED_COLUMNS, "F", "epsilon_next", "ranks"})
"""What ``round.committed`` holds that :meth:`Round.commit` counts from the log itself."""


def commit_counts(committed: RoundCommitted) -> dict[str, int | float]:
    """What a commit counted from the log and allowed (``round commit --json``, after the run
    and round): the fields of ``round.committed`` it set, in the order the command printed them
    before :meth:`Round.commit` returned the event; the trainer's own figures stay out."""
    shown = ("failed_diagnoses_allowed", *COUNTED_COLUMNS, "ranks", "F", "epsilon_next")
    return {name: value for name in shown if (value := getattr(committed, name)) is not None}


def check_summary(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """A trainer's own figures for ``round.committed``: named by strings other than what the
    commit counts from the log (a summary cannot say how many questions or failures a round had,
    nor F_t), those its class declares (``timing`` a table, ``heldout_acc`` a number ...) of
    their type, :class:`ProtocolError` naming the first that is not. Returns them as its data
    holds them: a declared figure in its field, the others in ``summary``."""
    if summary is None:
        return {}
    if not isinstance(summary, Mapping):
        raise ProtocolError(f"summary must be a mapping of names to values, not {type(summary).__name__}")
    for name in summary:
        if not isinstance(name, str) or not name.strip():
            raise ProtocolError(f"summary name {quoted(name, 60)} must be a non-empty string")
        if name in COUNTED_HERE:
            raise ProtocolError(
                f"summary field {name!r} is counted from the log by the commit itself: leave it out of the summary"
            )
    declared = RoundCommitted.model_fields.keys() - {"summary", "diagevo"}  # diagevo: the version that commits
    out: dict[str, Any] = {k: v for k, v in summary.items() if k in declared}
    if len(out) < len(summary):
        out["summary"] = {k: v for k, v in summary.items() if k not in out}
    try:
        RoundCommitted(**out)
    except InvalidEvent as exc:
        raise ProtocolError(f"summary: {exc}: readers of round.committed read it as such") from None
    return out


def check_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The metrics of a commit: each named by a non-empty string, each a real number (a numpy or
    torch scalar is the number it holds), finite and small enough for a float
    (:class:`ProtocolError` naming the first that is not)."""
    if not isinstance(metrics, Mapping):
        raise ProtocolError(f"metrics must be a mapping of names to numbers, not {type(metrics).__name__}")
    out: dict[str, float] = {}
    for name, value in metrics.items():
        if not isinstance(name, str) or not name.strip():
            raise ProtocolError(f"metric name {quoted(name, 60)} must be a non-empty string")
        try:
            out[name] = real_number(value, f"metric {quoted(name, 60)}")
        except BadInput as exc:
            raise ProtocolError(str(exc)) from None
    return out
