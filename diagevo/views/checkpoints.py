"""The checkpoints a run's log names, for what loads them (a resume, a fork, eval, the trainers'
checks, the sizes ``memory stats`` shows, the round protocol's progress): where they lie, which
one a round resumes from, and the checkpoint events the checkpoint rule
(:mod:`diagevo.memory.checkpoints`) refuses, which every reader passes over, each named with the
run's admission (:mod:`diagevo.views.admission`).

Where the checkpoints lie comes from the machine, never from a row: the run's folder under the
database's folder (``x.db`` -> ``x.diagevo/runs/<run>/``), or under the folder the command was
given (``train.out_dir`` of the command's own config, ``--out-dir``). A ``train.out_dir`` stored in
the run's config is a record of where its first trainer wrote, no more: one that differs is named
(:func:`stored_out_dir_note`) and not looked in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from diagevo.catalog import CheckpointPruned, CheckpointWritten, RunConfigured, RunStarted
from diagevo.errors import NotFound
from diagevo.files.confined import checkpoint_dir, checkpoint_name, owned_dir
from diagevo.log import EventReader, StoredEvent
from diagevo.log.paths import beside_database, run_name
from diagevo.memory.checkpoints import CHECKPOINT_READS, checkpoint_verdicts
from diagevo.memory.state import Refusal
from diagevo.views.configs import recovery
from diagevo.views.forks import fork_marker


@dataclass(frozen=True)
class CheckpointLog:
    """A run's checkpoint events as its readers take them, in log order: the ``checkpoint.written``
    rows the checkpoint rule (:func:`~diagevo.memory.checkpoints.checkpoint_rule`) takes, the
    ``checkpoint.pruned`` it takes (by the checkpoint's name), and the refusal of each event it
    refuses, passed over (``refused``: the run's admission names them)."""

    run: str
    written: list[StoredEvent] = field(default_factory=list)
    pruned: dict[str, StoredEvent] = field(default_factory=dict)
    refused: list[Refusal] = field(default_factory=list)

    def latest(self, t: int) -> StoredEvent | None:
        """The checkpoint round ``t`` resumes from: the last written up to its round (None: none)."""
        return next((row for row in reversed(self.written) if row.round <= t), None)

    def gone(self, row: StoredEvent) -> StoredEvent | None:
        """The ``checkpoint.pruned`` that deleted the checkpoint ``row`` wrote, or None."""
        name = checkpoint_name(cast(CheckpointWritten, row.event).path)
        return self.pruned.get(name) if name is not None else None


def checkpoint_log(store: EventReader, run: str, upto_seq: int | None = None) -> CheckpointLog:
    """``run``'s checkpoint events (up to ``upto_seq``), each taken or passed over by the
    checkpoint rule: the one place a reader of checkpoints learns which the log names, and the
    rule's part of the run's admission (:mod:`diagevo.views.admission`: the rule and why)."""
    log = CheckpointLog(run)
    rows = store.rows(run, types=CHECKPOINT_READS, upto_seq=upto_seq)
    for row, broken in checkpoint_verdicts(rows):
        if broken is not None:
            log.refused.append(Refusal(row.seq, row.type, f"{broken[0]}: {broken[1]}"))
        elif row.type == CheckpointWritten.name:
            log.written.append(row)
        else:
            name = checkpoint_name(cast(CheckpointPruned, row.event).path)
            assert name is not None  # the rule took it
            log.pruned[name] = row
    return log


def checkpoint_folders(store: EventReader, run: str, root: Path) -> list[Path]:
    """Where the checkpoints ``run``'s log names may lie, in the order they are looked for: the
    run's folder under ``root`` (:func:`runs_root`), then its fork source's, and so on (a fork's
    copied rounds wrote theirs there), each reached without a link."""
    folders: list[Path] = []
    seen: set[str] = set()
    current: str | None = run
    while isinstance(current, str) and current not in seen:
        seen.add(current)
        folders.append(owned_dir(root, run_name(current), create=False))
        marker = fork_marker(store, current)  # the one the rules take: a forged one leads nowhere
        current = marker.source_run if marker is not None else None
    return folders


def runs_root(store: EventReader, given: Path | None = None) -> Path:
    """The folder the run folders lie in: ``given`` (the command's ``train.out_dir`` or
    ``--out-dir``), else the database's folder (``runs``). Never a folder a row names."""
    return Path(given) if given is not None else beside_database(store.url, ".runs", move=False)


def stored_out_dir(store: EventReader, run: str, root: Path) -> tuple[int, str] | None:
    """(seq, folder) of the config in force of ``run`` when it holds a ``train.out_dir`` that is not
    ``root``, the folder looked in (None: it holds none, or that one)."""
    config = next(store.read(run, types=(RunStarted, RunConfigured), limit=1, newest=True), None)
    if config is None:
        return None
    held = getattr(config.event, "config", None)
    stored = _out_dir(held) if isinstance(held, Mapping) else None
    if stored is None or os.path.abspath(stored) == os.path.abspath(root):
        return None
    return config.seq, stored


def stored_out_dir_note(store: EventReader, run: str, root: Path) -> Refusal | None:
    """A stored ``train.out_dir`` of ``run`` that is not ``root`` (the command's folder), named as a
    refused row is: the field is passed over, the folder never looked in (None: none)."""
    found = stored_out_dir(store, run, root)
    if found is None:
        return None
    seq, stored = found
    why = (
        f"its train.out_dir {stored[:200]!r} is not looked in: checkpoints are looked for under "
        f"{os.path.abspath(root)} (the database's folder, or the one the command names)"
    )
    return Refusal(seq, RunConfigured.name, why)


def _out_dir_said(store: EventReader, run: str, root: Path) -> str:
    """A stored ``train.out_dir`` that is not ``root``, as a refusal names it ('' when none)."""
    found = stored_out_dir(store, run, root)
    return f"; not in its stored train.out_dir {found[1][:120]!r} (seq {found[0]})" if found is not None else ""


def resume_checkpoint(store: EventReader, run: str, t: int, root: Path) -> Path | None:
    """The checkpoint round ``t`` of ``run`` resumes from: the latest its log names that the
    checkpoint rule (:func:`~diagevo.memory.checkpoints.checkpoint_rule`) takes, which is the latest
    of its phase and never pruned. An event the rule refuses (a row stored past the checks) is
    passed over and named; a checkpoint whose folder is not under ``root`` is refused in one line
    with the way back, naming a stored ``train.out_dir`` that differs: a resume never trains on
    from other weights than the log's valid events say."""
    last = checkpoint_log(store, run).latest(t)
    if last is None:
        return None
    try:
        path = checkpoint_dir(checkpoint_folders(store, run, root), cast(CheckpointWritten, last.event).path)
    except FileNotFoundError as exc:
        how, fork = recovery(store, run, last)
        raise NotFound(
            f"cannot continue run {run!r} at round {t}: {exc} (checkpoint.written in round {last.round}, "
            f"seq {last.seq}{_out_dir_said(store, run, root)}): put it back (or give the command the folder "
            f"it lies in), or {how}",
            fork,
            aside=True,
            about=run,
        ) from None
    return path


def checkpoint_path(store: EventReader, run: str, path: str, root: Path | None = None) -> Path:
    """The checkpoint a ``checkpoint.written`` of ``run`` names (``path`` as stored), in the run's
    folder under ``root`` (None: the database's folder) or its fork source's
    (:func:`diagevo.files.confined.checkpoint_dir`): refused by name when it is no name the loop
    gives or a link lies there, :class:`NotFound` when no folder holds it."""
    where = runs_root(store, root)
    try:
        return checkpoint_dir(checkpoint_folders(store, run, where), path)
    except FileNotFoundError as exc:
        raise NotFound(f"run {run!r}: {exc}{_out_dir_said(store, run, where)}") from None


def _out_dir(config: Mapping[str, object]) -> str | None:
    train = config.get("train")
    out = train.get("out_dir") if isinstance(train, Mapping) else None
    return out if isinstance(out, str) and out else None
