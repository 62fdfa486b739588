"""Training a run: its id, the config it resumes with, the preflight, its backend, this process's
role in a launch, and :func:`train`, which drives :class:`~diagevo.train.loop.Trainer` round by
round."""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from diagevo.catalog import CauseCreated, CausePromoted, CauseReactivated
from diagevo.doctor import check_hf, require
from diagevo.errors import BadInput, NotFound, open_call, resume_call
from diagevo.log import EventReader, Recorder
from diagevo.memory.state import Refusal
from diagevo.rounds import OUR_TRAINER, configure_run, run_trainer, start_run, stored_config
from diagevo.runtime.progress import ProgressFn, no_progress
from diagevo.text.calls import validated
from diagevo.text.redaction import given_secrets
from diagevo.text.urls import redact_url
from diagevo.text.words import did_you_mean
from diagevo.train.backend import Backend
from diagevo.train.config import Config
from diagevo.train.folders import RunFolders
from diagevo.train.hf import distributed
from diagevo.train.hf.backend import HFBackend
from diagevo.train.mini.world import MiniErrors, truth, variants
from diagevo.train.preflight import preflight
from diagevo.train.sim.backend import SimBackend
from diagevo.views.admission import admitted_rows
from diagevo.views.checkpoints import stored_out_dir_note
from diagevo.views.configs import CONFIG_TYPES, unusable_config
from diagevo.views.forks import latest_run

if TYPE_CHECKING:
    from diagevo.train.loop import RoundReport


@validated
def make_backend(config: Config) -> Backend:
    """The training backend ``config.train.backend`` names: ``sim`` (the CPU simulator world) or
    ``hf`` (transformers + TRL, the ``hf`` extra: refused in one line naming it, by the doctor's
    check, where its packages are missing)."""
    if config.train.backend == "sim":
        return SimBackend(config)
    require(check_hf(config.train))  # "hf", the other the config allows
    if config.hf.named_errors == "mini":  # the mini world: its named errors, and its questions' answers
        return HFBackend(config, named_errors=MiniErrors(), truth=truth, rewrite=variants)
    return HFBackend(config)


def default_run_id(config: Config) -> str:
    """The configured run id, else one that two processes started in the same second cannot
    share: ``BACKEND-sSEED-DATE-TIME.MILLISECONDS-RANDOM``."""
    if config.train.run:
        return config.train.run
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"{config.train.backend}-s{config.train.seed}-{stamp}.{int(now * 1000) % 1000:03d}-{secrets.token_hex(4)}"


def resume_note(store: Recorder, config: Config, run: str) -> Refusal | None:
    """A resumed run's stored ``train.out_dir`` that is not where its checkpoints are looked for
    (the machine's folder is: ``config``'s, the command's), said as a refused row is; None: none."""
    return stored_out_dir_note(store, run, RunFolders.of(config, store.url).checkpoints)


def run_id_for(store: Recorder, config: Config, resume: bool) -> str:
    """The run to train: the configured id, the latest run when resuming, else a new id.
    Resuming a run the log does not hold is an error, not a new run."""
    if config.train.run:
        exists = store.has_run(config.train.run)
        if resume and not exists:
            meant = did_you_mean(config.train.run, store.runs())
            raise NotFound(f"no run {config.train.run!r} to resume in {redact_url(store.url)}{meant}")
        if exists and not resume:
            raise BadInput(
                f"run {config.train.run!r} already exists in {redact_url(store.url)}; continue it with",
                resume_call(config.train.run, config.train.out_dir),
                about=config.train.run,
            )
        return config.train.run
    if resume:
        latest = latest_run(store)
        if latest is None:
            raise NotFound(f"nothing to resume in {redact_url(store.url)}")
        return latest
    return default_run_id(config)


def refuse_foreign_resume(store: EventReader, run: str) -> None:
    """``train --resume`` continues only a run ``diagevo train`` started (or a fork of one): on
    another trainer's run it would write diagevo's own backend's rounds into that run."""
    trainer = run_trainer(store, run)
    if trainer is not None and trainer != OUR_TRAINER:
        raise BadInput(
            f"run {run!r} is driven by {trainer!r}, not by diagevo's own trainer: resuming it here would write "
            f"diagevo's own rounds into it; continue it with its trainer through the round protocol",
            open_call(run),
            aside=True,
            about=run,
        )


class Resumed(NamedTuple):
    """The config a resumed run trains with, and the change to record as ``run.configured``
    (None: the log's config stands): recorded only once the run is known to start."""

    config: Config
    change: Config | None


def resumed_config(store: Recorder, run: str, config: Config, overrides: list[str] | None = None) -> Resumed:
    """The config a resumed run trains with: the one its log records (each component's part
    validated by its owner, :meth:`Config.of`), ``overrides`` applied (the change to record), and
    the credentials the log does not keep (a URL's password is stored as ``***``) taken from
    ``config``, the command's, where it names the same URL. Nothing is written here: the change is
    recorded as ``run.configured`` by :func:`train` once the preflight passed (refused while a round
    is under way). Where the checkpoints lie is the machine's, not the log's: the command's
    ``train.out_dir`` (unset: the database's folder), whatever the stored config says (:func:`train`
    names a stored one that differs)."""
    stored = stored_config(store, run)
    if stored is None:
        return Resumed(config, None)
    try:
        saved = Config.of(stored)
    except BadInput as exc:  # a component's field that its owner no longer takes (or a null)
        last = next(store.read(run, types=CONFIG_TYPES, limit=1, newest=True))
        raise unusable_config(store, run, last, str(exc)) from None
    secrets = given_secrets(saved.redacted(), config.model_dump(mode="json", exclude={"db"}))
    wanted = [*(f"{field}={json.dumps(value)}" for field, value in secrets), *(overrides or [])]
    if wanted:
        saved = saved.overridden(wanted)
    here = saved.train.model_copy(update={"out_dir": config.train.out_dir})
    return Resumed(saved.model_copy(update={"db": config.db, "train": here}), saved if wanted else None)


def ready(config: Config, folders: RunFolders) -> None:
    """The preflight (:mod:`diagevo.train.preflight`): a missing need is refused (exit code 2)."""
    require(preflight(config, folders.checkpoints))


def _no_report(report: RoundReport) -> None:
    """The default ``on_round``: nothing to do with a round's report."""


@dataclass(frozen=True)
class TrainOptions:
    """How :func:`train` runs, beside the config and the log: ``resume`` the run the config
    names (or the latest); ``rounds``, the round to train up to (default: the config's);
    ``progress`` and ``on_round`` (each round's report), what the caller is told as it goes;
    ``backend``, the models (default: the config's); ``overrides`` of a resumed run's config
    (``section.field=value``); ``lead``, the wrap of the backend for the rank that leads a
    multi-process launch; ``checked``: the preflight was run on the config already."""

    resume: bool = False
    rounds: int | None = None
    progress: ProgressFn = no_progress
    on_round: Callable[[RoundReport], None] = _no_report
    backend: Backend | None = None
    overrides: tuple[str, ...] = ()
    lead: Callable[[Backend], Backend] | None = None
    checked: bool = False


class Trained(NamedTuple):
    """What :func:`train` did: the run, and the report of each round it trained, in order."""

    run: str
    reports: list[RoundReport]


def train(config: Config, store: Recorder, options: TrainOptions | None = None) -> Trained:
    """Train (or resume) a run up to round ``options.rounds`` (default: the config's): the run id
    and the reports of the rounds it ran (:class:`Trained`).

    The preflight (:func:`ready`) refuses a config this machine cannot run before the run or its
    lease is written; ``checked=True``: the caller has run it on ``config`` already (``diagevo
    train`` does, before it creates the database), so it is not run twice. A resumed run trains
    with the config its log records, which is checked here in any case; its checkpoints are
    looked for where ``config`` (the command's) puts them, a stored ``train.out_dir`` that differs
    ignored (:func:`~diagevo.views.checkpoints.stored_out_dir_note` says so)."""
    o = options or TrainOptions()
    resume, rounds, backend, progress = o.resume, o.rounds, o.backend, o.progress
    # the loop (the diagnosis pipeline, the tracker, the views of a round) loads when a run trains,
    # not for ``diagevo train --help`` or ``ablate --help``, which read this module
    from diagevo.train.loop import Trainer

    if rounds is not None and rounds < 1:
        raise BadInput(f"rounds must be at least 1, not {rounds}")
    store.lock_wait_s = config.limits.lock_wait_s
    run = run_id_for(store, config, resume)
    folders = RunFolders.of(config, store.url)  # the machine's, never a stored config's
    folders.check(config, run)  # before the lease or any event: a refusal writes nothing
    wanted = [*o.overrides, *([f"train.rounds={rounds}"] if rounds is not None else [])]
    if backend is None and not resume and not o.checked:
        ready(config, folders)  # before the run (or its lease) is written: a refusal leaves nothing
    if resume:
        refuse_foreign_resume(store, run)
    # one training process per run, named in its lease by its pid, host and start; a second is refused
    holder = f"train (pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')})"
    with store.lease(run, holder):
        if resume:
            config, change = resumed_config(store, run, config, wanted)
            if backend is None:
                ready(config, folders)  # a refused resume writes nothing
            if change is not None:
                configure_run(store, run, change)
        else:  # one decision under the append lock: of two processes creating this id, one is refused
            if rounds is not None:
                config = config.model_copy(update={"train": config.train.model_copy(update={"rounds": rounds})})
            start_run(store, run, config, config.train.seed, resume="never", trainer=OUR_TRAINER)
        progress("load", 0, None)
        models = backend or make_backend(config)
        led = o.lead(models) if o.lead else models
        trainer = Trainer(config, store, led, run, folders=folders, progress=progress, on_round=o.on_round)
        return Trained(run, trainer.train(config.train.rounds))


@contextmanager
def this_rank(config: Config) -> Iterator[tuple[Config, Callable[[Backend], Backend] | None] | None]:
    """The role of this process in a launch, for :func:`train`'s ``lead``.

    One process: yields ``(config, None)``. Under ``accelerate launch`` (the hf backend on several
    GPUs): rank 0 gets ``(config, lead)``, the config with the launch's process count and the hook
    that makes its backend send each phase to every rank, and trains against the store; any other
    rank follows rank 0's phase commands here, without a database, and gets None when rank 0 is
    done. On leaving, the leader tells the followers to stop and the process group is closed."""
    config, leads = distributed.for_this_rank(config)
    if not leads:  # a model worker: rank 0's phase commands, no database
        try:
            distributed.follow(make_backend)
        finally:
            distributed.finish()
        yield None
        return
    if distributed.world_size() == 1:
        yield config, None
        return
    try:
        yield config, distributed.lead
    finally:
        distributed.stop()
        distributed.finish()


def cause_to_audit(store: Recorder, run: str) -> str | None:
    """A cause worth ``memory why``: the last one reactivated, else the last one promoted, else
    the most recently created."""
    preferred = (CauseReactivated, CausePromoted, CauseCreated)
    last: dict[str, str] = {}
    for e in admitted_rows(store, run, types=preferred):
        match e.event:
            case CauseReactivated(cause_id=cause) | CausePromoted(cause_id=cause) | CauseCreated(cause_id=cause):
                last[e.type] = cause
    for kind in preferred:
        if kind.name in last:
            return last[kind.name]
    return None
