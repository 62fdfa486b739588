"""The checkpoints a run's log names, for what loads them (a resume, a fork, eval, the trainers'
checks): where they lie, which one a round resumes from, and the first checkpoint event that breaks
the checkpoint rule, each refusal with the way back. Apart from the read commands' values
(:mod:`~diagevo.views.queries`): these read the counting rules and the config's way back, which no
read command loads."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from diagevo.catalog import CheckpointWritten, RunForked, RunStarted
from diagevo.errors import BadInput, Call, NotFound
from diagevo.files.confined import checkpoint_dir, owned_dir
from diagevo.log import EventReader
from diagevo.memory.counting import CHECKPOINT_TYPES, breaks
from diagevo.views.configs import recovery
from diagevo.views.typed import last_event, typed


def checkpoint_folders(store: EventReader, run: str, root: Path) -> list[Path]:
    """Where the checkpoints ``run``'s log names may lie, in the order they are looked for: the
    run's folder under ``root`` (``train.out_dir``, or the database's folder), then its fork
    source's, and so on (a fork's copied rounds wrote theirs there), each reached without a link."""
    from diagevo.log.paths import run_name  # loaded by the commands that read checkpoints (it loads sqlalchemy)

    folders: list[Path] = []
    seen: set[str] = set()
    current: str | None = run
    while isinstance(current, str) and current not in seen:
        seen.add(current)
        folders.append(owned_dir(root, run_name(current), create=False))
        marker = last_event(store, current, RunForked)
        current = marker.source_run if marker is not None else None
    return folders


def runs_root(store: EventReader, config: Mapping[str, Any]) -> Path:
    """The folder the run folders of a run with this config (its ``run.started`` record) lie in:
    its ``train.out_dir``, else the database's folder (``runs``)."""
    from diagevo.log.paths import beside_database

    train = config.get("train")
    out_dir = train.get("out_dir") if isinstance(train, Mapping) else None
    return Path(out_dir) if isinstance(out_dir, str) and out_dir else beside_database(store.url, ".runs", move=False)


def resume_checkpoint(store: EventReader, run: str, t: int, root: Path) -> Path | None:
    """The checkpoint round ``t`` of ``run`` resumes from (None: the run wrote none yet): the
    latest its log names, which the checkpoint rule (:func:`~diagevo.memory.counting.checkpoint_rule`)
    makes the latest of its phase and never pruned. A log that breaks the rule (a row stored
    past the checks) is refused naming the event, as a checkpoint whose folder is gone is, each
    with the way back: a resume never trains on from other weights than the log says."""
    refused = checkpoint_refusal(store, run)
    if refused is not None:
        raise BadInput(f"cannot continue run {run!r} at round {t}: {refused[0]}", refused[1], aside=True, about=run)
    written = [row for row in store.rows(run, types=(CheckpointWritten,)) if row[1] <= t]
    if not written:
        return None
    last = written[-1]
    try:
        return checkpoint_dir(checkpoint_folders(store, run, root), typed(CheckpointWritten, last).path)
    except FileNotFoundError as exc:
        how, fork = recovery(store, run, last)
        raise NotFound(
            f"cannot continue run {run!r} at round {t}: {exc} (checkpoint.written in round {last.round}, "
            f"seq {last.seq}): put it back, or {how}",
            fork,
            aside=True,
            about=run,
        ) from None


def checkpoint_refusal(store: EventReader, run: str, upto_seq: int | None = None) -> tuple[str, Call | None] | None:
    """The first checkpoint event of ``run`` (up to ``upto_seq``) that breaks the checkpoint rule,
    in words that end with the way back, and the fork that takes it (None: no event does)."""
    broken = next(breaks(store.rows(run, types=CHECKPOINT_TYPES, upto_seq=upto_seq)), None)
    if broken is None:
        return None
    event = store.event_at(run, broken.at)
    assert event is not None, (run, broken.at)  # a seq the run's rows just gave
    how, fork = recovery(store, run, event)
    return f"seq {broken.at}: {broken.reason}; {how}", fork


def checkpoint_path(store: EventReader, run: str, path: str, root: Path | None = None) -> Path:
    """The checkpoint a ``checkpoint.written`` of ``run`` names (``path`` as stored), in the run's
    folder or its fork source's (:func:`diagevo.files.confined.checkpoint_dir`): refused by name when
    it is no name the loop gives or a link lies there, :class:`NotFound` when no folder holds it."""
    if root is None:
        started = last_event(store, run, RunStarted)  # a run has one
        root = runs_root(store, started.config if started is not None else {})
    try:
        return checkpoint_dir(checkpoint_folders(store, run, root), path)
    except FileNotFoundError as exc:
        raise NotFound(f"run {run!r}: {exc}") from None
