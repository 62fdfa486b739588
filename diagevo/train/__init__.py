"""Training: the co-evolution loop and its backends."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from diagevo.config import Config, redact_url
from diagevo.errors import BadInput, Conflict, NotFound, Unavailable
from diagevo.events.store import EventStore
from diagevo.train.backend import Backend, ProgressFn, no_progress


class BackendUnavailable(Unavailable, ValueError):
    """The configured backend cannot run on this installation."""


def make_backend(config: Config) -> Backend:
    if config.train.backend == "sim":
        from diagevo.train.sim import SimBackend

        return SimBackend(config, config.train.seed)
    if config.train.backend == "hf":
        try:
            from diagevo.train.hf.backend import HFBackend
        except ImportError as exc:
            raise BackendUnavailable(f"backend \"hf\" needs the hf extra (pip install -e '.[hf]'): {exc}") from None
        return HFBackend(config, config.train.seed)
    raise BackendUnavailable(
        f"backend {config.train.backend!r} is not part of this build; use backend = \"sim\""
    )


def default_run_id(config: Config) -> str:
    return config.train.run or f"{config.train.backend}-s{config.train.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_id_for(store: EventStore, config: Config, resume: bool) -> str:
    """The run to train: the configured id, the latest run when resuming, else a new id.
    Resuming a run the log does not hold is an error, not a new run."""
    if config.train.run:
        exists = config.train.run in store.runs()
        if resume and not exists:
            raise NotFound(f"no run {config.train.run!r} to resume in {redact_url(store.url)}")
        if exists and not resume:
            raise Conflict(f"run {config.train.run!r} already exists in {redact_url(store.url)}; pass --resume to continue it")
        return config.train.run
    if resume:
        latest = store.latest_run()
        if latest is None:
            raise NotFound(f"nothing to resume in {redact_url(store.url)}")
        return latest
    return default_run_id(config)


def stored_config(store: EventStore, run: str) -> Config | None:
    """The run's config as the log records it (None for a new run): :func:`diagevo.rounds.stored_config`."""
    from diagevo.rounds import stored_config as recorded

    return recorded(store, run)


def reconfigure(store: EventStore, run: str, saved: Config, overrides: list[str]) -> Config:
    """``saved`` with ``overrides`` applied; a change is recorded as ``run.configured`` before
    the next round (a round already under way keeps the config it started with)."""
    from diagevo.config import apply_overrides
    from diagevo.events.keys import event_id
    from diagevo.events.schemas import new_event
    from diagevo.replay import committed_rounds

    data = apply_overrides(saved.model_dump(mode="json", exclude={"db"}), overrides)
    try:
        config = Config.model_validate(data)
    except Exception as exc:  # pydantic's message, first line
        raise BadInput(f"config: {str(exc).splitlines()[0]}") from None
    if config.redacted() == saved.redacted():
        return config
    t = max(committed_rounds(store, run), default=0) + 1
    if any(True for _ in store.read(run, round=t, limit=1)):  # round t has begun (an indexed read)
        raise Conflict(f"run {run!r} is in the middle of round {t}: finish it before changing its config")
    record = config.redacted() | {"k": config.memory.k}
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]
    store.append([new_event("run.configured", run, t, event_id(run, t, "run.configured", digest), config=record, seed=config.train.seed)])
    return config


def train(
    config: Config,
    store: EventStore,
    *,
    resume: bool = False,
    rounds: int | None = None,
    progress: ProgressFn = no_progress,
    on_round: Callable[..., None] = lambda r: None,
    backend: Backend | None = None,
    overrides: list[str] | None = None,
    lead: Callable[[Backend], Backend] | None = None,
) -> tuple[str, list]:
    """Train (or resume) a run up to round ``rounds`` (default: the config's); returns the run id
    and the reports of the rounds it ran. ``lead`` wraps the backend, built from the run's
    config, for the rank that leads a multi-process launch."""
    from diagevo.train.loop import Trainer

    if rounds is not None and rounds < 1:
        raise BadInput(f"rounds must be at least 1, not {rounds}")
    run = run_id_for(store, config, resume)
    if run in store.runs():
        if not resume:
            raise Conflict(f"run {run!r} already exists in {redact_url(store.url)}; pass --resume to continue it")
        saved = stored_config(store, run)
        if saved is not None:
            if overrides:
                saved = reconfigure(store, run, saved, overrides)
            config = saved.model_copy(update={"db": config.db})
    progress("load", 0, None)
    models = backend or make_backend(config)
    trainer = Trainer(config, store, lead(models) if lead else models, run, progress=progress, on_round=on_round)
    return run, trainer.train(rounds)


@contextmanager
def this_rank(config: Config) -> Iterator[tuple[Config, Callable[[Backend], Backend] | None] | None]:
    """The role of this process in a launch, for :func:`train`'s ``lead``.

    One process: yields ``(config, None)``. Under ``accelerate launch`` (the hf backend on several
    GPUs): rank 0 gets ``(config, lead)``, the config with the launch's process count and the hook
    that makes its backend send each phase to every rank, and trains against the store; any other
    rank follows rank 0's phase commands here, without a database, and gets None when rank 0 is
    done. On leaving, the leader tells the followers to stop and the process group is closed."""
    from diagevo.train.hf import distributed

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
        yield config, distributed.Leader
    finally:
        distributed.stop()
        distributed.finish()


def cause_to_audit(store: EventStore, run: str) -> str | None:
    """A cause worth ``memory why``: the last one reactivated, else the last one promoted, else
    the most recently created."""
    last: dict[str, str] = {}
    for e in store.read(run, types=("cause.reactivated", "cause.promoted", "cause.created")):
        last[e.type] = e.data["cause_id"]
    for kind in ("cause.reactivated", "cause.promoted", "cause.created"):
        if kind in last:
            return last[kind]
    return None
